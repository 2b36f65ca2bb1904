package mariadbtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindBinaries(t *testing.T) {
	full := t.TempDir()
	fallback := t.TempDir()
	for _, f := range []struct{ dir, name string }{{full, "mariadbd"}, {full, "mariadb-install-db"}, {fallback, "mariadb-install-db"}} {
		if err := os.WriteFile(filepath.Join(f.dir, f.name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	notExec := t.TempDir()
	if err := os.WriteFile(filepath.Join(notExec, "mariadbd"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name        string
		path        string
		extra       []string
		wantMissing []string
	}{
		{name: "all on PATH", path: full},
		{name: "nothing anywhere", path: t.TempDir(), wantMissing: []string{"mariadbd", "mariadb-install-db"}},
		{name: "server only in a fallback dir", path: "", extra: []string{full}},
		{name: "install-db only", path: fallback, wantMissing: []string{"mariadbd"}},
		{name: "not executable", path: notExec + string(os.PathListSeparator) + fallback, wantMissing: []string{"mariadbd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := findBinaries(tt.path, tt.extra)
			if len(tt.wantMissing) == 0 {
				if err != nil {
					t.Fatalf("findBinaries: %v", err)
				}
				if filepath.Base(b.mariadbd) != "mariadbd" || filepath.Base(b.installDB) != "mariadb-install-db" {
					t.Fatalf("findBinaries = %+v", b)
				}
				return
			}
			if !errors.Is(err, errBinaryNotFound) {
				t.Fatalf("findBinaries error = %v, want errBinaryNotFound", err)
			}
			for _, name := range tt.wantMissing {
				if !strings.Contains(err.Error(), name+" ") {
					t.Errorf("error %q does not name %s", err, name)
				}
			}
		})
	}
}

func TestMissingBinariesSkipsOrFails(t *testing.T) {
	tests := []struct {
		ci                  bool
		wantFatal, wantSkip bool
	}{
		{ci: true, wantFatal: true},
		{ci: false, wantSkip: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("CI=%v", tt.ci), func(t *testing.T) {
			r := &endRecorder{TB: t}
			r.run(func() { missingBinaries(r, tt.ci, fmt.Errorf("%w: mariadbd", errBinaryNotFound)) })
			fatal, skip := r.messages()
			if (fatal != "") != tt.wantFatal || (skip != "") != tt.wantSkip {
				t.Fatalf("fatal=%q skip=%q, want fatal %v skip %v", fatal, skip, tt.wantFatal, tt.wantSkip)
			}
			if msg := fatal + skip; !strings.Contains(msg, "mariadbd") || !strings.Contains(msg, "make deps") {
				t.Errorf("message %q should name the program and how to install it", msg)
			}
		})
	}
}
