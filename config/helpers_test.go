package config

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// requireProblems asserts that err is a *ValidationError reporting exactly
// the given fields (each at least once, nothing else), all at once, and that
// its text names each field.
func requireProblems(t *testing.T, err error, fields ...string) {
	t.Helper()
	if len(fields) == 0 {
		if err != nil {
			t.Fatalf("want valid, got:\n%v", err)
		}
		return
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want *ValidationError for %v, got %T %v", fields, err, err)
	}
	if !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("errors.Is(err, ErrInvalidConfig) is false")
	}
	var got []string
	for _, fe := range ve.Errors {
		got = append(got, fe.Field)
		if fe.Problem == "" {
			t.Errorf("field %s: empty problem", fe.Field)
		}
	}
	for _, f := range fields {
		if !ve.HasField(f) {
			t.Errorf("want a problem on %q; got problems on %v:\n%v", f, got, err)
		}
		if !strings.Contains(err.Error(), f+": ") {
			t.Errorf("error text does not name %q:\n%v", f, err)
		}
	}
	for _, g := range got {
		if !slices.Contains(fields, g) {
			t.Errorf("unexpected problem on %q:\n%v", g, err)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != len(ve.Errors) {
		t.Errorf("Error() has %d lines for %d problems", n, len(ve.Errors))
	}
}
