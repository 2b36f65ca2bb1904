package main

import (
	"strings"
	"testing"
)

// ordersCDC is a stream file on source mysql-01.
const ordersCDC = `name: orders-cdc
source-id: mysql-01
snapshot: true
block-allow-list: {do-dbs: [shop]}
sink: {type: file, file: {dir: /var/lib/cdc/orders, rotate-size: 64MiB}}
`

// TestStreamCommands checks that create writes the config and the stage
// Running, pause and resume (with --ignore-untreated) write the stage,
// list reads them, and stop deletes both keys; failing commands write
// nothing.
func TestStreamCommands(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", true)
	h.worker("w2", true)
	h.ok("source", "create", h.sourceFile("mysql-01", ""), "--worker", "w1")
	h.ok("source", "create", h.sourceFile("mysql-02", ""), "--worker", "w2")
	h.ok("unbind", "w2")
	file := h.file("cdc.yaml", ordersCDC)

	missing := h.file("cdc2.yaml", "name: cdc2\nsource-id: mysql-09\nsink: {type: file, file: {dir: /x}}\n")
	h.fail([]string{"stream", "create", missing}, "stream cdc2", "source mysql-09 does not exist")
	invalid := h.file("cdc3.yaml", "name: cdc3\nsource-id: mysql-01\nsink: {type: file}\n")
	h.fail([]string{"stream", "create", invalid}, "stream config "+invalid+" is invalid", "sink.file")

	r := h.ok("stream", "create", file)
	if want := "stream orders-cdc created on source mysql-01 with stage Running\n"; r.stdout != want || r.stderr != "" {
		t.Errorf("stream create printed %q, stderr %q; want %q and nothing on stderr", r.stdout, r.stderr, want)
	}
	cfg := h.getJSON("/stream/config/mysql-01/orders-cdc")
	if cfg["name"] != "orders-cdc" || cfg["source-id"] != "mysql-01" || cfg["snapshot"] != true ||
		field(t, cfg, "sink.file.rotate-size") == nil {
		t.Errorf("stream config = %v", cfg)
	}
	const running = `{"expect":"Running","source":"mysql-01","task":"orders-cdc"}`
	if v, _ := h.get("/stage/stream/mysql-01/orders-cdc"); v != running {
		t.Errorf("stream stage after create = %s, want %s", v, running)
	}
	h.fail([]string{"stream", "create", file}, "stream orders-cdc already exists on source(s) mysql-01")

	// A stream on an unbound source is created, with a note on stderr.
	var res streamResult
	r = h.runJSON(&res, "stream", "create", h.file("idle.yaml", "name: idle-cdc\nsource-id: mysql-02\nsink: {type: file, file: {dir: /x}}\n"))
	if res.Stream != "idle-cdc" || res.Stage != "Running" || strings.Join(res.Sources, ",") != "mysql-02" {
		t.Errorf("stream create JSON = %+v", res)
	}
	if !strings.Contains(r.stderr, "source mysql-02 is not bound to a worker; the stream runs once it is bound") {
		t.Errorf("stream create on an unbound source: stderr lacks the note:\n%s", r.stderr)
	}

	h.fail([]string{"stream", "pause", "orders-cdc", "--ignore-untreated"}, "flag provided but not defined: -ignore-untreated")
	steps := []struct {
		args []string
		want string // the stage value
		out  string // the text output
	}{
		{[]string{"stream", "pause", "orders-cdc"}, `{"expect":"Paused","source":"mysql-01","task":"orders-cdc"}`,
			"stream orders-cdc: expected stage Paused on source(s) mysql-01\n"},
		{[]string{"stream", "resume", "orders-cdc", "--ignore-untreated"},
			`{"expect":"Running","source":"mysql-01","task":"orders-cdc","ignore-untreated":true}`,
			"stream orders-cdc: expected stage Running on source(s) mysql-01 (ignore-untreated: the worker resumes from the source's current binlog position; changes since the checkpoint are skipped)\n"},
		{[]string{"stream", "pause", "orders-cdc"}, `{"expect":"Paused","source":"mysql-01","task":"orders-cdc"}`,
			"stream orders-cdc: expected stage Paused on source(s) mysql-01\n"},
		{[]string{"stream", "resume", "orders-cdc"}, running,
			"stream orders-cdc: expected stage Running on source(s) mysql-01\n"},
	}
	for _, s := range steps {
		if out := h.ok(s.args...).stdout; out != s.out {
			t.Errorf("%v printed %q, want %q", s.args, out, s.out)
		}
		if v, _ := h.get("/stage/stream/mysql-01/orders-cdc"); v != s.want {
			t.Errorf("after %v: stream stage = %s, want %s", s.args, v, s.want)
		}
	}
	h.runJSON(&res, "stream", "resume", "orders-cdc", "--ignore-untreated")
	if res.Stream != "orders-cdc" || res.Stage != "Running" || !res.IgnoreUntreated || strings.Join(res.Sources, ",") != "mysql-01" {
		t.Errorf("stream resume --ignore-untreated JSON = %+v", res)
	}

	var list streamListJSON
	r = h.runJSON(&list, "stream", "list")
	want := []streamView{
		{Stream: "idle-cdc", Source: "mysql-02", Stage: "Running", Sink: "file"},
		{Stream: "orders-cdc", Source: "mysql-01", Stage: "Running", IgnoreUntreated: true, Sink: "file"},
	}
	if len(list.Streams) != len(want) || list.Streams[0] != want[0] || list.Streams[1] != want[1] {
		t.Errorf("stream list = %+v, want %+v", list.Streams, want)
	}
	text := h.ok("stream", "list")
	if !strings.Contains(text.stdout, "orders-cdc") || r.stderr != "" || text.stderr != "" {
		t.Errorf("stream list text:\n%s\nstderr (JSON, text): %q %q", text.stdout, r.stderr, text.stderr)
	}
	h.fail([]string{"source", "delete", "mysql-01"}, "still has stream(s) orders-cdc")

	// The worker's checkpoint goes with the stream, so a stream created
	// again under this name starts afresh.
	h.put("/stream/checkpoint/mysql-01/orders-cdc", `{"binlog-name":"mariadb-bin.000001","binlog-pos":4}`)
	stop := h.ok("stream", "stop", "orders-cdc")
	h.absent("/stage/stream/mysql-01/orders-cdc", "/stream/config/mysql-01/orders-cdc", "/stream/checkpoint/mysql-01/orders-cdc")
	if want := "stream orders-cdc stopped and deleted on source(s) mysql-01\n"; stop.stdout != want || stop.stderr != "" {
		t.Errorf("stream stop printed %q, stderr %q; want %q and nothing on stderr", stop.stdout, stop.stderr, want)
	}
	for _, cmd := range []string{"pause", "resume", "stop", "status"} {
		h.fail([]string{"stream", cmd, "orders-cdc"}, "stream orders-cdc does not exist")
	}
	if _, ok := h.get("/stage/stream/mysql-02/idle-cdc"); !ok {
		t.Errorf("stopping orders-cdc deleted idle-cdc's stage")
	}
	h.ok("source", "delete", "mysql-01")
}

// TestStreamStopKeysLeftBehind checks that stop deletes a stream whose
// stage key lost its config (written by etcdctl or a crashed master), and
// that pause/resume refuse it for lack of a config.
func TestStreamStopKeysLeftBehind(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", true)
	h.ok("source", "create", h.sourceFile("mysql-01", ""))
	h.put("/stage/stream/mysql-01/orphan", `{"expect":"Running","source":"mysql-01","task":"orphan"}`)
	h.fail([]string{"stream", "pause", "orphan"}, "stream orphan does not exist (no stream config on any source")
	var list streamListJSON
	h.runJSON(&list, "stream", "list")
	if len(list.Streams) != 1 || list.Streams[0] != (streamView{Stream: "orphan", Source: "mysql-01", Stage: "Running", Error: "config key missing"}) {
		t.Errorf("stream list = %+v", list)
	}
	h.ok("stream", "stop", "orphan")
	h.absent("/stage/stream/mysql-01/orphan")
}

// streamW1 is a hand-written status of w1 (bound to mysql-01): orders-cdc
// streams after a fill-history and an ignore-untreated resume, with an
// error that the worker lists in the stream and at the top level.
const streamW1 = `{"worker":"w1","source":"mysql-01","relay":{"enabled":false},"subtasks":[],
 "streams":[
  {"name":"other","stage":"Running","state":"streaming","checkpoint":"x:4","checkpoint-gtid":"","events":1,"lag-seconds":0,"errors":[]},
  {"name":"orders-cdc","stage":"Running","state":"streaming","checkpoint":"mariadb-bin.000003:1234",
   "checkpoint-gtid":"0-1-900","events":123,"lag-seconds":0.2,
   "fill-history":{"tables":8,"tables-done":7,"rows":200000},
   "skipped":"mariadb-bin.000002:4 (gtid \"0-1-10\") to mariadb-bin.000003:4 (gtid \"0-1-800\")",
   "errors":[{"code":"stream-sink","message":"sink slow","resumable":true,"time":"2026-01-02T15:04:05Z"}]}],
 "errors":[{"task":"orders-cdc","code":"stream-sink","message":"sink slow","resumable":true,"time":"2026-01-02T15:04:05Z"},
           {"task":"orders-cdc","code":"stage-without-config","message":"about orders-cdc","resumable":false,"time":"2026-01-02T15:04:05Z"},
           {"task":"other","code":"x","message":"not ours","resumable":false,"time":"2026-01-02T15:04:05Z"}]}`

// streamStatusDoc decodes "stream status --output json".
type streamStatusDoc struct {
	Stream  string `json:"stream"`
	Sources []struct {
		Source          string           `json:"source"`
		Worker          string           `json:"worker"`
		Expect          string           `json:"expect"`
		IgnoreUntreated bool             `json:"ignore-untreated"`
		Stream          map[string]any   `json:"stream"`
		Note            string           `json:"note"`
		Errors          []map[string]any `json:"errors"`
	} `json:"sources"`
}

// TestStreamStatus checks stream status against statuses put into
// P/status/{worker} (the fake workers answer no HTTP status), and that the
// status a worker serves over HTTP wins.
func TestStreamStatus(t *testing.T) {
	h := newHarness(t)
	w1 := h.fakeWorker("w1")
	h.fakeWorker("w2")
	h.fakeWorker("w3")
	h.fakeWorker("w4")
	for i, w := range []string{"w1", "w2", "w3", "w4"} {
		h.ok("source", "create", h.sourceFile("mysql-0"+string(rune('1'+i)), ""), "--worker", w)
	}
	h.ok("unbind", "w4")
	// orders-cdc lives on mysql-01 and, through keys another master wrote,
	// on mysql-02, mysql-03 and mysql-04.
	h.ok("stream", "create", h.file("cdc.yaml", ordersCDC))
	for _, src := range []string{"mysql-02", "mysql-03", "mysql-04"} {
		h.put("/stream/config/"+src+"/orders-cdc", `{"name":"orders-cdc","source-id":"`+src+`","sink":{"type":"file","file":{"dir":"/x"}}}`)
		h.put("/stage/stream/"+src+"/orders-cdc", `{"expect":"Paused","source":"`+src+`","task":"orders-cdc"}`)
	}
	h.ok("stream", "resume", "orders-cdc", "--ignore-untreated")
	h.put("/status/w1", streamW1)
	// w2 runs streams but has not deployed orders-cdc yet; w3 runs a
	// release whose status has no "streams".
	h.put("/status/w2", `{"worker":"w2","source":"mysql-02","subtasks":[],"streams":[],"errors":[]}`)
	h.put("/status/w3", `{"worker":"w3","source":"mysql-03","subtasks":[],"errors":[]}`)

	var doc streamStatusDoc
	h.runJSON(&doc, "stream", "status", "orders-cdc")
	if doc.Stream != "orders-cdc" || len(doc.Sources) != 4 {
		t.Fatalf("status = %+v", doc)
	}
	s1 := doc.Sources[0]
	if s1.Source != "mysql-01" || s1.Worker != "w1" || s1.Expect != "Running" || !s1.IgnoreUntreated || s1.Note != "" ||
		s1.Stream["name"] != "orders-cdc" || s1.Stream["state"] != "streaming" || s1.Stream["checkpoint"] != "mariadb-bin.000003:1234" ||
		s1.Stream["checkpoint-gtid"] != "0-1-900" || s1.Stream["events"] != float64(123) || s1.Stream["lag-seconds"] != 0.2 ||
		field(t, s1.Stream, "fill-history.tables-done") != float64(7) || !strings.HasPrefix(s1.Stream["skipped"].(string), "mariadb-bin.000002:4") {
		t.Errorf("mysql-01 status = %+v", s1)
	}
	if len(s1.Errors) != 2 || s1.Errors[0]["code"] != "stream-sink" || s1.Errors[1]["code"] != "stage-without-config" {
		t.Errorf("mysql-01 top-level errors = %v, want orders-cdc's two", s1.Errors)
	}
	notes := []struct{ source, worker, note string }{
		{"mysql-02", "w2", "worker w2 does not report stream orders-cdc yet: the stream was just created or changed and the worker has not deployed it, or the worker runs a release without stream tasks"},
		{"mysql-03", "w3", `worker w3 runs a release without stream tasks (its status has no "streams"); upgrade it to run stream orders-cdc`},
		{"mysql-04", "", "source mysql-04 is not bound to a worker; the stream runs once it is bound (`dmctl bind mysql-04 WORKER`)"},
	}
	for i, n := range notes {
		s := doc.Sources[i+1]
		if s.Source != n.source || s.Worker != n.worker || s.Expect != "Running" || s.Stream != nil || s.Note != n.note || len(s.Errors) != 0 {
			t.Errorf("%s status = %+v, want worker %q, no stream and note %q", n.source, s, n.worker, n.note)
		}
	}
	raw := h.ok("--output", "json", "stream", "status", "orders-cdc").stdout
	if !strings.Contains(raw, `"stream": null`) || !strings.Contains(raw, `"errors": []`) {
		t.Errorf("status JSON lacks null stream / empty errors:\n%s", raw)
	}

	text := h.ok("stream", "status", "orders-cdc").stdout
	for _, want := range []string{
		"stream orders-cdc\n",
		"source mysql-01  worker w1  expect Running (ignore-untreated)  stage Running  state streaming\n",
		"  checkpoint mariadb-bin.000003:1234  gtid 0-1-900\n",
		"  events 123  lag 0.2s\n",
		"  fill-history 7/8 tables done, 200000 rows\n",
		`  skipped (ignore-untreated) mariadb-bin.000002:4 (gtid "0-1-10") to mariadb-bin.000003:4 (gtid "0-1-800")` + "\n",
		"  error [stream-sink] sink slow (resumable)\n",
		"  error [stage-without-config] about orders-cdc\n",
		"source mysql-02  worker w2  expect Running (ignore-untreated)  (" + notes[0].note + ")\n",
		"source mysql-03  worker w3  expect Running (ignore-untreated)  (" + notes[1].note + ")\n",
		"source mysql-04  worker -  expect Running (ignore-untreated)  (" + notes[2].note + ")\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("status text lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "sink slow") != 1 || strings.Contains(text, "not ours") {
		t.Errorf("status text shows an error twice or another stream's error:\n%s", text)
	}

	// The status w1 serves over HTTP is fresher than its copy in etcd.
	w1.set(func(method, path string, _ []byte) (int, string) {
		if method == "GET" && path == "/api/v1/status" {
			return 200, `{"worker":"w1","source":"mysql-01","subtasks":[],"errors":[],"streams":[
 {"name":"orders-cdc","stage":"Paused","state":"paused","checkpoint":"","checkpoint-gtid":"","events":0,"lag-seconds":0,"errors":[]}]}`
		}
		return 404, `{"error":{"code":"not-found","message":"no such endpoint"}}`
	})
	text = h.ok("stream", "status", "orders-cdc").stdout
	for _, want := range []string{"worker w1  expect Running (ignore-untreated)  stage Paused  state paused\n", "  checkpoint -  gtid -\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("status text with w1 answering over HTTP lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "fill-history") || strings.Contains(text, "sink slow") {
		t.Errorf("status text with w1 answering over HTTP still shows the etcd copy:\n%s", text)
	}

	// An unreadable status is reported, not fatal.
	h.put("/status/w2", `{not json`)
	h.runJSON(&doc, "stream", "status", "orders-cdc")
	if s := doc.Sources[1]; len(s.Errors) != 1 || s.Errors[0]["code"] != statusUnreadable ||
		s.Note != "no readable status from worker w2 (not running, or just started)" {
		t.Errorf("mysql-02 with a broken status = %+v", s)
	}
}
