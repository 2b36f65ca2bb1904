// Package check is the task precheck (DESIGN.md §5, §9): before a
// subtask's first unit runs, and for `dmctl task check FILE`, it checks
// every requirement the subtask's task mode has on its source and target —
// connectivity, the source user's privileges, the binlog settings, GTID
// mode, tables without a key, a writable target and target tables whose
// schema differs from the source's — and reports them all at once, each
// failure with the statement or setting that fixes it.
//
// It owns nothing on the servers: on the source it only reads; on the
// target it creates <meta-schema> when missing and one scratch table
// there, which it drops again. It imports nothing of the worker or the
// units.
package check

import (
	"fmt"
	"strings"

	"github.com/dmworker/dm-worker/pkg/errs"
)

// CodePrecheckFailed is the code of Report.Err: a subtask does not start
// because its source or target does not meet a requirement.
const CodePrecheckFailed = "precheck-failed"

// State is the outcome of one check.
type State string

// States of an Item.
const (
	StatePass State = "pass"
	// StateWarn does not block the subtask.
	StateWarn State = "warn"
	StateFail State = "fail"
)

// Item is one checked requirement. Name is the check (binlog_format,
// privilege_select, ...), Object what it was checked on (a source, a
// server address, a table), Fix what the operator does about a warning or
// failure.
type Item struct {
	Name    string `json:"name"`
	Object  string `json:"object"`
	State   State  `json:"state"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`

	// retryable marks a failure caused by a connection or timeout error
	// (errs.IsResumable): retrying may succeed.
	retryable bool
	// cause is the error behind a failure that came from one (connection,
	// query), nil for a requirement that is not met.
	cause error
}

// Report is the outcome of every check of one subtask, in a fixed order:
// the source's checks, then the target's.
type Report struct {
	Task   string `json:"task"`
	Source string `json:"source"`
	Items  []Item `json:"items"`
}

// Failures returns the items that block the subtask.
func (r *Report) Failures() []Item { return r.only(StateFail) }

// Warnings returns the items that do not block the subtask but deserve a
// look.
func (r *Report) Warnings() []Item { return r.only(StateWarn) }

func (r *Report) only(s State) []Item {
	var out []Item
	for _, it := range r.Items {
		if it.State == s {
			out = append(out, it)
		}
	}
	return out
}

// Err is nil when nothing failed; otherwise one CodePrecheckFailed error
// whose text lists every failure with its fix. It is not resumable — the
// operator has to change the source or target — unless every failure was
// caused by a connection or timeout error (a server that could not be
// reached), which retrying may cure.
func (r *Report) Err() error {
	fails := r.Failures()
	if len(fails) == 0 {
		return nil
	}
	resumable := true
	var b strings.Builder
	for _, f := range fails {
		resumable = resumable && f.retryable
		b.WriteString("\n  - ")
		b.WriteString(f.Line())
	}
	return errs.New(CodePrecheckFailed, resumable, "precheck of task %s on source %s: %d failure(s); fix them and resume the task:%s",
		r.Task, r.Source, len(fails), b.String())
}

// Cause returns the error of the first failure when every failure came
// from an error (a server that could not be reached or queried, a TLS
// setting) rather than from a requirement that is not met; nil otherwise.
// The worker reports such an error with its own code (db-tls, ...), as the
// units would.
func (r *Report) Cause() error {
	fails := r.Failures()
	for _, f := range fails {
		if f.cause == nil {
			return nil
		}
	}
	if len(fails) == 0 {
		return nil
	}
	return fails[0].cause
}

// Line is the item as one line of text: "name: message; fix: fix".
func (it Item) Line() string {
	s := it.Name + ": " + it.Message
	if it.Fix != "" {
		s += "; fix: " + it.Fix
	}
	return s
}

// items collects the items of one server's checks.
type items struct {
	list []Item
}

func (l *items) add(name, object string, st State, fix string, format string, args ...any) {
	l.list = append(l.list, Item{Name: name, Object: object, State: st, Message: fmt.Sprintf(format, args...), Fix: fix})
}

// failErr adds a failure caused by err, retryable when err is.
func (l *items) failErr(err error, name, object, fix, format string, args ...any) {
	l.fail(name, object, fix, format, args...)
	l.list[len(l.list)-1].retryable = errs.IsResumable(err)
	l.list[len(l.list)-1].cause = err
}

func (l *items) pass(name, object, format string, args ...any) {
	l.add(name, object, StatePass, "", format, args...)
}

func (l *items) warn(name, object, fix, format string, args ...any) {
	l.add(name, object, StateWarn, fix, format, args...)
}

func (l *items) fail(name, object, fix, format string, args ...any) {
	l.add(name, object, StateFail, fix, format, args...)
}

// capList joins at most max names with ", " and says how many there are
// in all.
func capList(names []string, max int) string { return capJoin(names, max, ", ") }

// capJoin is capList with another separator.
func capJoin(names []string, max int, sep string) string {
	if len(names) <= max {
		return strings.Join(names, sep)
	}
	return fmt.Sprintf("%s and %d more (%d in all)", strings.Join(names[:max], sep), len(names)-max, len(names))
}
