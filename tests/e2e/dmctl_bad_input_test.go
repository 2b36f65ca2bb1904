package e2e

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// TestDmctlBadInputWritesNothing runs dmctl with bad input against a
// running cluster: each run exits 1 with a clear message on stderr and
// leaves every key under the prefix as it was.
func TestDmctlBadInputWritesNothing(t *testing.T) {
	c := newEtcdCluster(t)
	startWorker(t, workerOptions{name: "w1", endpoints: c.endpoints, prefix: c.prefix})
	startWorker(t, workerOptions{name: "w2", endpoints: c.endpoints, prefix: c.prefix})
	c.ok("source", "create", writeFile(t, "mysql-01.yaml", sourceYAML("mysql-01")), "--worker", "w1")
	c.ok("task", "start", writeFile(t, "task1.yaml", taskYAML("task1", "mysql-01")))

	badTask := strings.Replace(taskYAML("task2", "mysql-01"), "block-allow-list: bal1", "block-allow-list: nope", 1)
	cases := []struct {
		name string
		args []string
		want []string // substrings of stderr
	}{
		{"source file not YAML", []string{"source", "create", writeFile(t, "bad.yaml", "source-id: [mysql-02\nfrom: {"), "--worker", "w2"},
			[]string{"bad.yaml"}},
		{"source file unknown field", []string{"source", "create", writeFile(t, "typo.yaml", sourceYAML("mysql-02")+"enable-realy: true\n"), "--worker", "w2"},
			[]string{"enable-realy"}},
		{"source id invalid", []string{"source", "create", writeFile(t, "badid.yaml", sourceYAML("bad/id")), "--worker", "w2"},
			[]string{"bad/id"}},
		{"source of an existing id", []string{"source", "create", writeFile(t, "again.yaml", sourceYAML("mysql-01")), "--worker", "w2"},
			[]string{"mysql-01 already exists"}},
		{"task file not YAML", []string{"task", "start", writeFile(t, "task.yaml", "name: [task2\n")},
			[]string{"task.yaml"}},
		{"task file unknown rule name", []string{"task", "start", writeFile(t, "task2.yaml", badTask)},
			[]string{"nope", "no such entry"}},
		{"task already exists", []string{"task", "start", writeFile(t, "task1.yaml", taskYAML("task1", "mysql-01"))},
			[]string{"task1 already exists"}},
		{"task on a missing source", []string{"task", "start", writeFile(t, "task3.yaml", taskYAML("task3", "mysql-09"))},
			[]string{"mysql-09"}},
		{"invalid task name", []string{"task", "pause", "bad name!"}, []string{"bad name!"}},
		{"invalid worker name", []string{"unbind", "w/1"}, []string{"w/1"}},
		{"invalid source name", []string{"bind", "mysql 01", "w2"}, []string{"mysql 01"}},
		{"bind a bound worker", []string{"bind", "mysql-01", "w1"}, []string{"w1"}},
		{"unknown command", []string{"task", "explode", "task1"}, []string{"unknown command"}},
		{"bad --output", []string{"--output", "yaml", "worker", "list"}, []string{"--output"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := c.stableKeys()
			r := c.run(tc.args...)
			if r.code != 1 {
				t.Fatalf("dmctl %q: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", tc.args, r.code, r.stdout, r.stderr)
			}
			for _, w := range append([]string{"dmctl"}, tc.want...) {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("dmctl %q: stderr lacks %q:\n%s", tc.args, w, r.stderr)
				}
			}
			if after := c.stableKeys(); !maps.Equal(before, after) {
				t.Errorf("dmctl %q failed but changed etcd:\nbefore %v\nafter  %v", tc.args, before, after)
			}
		})
	}

	t.Run("etcd unreachable", func(t *testing.T) {
		before := c.stableKeys()
		closed := "http://" + testutil.FreeAddr(t)
		r := runDmctl(t, "--etcd-endpoints", closed, "--etcd-prefix", c.prefix, "--timeout", "2s",
			"source", "create", writeFile(t, "mysql-03.yaml", sourceYAML("mysql-03")), "--worker", "w2")
		if r.code != 1 {
			t.Fatalf("exit %d, want 1\nstderr:\n%s", r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, closed) || !strings.Contains(r.stderr, "does not answer") {
			t.Errorf("stderr does not say which etcd does not answer:\n%s", r.stderr)
		}
		if r.took > 8*time.Second {
			t.Errorf("took %s with --timeout 2s", r.took)
		}
		if after := c.stableKeys(); !maps.Equal(before, after) {
			t.Errorf("keys changed:\nbefore %v\nafter  %v", before, after)
		}
	})
}

// stableKeys is keys() with the values of the workers' status keys
// replaced by a marker: workers rewrite them on their own schedule, and
// their presence is what must not change.
func (c *cluster) stableKeys() map[string]string {
	c.t.Helper()
	keys := c.keys()
	for k := range keys {
		if strings.HasPrefix(k, c.prefix+"/status/") {
			keys[k] = "<published by the worker>"
		}
	}
	return keys
}
