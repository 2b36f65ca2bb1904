// Package errs owns the error vocabulary that crosses the worker's API: coded
// errors with an explicit resumable flag, the classification of driver and
// network errors as resumable or not, and the error entry shown in status
// (DESIGN.md §6).
//
// It must not depend on any other package of this module: every package may
// import it.
package errs

import (
	"errors"
	"fmt"
	"time"
)

// CodeInternal is the code of an error that carries no Coded error.
const CodeInternal = "internal"

// Error is an error entry as shown in status (DESIGN.md §6).
type Error struct {
	Code      string    `json:"code"`
	Message   string    `json:"message"`
	Resumable bool      `json:"resumable"`
	Time      time.Time `json:"time"`
}

// Coded is an error with a stable code and an explicit resumable flag. It
// wraps the error built from its format, so errors.Is/As reach any %w
// operand.
type Coded struct {
	code      string
	resumable bool
	err       error
}

// Error returns the human text.
func (e *Coded) Error() string { return e.err.Error() }

// Unwrap returns the wrapped error (the formatted text with its %w operands).
func (e *Coded) Unwrap() error { return e.err }

// Code returns the stable code.
func (e *Coded) Code() string { return e.code }

// Resumable reports whether retrying the failed work may succeed.
func (e *Coded) Resumable() bool { return e.resumable }

// New returns a Coded error. format and args follow fmt.Errorf, so %w wraps a
// cause that errors.Is/As find.
func New(code string, resumable bool, format string, args ...any) error {
	return &Coded{code: code, resumable: resumable, err: fmt.Errorf(format, args...)}
}

// Wrap returns a Coded error whose message is the formatted text followed by
// ": " and err's text, and whose resumable flag is IsResumable(err). Wrap of
// a nil error is nil.
func Wrap(err error, code string, format string, args ...any) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf(format, args...)
	return &Coded{code: code, resumable: IsResumable(err), err: fmt.Errorf("%s: %w", msg, err)}
}

// Code returns the code of the outermost Coded error in err's chain,
// CodeInternal when there is none, and "" for a nil error.
func Code(err error) string {
	if err == nil {
		return ""
	}
	var c *Coded
	if errors.As(err, &c) {
		return c.code
	}
	return CodeInternal
}

// Entry turns err into the entry shown in status, stamped with now.
func Entry(err error, now time.Time) Error {
	return Error{Code: Code(err), Message: err.Error(), Resumable: IsResumable(err), Time: now}
}
