package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testPrefix is not the default, so that the tests also check that
// --etcd-prefix is honoured everywhere.
const testPrefix = "/dmt"

// harness runs dmctl in-process against an embedded etcd.
type harness struct {
	t    *testing.T
	etcd *etcdtest.Cluster
	cli  *clientv3.Client
	dir  string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	c := etcdtest.Start(t)
	return &harness{t: t, etcd: c, cli: c.Client(t), dir: t.TempDir()}
}

// result is one dmctl run.
type result struct {
	code           int
	stdout, stderr string
}

// run runs dmctl with the harness's global flags before args.
func (h *harness) run(args ...string) result {
	h.t.Helper()
	full := append([]string{
		"--etcd-endpoints", strings.Join(h.etcd.Endpoints(), ","),
		"--etcd-prefix", testPrefix,
		"--timeout", "10s",
	}, args...)
	return runDmctl(h.t, full...)
}

// runJSON runs dmctl with --output json, requires success, decodes
// stdout into v and returns the run.
func (h *harness) runJSON(v any, args ...string) result {
	h.t.Helper()
	r := h.run(append([]string{"--output", "json"}, args...)...)
	if r.code != 0 {
		h.t.Fatalf("dmctl %v: exit %d, stderr:\n%s", args, r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		h.t.Fatalf("dmctl %v: stdout is not one JSON document: %v\n%s", args, err, r.stdout)
	}
	return r
}

// ok runs dmctl and requires exit 0.
func (h *harness) ok(args ...string) result {
	h.t.Helper()
	r := h.run(args...)
	if r.code != 0 {
		h.t.Fatalf("dmctl %v: exit %d, want 0; stderr:\n%s", args, r.code, r.stderr)
	}
	return r
}

// fail runs dmctl and requires exit 1, every wantErr in stderr and no
// change under the prefix.
func (h *harness) fail(args []string, wantErr ...string) result {
	h.t.Helper()
	before := h.keys()
	r := h.run(args...)
	if r.code != 1 {
		h.t.Fatalf("dmctl %v: exit %d, want 1; stdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
	}
	for _, w := range wantErr {
		if !strings.Contains(r.stderr, w) {
			h.t.Errorf("dmctl %v: stderr does not contain %q:\n%s", args, w, r.stderr)
		}
	}
	if after := h.keys(); !maps.Equal(before, after) {
		h.t.Errorf("dmctl %v failed but changed etcd:\nbefore %v\nafter  %v", args, before, after)
	}
	return r
}

func runDmctl(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	h.t.Cleanup(cancel)
	return ctx
}

// keys returns every key and value under the prefix.
func (h *harness) keys() map[string]string {
	h.t.Helper()
	resp, err := h.cli.Get(h.ctx(), testPrefix+"/", clientv3.WithPrefix())
	if err != nil {
		h.t.Fatalf("list keys: %v", err)
	}
	out := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

// get returns the value of key (relative to the prefix) and whether it
// exists.
func (h *harness) get(key string) (string, bool) {
	h.t.Helper()
	v, ok := h.keys()[testPrefix+key]
	return v, ok
}

// getJSON decodes the value of key into a map; it fails when absent.
func (h *harness) getJSON(key string) map[string]any {
	h.t.Helper()
	v, ok := h.get(key)
	if !ok {
		h.t.Fatalf("key %s%s is missing; keys: %v", testPrefix, key, h.keys())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		h.t.Fatalf("key %s%s: value is not a JSON object: %v\n%s", testPrefix, key, err, v)
	}
	return m
}

// absent requires that none of the keys (relative to the prefix) exist.
func (h *harness) absent(keys ...string) {
	h.t.Helper()
	all := h.keys()
	for _, k := range keys {
		if v, ok := all[testPrefix+k]; ok {
			h.t.Errorf("key %s%s should not exist, holds %s", testPrefix, k, v)
		}
	}
}

// put writes key (relative to the prefix) as a worker or test would.
func (h *harness) put(key, value string) {
	h.t.Helper()
	if _, err := h.cli.Put(h.ctx(), testPrefix+key, value); err != nil {
		h.t.Fatalf("put %s: %v", key, err)
	}
}

// worker registers a worker's info and, when alive, its keepalive key.
func (h *harness) worker(name string, alive bool) {
	h.t.Helper()
	h.put("/worker/info/"+name, `{"name":"`+name+`","addr":"127.0.0.1:8262"}`)
	if alive {
		h.put("/worker/keepalive/"+name, `{"name":"`+name+`","join-time":"2026-01-02T15:04:05Z"}`)
	}
}

// file writes a file into the test dir and returns its path.
func (h *harness) file(name, content string) string {
	h.t.Helper()
	p := filepath.Join(h.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		h.t.Fatal(err)
	}
	return p
}

// sourceFile writes a source config for source id; extra is appended YAML.
func (h *harness) sourceFile(id string, extra string) string {
	return h.file(id+".yaml", "source-id: "+id+"\nfrom: {host: 127.0.0.1, port: 3306, user: root, password: secret}\n"+extra)
}

// closedEndpoint returns an http URL on a loopback port nothing listens
// on.
func closedEndpoint(t *testing.T) string {
	return "http://" + testutil.FreeAddr(t)
}

// field walks a decoded JSON document along path ("from.port").
func field(t *testing.T, doc map[string]any, path string) any {
	t.Helper()
	var cur any = doc
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: %v is not an object", path, cur)
		}
		cur = m[p]
	}
	return cur
}
