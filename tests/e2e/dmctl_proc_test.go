package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// cluster is what dmctl is pointed at: etcd endpoints and a key prefix,
// plus, when the test has one, a client that reads etcd directly.
type cluster struct {
	t         *testing.T
	endpoints string
	prefix    string
	direct    *clientv3.Client
}

// dmctlResult is one run of the dmctl binary.
type dmctlResult struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// run runs dmctl with the cluster's global flags before args.
func (c *cluster) run(args ...string) dmctlResult {
	c.t.Helper()
	return runDmctl(c.t, append([]string{"--etcd-endpoints", c.endpoints, "--etcd-prefix", c.prefix, "--timeout", "10s"}, args...)...)
}

// ok runs dmctl and requires exit 0.
func (c *cluster) ok(args ...string) dmctlResult {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("dmctl %v: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// json runs dmctl --output json, requires exit 0 and decodes stdout into v.
func (c *cluster) json(v any, args ...string) {
	c.t.Helper()
	r := c.ok(append([]string{"--output", "json"}, args...)...)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		c.t.Fatalf("dmctl %v: stdout is not one JSON document: %v\n%s", args, err, r.stdout)
	}
}

// waitWorkerAlive waits up to 10 s until `dmctl worker list`, run with the
// global flags extra, shows worker as the only worker, alive; a timeout
// prints the last list.
func (c *cluster) waitWorkerAlive(worker string, extra ...string) {
	c.t.Helper()
	testutil.Eventually(c.t, 10*time.Second, "dmctl worker list shows "+worker+" alive", func() error {
		var doc workerListDoc
		c.json(&doc, append(extra, "worker", "list")...)
		if len(doc.Workers) != 1 || doc.Workers[0].Name != worker || !doc.Workers[0].Alive {
			return fmt.Errorf("worker list %+v", doc.Workers)
		}
		return nil
	})
}

// keys returns every key under the prefix with its value, read directly.
func (c *cluster) keys() map[string]string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.direct.Get(ctx, c.prefix+"/", clientv3.WithPrefix())
	if err != nil {
		c.t.Fatalf("list keys under %s: %v", c.prefix, err)
	}
	out := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

// runDmctl runs the dmctl binary with args (at most 30 s).
func runDmctl(t testing.TB, args ...string) dmctlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin.dmctl, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := dmctlResult{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		r.code = ee.ExitCode()
	default:
		t.Fatalf("dmctl %v: %v\nstderr:\n%s", args, err, r.stderr)
	}
	return r
}

// Documents dmctl prints with --output json (the parts the tests read).
type (
	workerListDoc struct {
		Workers []struct {
			Name   string `json:"name"`
			Addr   string `json:"addr"`
			Alive  bool   `json:"alive"`
			Source string `json:"source"`
		} `json:"workers"`
	}
	sourceListDoc struct {
		Sources []struct {
			Source string `json:"source"`
			Worker string `json:"worker"`
		} `json:"sources"`
	}
	taskListDoc struct {
		Tasks []struct {
			Task    string `json:"task"`
			Sources []struct {
				Source string `json:"source"`
				Stage  string `json:"stage"`
			} `json:"sources"`
		} `json:"tasks"`
	}
	taskStatusDoc struct {
		Task    string `json:"task"`
		Sources []struct {
			Source  string            `json:"source"`
			Worker  string            `json:"worker"`
			Expect  string            `json:"expect"`
			Subtask json.RawMessage   `json:"subtask"`
			Errors  []json.RawMessage `json:"errors"`
		} `json:"sources"`
	}
)

// sourceYAML is a source config pointing at a loopback port nothing
// listens on (tasks on it pause with connection errors); its password must
// never show up in a status.
func sourceYAML(id string) string {
	return "source-id: " + id + "\nfrom: {host: 127.0.0.1, port: 1, user: root, password: " + sourcePassword + "}\n"
}

const sourcePassword = "e2e-source-secret"

// taskYAML is a DM task file of one source using named rules.
func taskYAML(name, source string) string {
	return `name: ` + name + `
task-mode: all
target-database: {host: 127.0.0.1, port: 1, user: root, password: ` + targetPassword + `}
mysql-instances:
  - source-id: ` + source + `
    block-allow-list: bal1
    route-rules: [r1]
    syncer-config-name: s1
block-allow-list:
  bal1: {do-dbs: [db1]}
routes:
  r1: {schema-pattern: db1, table-pattern: "t*", target-schema: db1_t, target-table: t}
syncers:
  s1: {worker-count: 4, batch: 50}
`
}

const targetPassword = "e2e-target-secret"
