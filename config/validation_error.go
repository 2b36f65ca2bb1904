package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalidConfig is matched (errors.Is) by every *ValidationError, so that
// callers can classify a bad config (not resumable) without string checks.
var ErrInvalidConfig = errors.New("config: invalid configuration")

// FieldError is one problem of a config.
type FieldError struct {
	// Field is the kebab-case path of the field, as written in the config
	// file: "from.port", "mysql-instances[1].route-rules[0]",
	// "routes.route-1.target-schema".
	Field string
	// Value is the offending value as text. Passwords never appear here.
	Value string
	// Problem says what is allowed.
	Problem string
}

// Error names the field, the bad value and what is allowed.
func (e FieldError) Error() string {
	return fmt.Sprintf("%s: bad value %s: %s", e.Field, strconv.Quote(clip(e.Value)), e.Problem)
}

// ValidationError holds every problem found in one config.
type ValidationError struct {
	// Errors is never empty.
	Errors []FieldError
}

// Error joins the problems, one per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		lines[i] = fe.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap makes errors.Is(err, ErrInvalidConfig) true.
func (e *ValidationError) Unwrap() error { return ErrInvalidConfig }

// HasField reports whether one of the problems is about field.
func (e *ValidationError) HasField(field string) bool {
	for _, fe := range e.Errors {
		if fe.Field == field {
			return true
		}
	}
	return false
}

// problems collects FieldErrors while a config is validated.
type problems struct {
	errs []FieldError
}

// add records that field (holding value) breaks the rule described by problem.
func (p *problems) add(field string, value any, problem string) {
	p.errs = append(p.errs, FieldError{Field: field, Value: fmt.Sprint(value), Problem: problem})
}

// name checks a worker/source/task/stream name.
func (p *problems) name(field, kind, value string) {
	if ValidateName(kind, value) != nil {
		p.add(field, value, "invalid "+kind+" name: "+nameRule)
	}
}

// err returns nil when nothing was found, or a *ValidationError.
func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	return &ValidationError{Errors: p.errs}
}

// join builds a field path: join("from", "port") == "from.port".
func join(prefix, field string) string {
	if prefix == "" {
		return field
	}
	return prefix + "." + field
}

// index builds a list element path: index("route-rules", 0) == "route-rules[0]".
func index(prefix string, i int) string {
	return prefix + "[" + strconv.Itoa(i) + "]"
}
