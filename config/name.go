package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// NamePattern is the rule every worker, source, task and stream name follows
// (DESIGN.md §2).
const NamePattern = `^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`

// nameRule says in words what NamePattern allows; it is part of every name
// error so that an operator can fix the name without reading code.
const nameRule = "must match " + NamePattern +
	" (1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit)"

var nameRE = regexp.MustCompile(NamePattern)

// ErrInvalidName is matched (errors.Is) by every error ValidateName returns.
var ErrInvalidName = errors.New("config: invalid name")

// NameError reports a worker, source, task or stream name that breaks the
// rule of DESIGN.md §2.
type NameError struct {
	// Kind is what the name names: "worker", "source", "task", "stream".
	Kind string
	// Name is the rejected value.
	Name string
}

// Error names the kind, the bad value and the rule.
func (e *NameError) Error() string {
	return fmt.Sprintf("invalid %s name %q: %s", e.Kind, clip(e.Name), nameRule)
}

// Unwrap makes errors.Is(err, ErrInvalidName) true.
func (e *NameError) Unwrap() error { return ErrInvalidName }

// ValidateName checks a worker, source, task or stream name (kind says which,
// for the message) against NamePattern. It returns nil or a *NameError.
func ValidateName(kind, name string) error {
	if !nameRE.MatchString(name) {
		return &NameError{Kind: kind, Name: name}
	}
	return nil
}

// SanitizeName turns s (typically a host name) into a valid name: every
// character outside [A-Za-z0-9_.-] becomes '-', leading '_', '.' and '-' are
// dropped and the result is cut to 128 characters. It returns "" when nothing
// usable is left.
func SanitizeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '_' || r == '.' || r == '-':
			if b.Len() > 0 {
				b.WriteRune(r)
			}
		default:
			if b.Len() > 0 {
				b.WriteByte('-')
			}
		}
		if b.Len() >= 128 {
			break
		}
	}
	out := b.String()
	if len(out) > 128 {
		out = out[:128]
	}
	return out
}

// clip shortens a value quoted in an error message so that a huge input does
// not produce a huge error.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
