package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/dm/tests holds the 119 task files of DM's own tests that do not
// use shard merge, copied unchanged from pingcap/tiflow (its README.md says
// from which commit and how to rebuild them). Each must pass
// CheckTaskConfig, what `dmctl task start [--dry-run]` runs, with one
// subtask per instance and no unknown field, except the files listed in
// testsExceptions, which fail exactly as listed there.
var testsExceptions = map[string]shardingException{
	// Templates DM's run.sh fills before start-task.
	"adjust_gtid-conf-dm-task.yaml": {
		decodeError: "mysql-instances.meta.binlog-pos",
		dmSubst: []string{
			"task-mode-placeholder", "incremental",
			"binlog-name-placeholder-1", "mysql-bin.000001", "binlog-pos-placeholder-1", "4", "binlog-gtid-placeholder-1", `""`,
			"binlog-name-placeholder-2", "mysql-bin.000002", "binlog-pos-placeholder-2", "4", "binlog-gtid-placeholder-2", `""`,
		},
		why: "a template: run.sh replaces the placeholders; binlog-pos: binlog-pos-placeholder-1 is no number (DM's decode fails too)",
	},
	"incremental_mode-conf-dm-task.yaml": {
		decodeError: "mysql-instances.meta.binlog-pos",
		dmSubst: []string{
			"binlog-gtid-placeholder-1", "3ccc475b-2343-11e7-be21-6c0b84d59f30:0",
			"binlog-name-placeholder-2", "mysql-bin.000001", "binlog-pos-placeholder-2", "4",
		},
		why: "a template: run.sh replaces the placeholders; binlog-pos: binlog-pos-placeholder-2 is no number",
	},
}

// checkTestsFile requires data to pass with one subtask per instance and
// no unknown field; it reports whether it did.
func checkTestsFile(t *testing.T, name string, data []byte) bool {
	t.Helper()
	tc, subs, err := CheckTaskConfig(data)
	switch {
	case err != nil:
		t.Errorf("%s: %v", name, err)
		return false
	case len(subs) == 0 || len(subs) != len(tc.MySQLInstances):
		t.Errorf("%s: %d subtasks for %d instances", name, len(subs), len(tc.MySQLInstances))
		return false
	case len(tc.Notes.Unknown) != 0:
		t.Errorf("%s: unknown fields %v", name, tc.Notes.Unknown)
		return false
	}
	return true
}

func TestDMTestsCorpus(t *testing.T) {
	paths := corpusPaths(t, "testdata/dm/tests", 119, "non-sharding task files")
	passed := 0
	seen := map[string]bool{}
	for _, path := range paths {
		name := filepath.Base(path)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ex, listed := testsExceptions[name]
		if !listed {
			if checkTestsFile(t, name, data) {
				passed++
			}
			continue
		}
		seen[name] = true
		ex.check(t, name, data, "testsExceptions")
		if len(ex.dmSubst) > 0 {
			filled := strings.NewReplacer(ex.dmSubst...).Replace(string(data))
			if checkTestsFile(t, name+" as run.sh fills it", []byte(filled)) {
				passed++
			}
		}
	}
	for name := range testsExceptions {
		if !seen[name] {
			t.Errorf("testsExceptions lists %s, which is not in testdata/dm/tests", name)
		}
	}
	t.Logf("DM's non-sharding task files: %d of %d load (templates counted once filled as DM's run.sh fills them)", passed, len(paths))
}
