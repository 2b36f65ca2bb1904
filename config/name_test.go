package config

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"mysql-01", true},
		{"Task_1.v2", true},
		{"0abc", true},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
		{"", false},
		{"-a", false},
		{".a", false},
		{"_a", false},
		{"a b", false},
		{"a/b", false},
		{"a\n", false},
		{"ä", false},
	}
	for _, tt := range tests {
		err := ValidateName("source", tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateName(%q): not ErrInvalidName", tt.name)
		}
		var ne *NameError
		if !errors.As(err, &ne) || ne.Kind != "source" || ne.Name != tt.name {
			t.Errorf("ValidateName(%q): got %#v", tt.name, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, "source name") || !strings.Contains(msg, NamePattern) {
			t.Errorf("message lacks kind or rule: %s", msg)
		}
		if !strings.Contains(msg, strconv.Quote(clip(tt.name))) {
			t.Errorf("message lacks the value %q: %s", tt.name, msg)
		}
	}
}

func TestSanitizeName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"host-1.example.com", "host-1.example.com"},
		{"my host", "my-host"},
		{"_x", "x"},
		{"--.x", "x"},
		{"ä", ""},
		{"", ""},
		{strings.Repeat("h", 300), strings.Repeat("h", 128)},
	}
	for _, tt := range tests {
		got := SanitizeName(tt.in)
		if got != tt.want {
			t.Errorf("SanitizeName(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got != "" {
			if err := ValidateName("worker", got); err != nil {
				t.Errorf("SanitizeName(%q) = %q is not valid: %v", tt.in, got, err)
			}
		}
	}
}
