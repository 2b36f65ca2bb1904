package config

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The corpus under testdata/dm holds task and source files written from
// DM's documentation (basic, advanced and full task templates, the source
// file, get-config output, old names, every block). Each runs through
// CheckTaskConfig / CheckSourceConfig, the calls dmctl makes (DM's own
// sharding task files, testdata/dm/sharding, are dm_sharding_corpus_test.go's).
// By name:
//
//	bad-*.yaml     deliberately wrong: fail listing every path of their
//	               "# unknown:" header line
//	anything else  must pass

var unknownHeader = regexp.MustCompile(`(?m)^# unknown: (.*)$`)

// corpusFiles lists the files of dir.
func corpusFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, filepath.Join(dir, e.Name()))
	}
	return out
}

// checkBad requires err to be a *DecodeError naming every path of the
// file's header.
func checkBad(t *testing.T, path string, data []byte, err error) {
	t.Helper()
	m := unknownHeader.FindSubmatch(data)
	if m == nil {
		t.Fatalf("%s has no # unknown: header", path)
	}
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("%s: want a DecodeError, got %v", path, err)
	}
	want := strings.Split(string(m[1]), ", ")
	if strings.Join(de.Unknown, ", ") != strings.Join(want, ", ") {
		t.Errorf("%s: unknown %v, want all of %v", path, de.Unknown, want)
	}
	for _, p := range want {
		if !strings.Contains(err.Error(), `"`+p+`"`) {
			t.Errorf("%s: error does not name %q:\n%v", path, p, err)
		}
	}
}

func TestDMCorpusTasks(t *testing.T) {
	var total, passed int
	for _, path := range corpusFiles(t, "testdata/dm/task") {
		name := filepath.Base(path)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		tc, subs, err := CheckTaskConfig(data)
		switch {
		case strings.HasPrefix(name, "bad-"):
			checkBad(t, name, data, err)
			continue
		}
		total++
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(subs) != len(tc.MySQLInstances) || len(tc.Notes.Unknown) != 0 {
			t.Errorf("%s: %d subtasks for %d instances, unknown %v", name, len(subs), len(tc.MySQLInstances), tc.Notes.Unknown)
			continue
		}
		passed++
	}
	t.Logf("task files (sharding included): %d of %d pass (%.0f%%)", passed, total, 100*float64(passed)/float64(total))
	if total < 25 || passed*100 < total*95 {
		t.Errorf("%d of %d task files pass; want at least 25 files and 95%%", passed, total)
	}
}

func TestDMCorpusSources(t *testing.T) {
	var total, passed int
	for _, path := range corpusFiles(t, "testdata/dm/source") {
		name := filepath.Base(path)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = CheckSourceConfig(data)
		if strings.HasPrefix(name, "bad-") {
			checkBad(t, name, data, err)
			continue
		}
		total++
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		passed++
	}
	t.Logf("source files: %d of %d pass", passed, total)
	if total < 15 || passed*100 < total*95 {
		t.Errorf("%d of %d source files pass; want at least 15 files and 95%%", passed, total)
	}
}
