package main

import (
	"strings"
	"testing"
)

// notRun is the part of every stream refusal and warning that says why.
const notRun = "stream tasks are not run by this dm-worker release yet — workers do not watch stream keys"

// TestStreamCreateRefused checks that stream create, which no worker of
// this release would act on, still checks its file and the cluster, then
// fails naming the stream and writes nothing.
func TestStreamCreateRefused(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", true)
	h.ok("source", "create", h.sourceFile("mysql-01", ""))
	file := h.file("cdc.yaml", `name: orders-cdc
source-id: mysql-01
snapshot: true
block-allow-list: {do-dbs: [shop]}
sink: {type: file, file: {dir: /var/lib/cdc/orders, rotate-size: 64MiB}}
`)
	// The file and the objects it names are checked before the refusal.
	missing := h.file("cdc2.yaml", "name: cdc2\nsource-id: mysql-09\nsink: {type: file, file: {dir: /x}}\n")
	h.fail([]string{"stream", "create", missing}, "stream cdc2", "source mysql-09 does not exist")
	invalid := h.file("cdc3.yaml", "name: cdc3\nsource-id: mysql-01\nsink: {type: file}\n")
	h.fail([]string{"stream", "create", invalid}, "stream config "+invalid+" is invalid", "sink.file")

	for _, output := range []string{"text", "json"} {
		r := h.fail([]string{"--output", output, "stream", "create", file},
			`dmctl stream create: stream "orders-cdc": `+notRun+", so the stream would never start; nothing was written to etcd.",
			"dmctl task start")
		if r.stdout != "" {
			t.Errorf("--output %s: a refused stream create printed a result:\n%s", output, r.stdout)
		}
		h.absent("/stream/config/mysql-01/orders-cdc", "/stage/stream/mysql-01/orders-cdc")
	}
	var list streamListJSON
	h.runJSON(&list, "stream", "list")
	if len(list.Streams) != 0 {
		t.Errorf("stream list after a refused create = %+v, want none", list)
	}
	if r := h.ok("stream", "list"); strings.Contains(r.stderr, "warning") {
		t.Errorf("stream list with no streams warns:\n%s", r.stderr)
	}
}

// TestStreamKeysLeftBehind checks the commands on stream keys an earlier
// dmctl (or etcdctl) wrote: pause and resume refuse and write nothing; list
// and stop read and delete them but say that no worker runs them.
func TestStreamKeysLeftBehind(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", true)
	h.ok("source", "create", h.sourceFile("mysql-01", ""))
	h.put("/stream/config/mysql-01/orders-cdc",
		`{"name":"orders-cdc","source-id":"mysql-01","snapshot":true,"sink":{"type":"file","file":{"dir":"/var/lib/cdc/orders"}}}`)
	const running = `{"expect":"Running","source":"mysql-01","task":"orders-cdc"}`
	h.put("/stage/stream/mysql-01/orders-cdc", running)

	h.fail([]string{"stream", "pause", "orders-cdc", "--ignore-untreated"}, "flag provided but not defined: -ignore-untreated")
	for _, args := range [][]string{
		{"stream", "pause", "orders-cdc"},
		{"stream", "resume", "orders-cdc"},
		{"stream", "resume", "orders-cdc", "--ignore-untreated"},
	} {
		h.fail(args, `stream "orders-cdc": `+notRun+", so a new expected stage would change nothing; nothing was written to etcd.",
			"`dmctl stream stop orders-cdc` deletes the keys")
	}
	if v, _ := h.get("/stage/stream/mysql-01/orders-cdc"); v != running {
		t.Errorf("stream stage after refused pause/resume = %s, want %s", v, running)
	}

	var list streamListJSON
	r := h.runJSON(&list, "stream", "list")
	if len(list.Streams) != 1 || list.Streams[0] != (streamView{Stream: "orders-cdc", Source: "mysql-01", Stage: "Running", Sink: "file"}) {
		t.Errorf("stream list = %+v", list)
	}
	r2 := h.ok("stream", "list")
	if !strings.Contains(r2.stdout, "orders-cdc") {
		t.Errorf("stream list text:\n%s", r2.stdout)
	}
	for _, r := range []result{r, r2} {
		if !strings.Contains(r.stderr, "warning: "+notRun+"; these are keys only") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("stream list does not warn in one line that no worker runs the streams; stderr:\n%s", r.stderr)
		}
	}
	h.fail([]string{"source", "delete", "mysql-01"}, "still has stream(s) orders-cdc")

	stop := h.ok("stream", "stop", "orders-cdc")
	h.absent("/stage/stream/mysql-01/orders-cdc", "/stream/config/mysql-01/orders-cdc")
	if want := "stream orders-cdc: keys deleted on source(s) mysql-01\n"; stop.stdout != want {
		t.Errorf("stream stop printed %q, want %q", stop.stdout, want)
	}
	if want := "warning: " + notRun + "; no worker ran stream orders-cdc; only its keys were deleted\n"; stop.stderr != want {
		t.Errorf("stream stop warned %q, want %q", stop.stderr, want)
	}
	for _, cmd := range []string{"pause", "resume", "stop"} {
		h.fail([]string{"stream", cmd, "orders-cdc"}, "stream orders-cdc does not exist")
	}
	h.ok("source", "delete", "mysql-01")
}
