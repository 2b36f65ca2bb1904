package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// testdata/dm/sharding holds the 79 task files of DM's own tests that use
// shard-mode or is-sharding: true, copied unchanged from pingcap/tiflow
// (its README.md says from which commit and how to rebuild them). Each runs
// through CheckTaskConfig, what `dmctl task start [--dry-run]` runs, and:
//
//	pessimistic (shard-mode: pessimistic, or is-sharding: true alone)
//	            and optimistic load, one subtask per instance, each with
//	            the file's ShardMode (and strict-optimistic-shard-mode for
//	            the files named so);
//	listed in shardingExceptions  fails exactly as listed there.
//
// The mode a file asks for is read here from the YAML itself, the way DM
// reads it, not through the decoder under test.

// shardingException is how a file of the corpus is expected to fail.
type shardingException struct {
	// fields are the paths the error must report, all and nothing else
	// (decode refusals, unknown fields and invalid values together).
	fields []string
	// decodeError, when fields is empty, is a text the error of a file
	// that does not decode at all must contain.
	decodeError string
	// dmSubst, for a template, are the replacements DM's run.sh makes
	// before it starts the task; the result must then pass as its mode
	// says.
	dmSubst []string
	why     string
}

var shardingExceptions = map[string]shardingException{
	// Invalid in DM itself.
	"dmctl_basic-conf-dm-task7.yaml": {
		fields: []string{"mysql-instances[0].meta", "mysql-instances[1].meta"},
		why: "incremental task without binlog-name/binlog-gtid: DM's dmctl_basic test starts it to see DM refuse it " +
			"(\"must specify `binlog-name` ...\"); valid only with --start-time",
	},
	"shardddl_optimistic-conf-double-source-optimistic-incr.yaml": {
		decodeError: "mysql-instances.meta.binlog-pos",
		dmSubst: []string{
			"pos-holder", "4",
			"name-holder", "mysql-bin.000001",
			"gtid-holder", "3ccc475b-2343-11e7-be21-6c0b84d59f30:1-14",
		},
		why: "a template: run.sh replaces pos-holder/name-holder/gtid-holder before start-task; " +
			"binlog-pos: pos-holder is no number (DM's decode fails too)",
	},
}

// dmShardMode is the shard mode DM reads from a task file: shard-mode when
// set, else pessimistic for is-sharding: true (tiflow dm/config/task.go,
// adjust), else "".
func dmShardMode(t *testing.T, name string, data []byte) string {
	t.Helper()
	var doc struct {
		ShardMode  string `json:"shard-mode"`
		IsSharding bool   `json:"is-sharding"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: read shard-mode: %v", name, err)
	}
	switch {
	case doc.ShardMode != "":
		return strings.ToLower(doc.ShardMode)
	case doc.IsSharding:
		return ShardPessimistic
	}
	return ""
}

// problemFields lists the paths err reports: the unknown and refused
// fields of a *DecodeError and the fields of a *ValidationError, sorted.
func problemFields(err error) []string {
	var out []string
	var de *DecodeError
	if errors.As(err, &de) {
		out = append(out, de.Unknown...)
		for _, fe := range de.Refused {
			out = append(out, fe.Field)
		}
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		for _, fe := range ve.Errors {
			out = append(out, fe.Field)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// checkShardingFile requires data, a task file of mode, to pass as its mode
// says; it reports whether it did.
func checkShardingFile(t *testing.T, name, mode string, data []byte) bool {
	t.Helper()
	tc, subs, err := CheckTaskConfig(data)
	switch mode {
	case ShardPessimistic, ShardOptimistic:
		if err != nil {
			t.Errorf("%s (%s): %v", name, mode, err)
			return false
		}
		if len(subs) != len(tc.MySQLInstances) || len(subs) == 0 {
			t.Errorf("%s: %d subtasks for %d instances", name, len(subs), len(tc.MySQLInstances))
			return false
		}
		for i, st := range subs {
			if st.ShardMode != mode || st.SourceID != tc.MySQLInstances[i].SourceID || st.Name != tc.Name {
				t.Errorf("%s: subtask %d is %s/%s with shard-mode %q, want %s/%s %s",
					name, i, st.Name, st.SourceID, st.ShardMode, tc.Name, tc.MySQLInstances[i].SourceID, mode)
				return false
			}
			if strict := strings.Contains(name, "strict-optimistic"); st.StrictOptimisticShardMode != strict {
				t.Errorf("%s: subtask %d has strict-optimistic-shard-mode %v, want %v", name, i, st.StrictOptimisticShardMode, strict)
				return false
			}
		}
		if len(tc.Notes.Unknown) != 0 {
			t.Errorf("%s: unknown fields %v", name, tc.Notes.Unknown)
			return false
		}
	default:
		t.Errorf("%s: shard mode %q is neither pessimistic nor optimistic", name, mode)
		return false
	}
	return true
}

// corpusPaths returns the task files of dir, which must be want (what
// names them in the failure).
func corpusPaths(t *testing.T, dir string, want int, what string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != want {
		t.Fatalf("%d files in %s, want DM's %d %s", len(paths), dir, want, what)
	}
	return paths
}

// check requires data, a file listed in the exceptions map list, to fail
// as ex says.
func (ex shardingException) check(t *testing.T, name string, data []byte, list string) {
	t.Helper()
	_, _, err := CheckTaskConfig(data)
	switch {
	case err == nil:
		t.Errorf("%s passes; remove it from %s (%s)", name, list, ex.why)
	case len(ex.fields) > 0:
		if got := problemFields(err); !slices.Equal(got, ex.fields) {
			t.Errorf("%s: reports %v, want %v (%s):\n%v", name, got, ex.fields, ex.why, err)
		}
		for _, f := range ex.fields {
			if !strings.Contains(err.Error(), f) {
				t.Errorf("%s: error does not name %s:\n%v", name, f, err)
			}
		}
	case !strings.Contains(err.Error(), ex.decodeError):
		t.Errorf("%s: want a decode error naming %s (%s), got:\n%v", name, ex.decodeError, ex.why, err)
	}
}

func TestDMShardingCorpus(t *testing.T) {
	paths := corpusPaths(t, "testdata/dm/sharding", 79, "sharding task files")
	count := map[string]int{}
	seen := map[string]bool{}
	for _, path := range paths {
		name := filepath.Base(path)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		mode := dmShardMode(t, name, data)
		count["mode "+mode]++
		ex, listed := shardingExceptions[name]
		if !listed {
			if checkShardingFile(t, name, mode, data) {
				count[mode]++
			}
			continue
		}
		seen[name] = true
		count["other"]++
		ex.check(t, name, data, "shardingExceptions")
		if len(ex.dmSubst) > 0 {
			filled := strings.NewReplacer(ex.dmSubst...).Replace(string(data))
			checkShardingFile(t, name+" as run.sh fills it", mode, []byte(filled))
		}
	}
	for name := range shardingExceptions {
		if !seen[name] {
			t.Errorf("shardingExceptions lists %s, which is not in testdata/dm/sharding", name)
		}
	}
	t.Logf("DM's sharding task files: %d pessimistic, %d optimistic; %d pessimistic and %d optimistic load, %d other (listed)",
		count["mode "+ShardPessimistic], count["mode "+ShardOptimistic], count[ShardPessimistic], count[ShardOptimistic], count["other"])
	if count["mode "+ShardPessimistic]+count["mode "+ShardOptimistic] != len(paths) {
		t.Errorf("modes %v: every file must ask for pessimistic or optimistic", count)
	}
}
