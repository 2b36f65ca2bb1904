package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
)

const dmTaskYAML = `name: task1
task-mode: all
target-database: {host: 127.0.0.1, port: 4000, user: root, password: tpw}
mysql-instances:
  - source-id: mysql-01
    block-allow-list: bal1
block-allow-list:
  bal1: {do-dbs: [db1]}
`

// TestDMCommandNames runs a DM user's everyday sequence with DM's command
// names against one cluster and the same sequence with ours against
// another: every step must end with the same exit code, the same output and
// the same etcd keys.
func TestDMCommandNames(t *testing.T) {
	type side struct {
		h          *harness
		task, srcF string
	}
	newSide := func() side {
		h := newHarness(t)
		h.worker("w1", true)
		return side{h: h, task: h.file("task1.yaml", dmTaskYAML), srcF: h.sourceFile("mysql-01", "")}
	}
	ours, dm := newSide(), newSide()
	steps := []struct {
		ours, dm func(s side) []string
	}{
		{func(s side) []string { return []string{"source", "create", s.srcF} },
			func(s side) []string { return []string{"operate-source", "create", s.srcF} }},
		{func(s side) []string { return []string{"source", "list"} },
			func(s side) []string { return []string{"operate-source", "show"} }},
		{func(s side) []string { return []string{"worker", "list"} },
			func(s side) []string { return []string{"list-member", "--worker"} }},
		{func(s side) []string { return []string{"task", "start", s.task} },
			func(s side) []string { return []string{"start-task", s.task} }},
		{func(s side) []string { return []string{"task", "status", "task1"} },
			func(s side) []string { return []string{"query-status", "task1"} }},
		{func(s side) []string { return []string{"task", "list"} },
			func(s side) []string { return []string{"query-status"} }},
		{func(s side) []string { return []string{"task", "pause", "task1"} },
			func(s side) []string { return []string{"pause-task", "task1"} }},
		{func(s side) []string { return []string{"task", "resume", "task1"} },
			func(s side) []string { return []string{"resume-task", s.task} }}, // DM takes the task file too
		{func(s side) []string { return []string{"task", "config", "task1"} },
			func(s side) []string { return []string{"config", "task", "task1"} }},
		{func(s side) []string { return []string{"relay", "start", "mysql-01"} },
			func(s side) []string { return []string{"start-relay", "-s", "mysql-01"} }},
		{func(s side) []string { return []string{"relay", "pause", "mysql-01"} },
			func(s side) []string { return []string{"pause-relay", "--source", "mysql-01"} }},
		{func(s side) []string { return []string{"relay", "resume", "mysql-01"} },
			func(s side) []string { return []string{"resume-relay", "-s=mysql-01"} }},
		{func(s side) []string { return []string{"relay", "stop", "mysql-01"} },
			func(s side) []string { return []string{"stop-relay", "-s", "mysql-01"} }},
		{func(s side) []string { return []string{"task", "stop", "task1"} },
			func(s side) []string { return []string{"stop-task", "task1"} }},
		{func(s side) []string { return []string{"source", "delete", "mysql-01"} },
			func(s side) []string { return []string{"operate-source", "stop", s.srcF} }},
	}
	for _, st := range steps {
		oa, da := st.ours(ours), st.dm(dm)
		or, dr := ours.h.run(oa...), dm.h.run(da...)
		if or.code != 0 || dr.code != 0 {
			t.Fatalf("%v: exit %d (stderr %s); %v: exit %d (stderr %s)", oa, or.code, or.stderr, da, dr.code, dr.stderr)
		}
		if strings.ReplaceAll(or.stdout, ours.h.dir, "") != strings.ReplaceAll(dr.stdout, dm.h.dir, "") {
			t.Errorf("%v printed\n%s\nbut %v printed\n%s", oa, or.stdout, da, dr.stdout)
		}
		if ok, dk := ours.h.keys(), dm.h.keys(); !maps.Equal(ok, dk) {
			t.Errorf("after %v the keys are\n%v\nbut after %v\n%v", oa, ok, da, dk)
		}
	}
}

// TestDMCommandNamesRefuse: DM flags without an equivalent are refused,
// saying why, and change nothing.
func TestDMCommandNamesRefuse(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", true)
	h.worker("w2", true)
	h.ok("operate-source", "create", h.sourceFile("mysql-01", ""))
	task := h.file("task1.yaml", dmTaskYAML)
	h.fail([]string{"start-task", "-s", "mysql-01", task}, "starting a task on some of its sources only has no equivalent")
	h.ok("start-task", task)
	h.fail([]string{"pause-task", "-s", "mysql-01,mysql-02", "task1"}, "-s mysql-01,mysql-02", "acts on every source")
	h.fail([]string{"start-relay", "-s", "mysql-01", "w2"}, "the relay runs on the worker the source is bound to")
	h.fail([]string{"start-relay"}, "needs exactly one -s SOURCE, got 0")
	h.fail([]string{"purge-relay", "-s", "mysql-01", "--filename", "f.000001", "--sub-dir", "x"}, "--sub-dir has no equivalent")
	h.fail([]string{"binlog", "inject", "task1", "ALTER TABLE t ADD c INT"}, "binlog inject has no equivalent")
	h.fail([]string{"config", "master"}, "config master has no equivalent", "config task TASK")
	h.fail([]string{"validation", "show-error", "--error", "bogus", "task1"}, `--error "bogus": use unprocessed, ignored, resolved or all`)
	h.fail([]string{"check-task", "--start-time", "2026-01-02 15:04:05", task}, "--start-time has no equivalent in task check")
	h.fail([]string{"stop-task", h.file("noname.yaml", "task-mode: all\n")}, "has no name field")
	h.fail([]string{"operate-source", "update", "x.yaml"}, `unknown operation "update"`, "dmctl source update FILE")
	r := h.ok("query-status", "-s", "mysql-01", "task1")
	if !strings.Contains(r.stderr, "shows every source") {
		t.Errorf("query-status -s: stderr %q does not say every source is shown", r.stderr)
	}
	r = runDmctl(t, "--master-addr", "127.0.0.1:8261", "query-status")
	if r.code != 1 || !strings.Contains(r.stderr, "give --etcd-endpoints") {
		t.Errorf("--master-addr: exit %d, stderr %q", r.code, r.stderr)
	}
	r = h.ok("--help")
	for _, want := range []string{"DM's command names", "start-task FILE", "= task start FILE", "query-status [TASK|FILE]"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--help does not list %q", want)
		}
	}
}

// TestDMWorkerAPINames: binlog skip/replace and the validation error
// commands under DM's names reach the workers with the requests ours send.
func TestDMWorkerAPINames(t *testing.T) {
	h, w1, w2 := valHarness(t)
	e1, e2 := valErrors()
	w1.set(func(w *valWorker) { w.errors = e1 })
	w2.set(func(w *valWorker) { w.errors = e2 })
	took := func() string {
		var b strings.Builder
		for _, w := range []*valWorker{w1, w2} {
			q, p := w.took()
			posts, _ := json.Marshal(p)
			fmt.Fprintf(&b, "%s: %q %s; ", w.name, q, posts)
		}
		return b.String()
	}
	pairs := [][2][]string{
		{{"validation", "errors", "task1", "--state", "all", "--source", "mysql-01"}, {"validation", "show-error", "--error", "all", "-s", "mysql-01", "task1"}},
		{{"validation", "errors", "task1"}, {"validation", "show-error", "task1"}},
		{{"validation", "ignore", "task1", "1", "--source", "mysql-01"}, {"validation", "ignore-error", "task1", "1", "-s", "mysql-01"}},
		{{"validation", "resolve", "task1", "--all"}, {"validation", "resolve-error", "task1", "--all"}},
		{{"validation", "clear", "task1", "--all", "--source", "mysql-02"}, {"validation", "clear-error", "task1", "--all", "-s", "mysql-02"}},
	}
	for _, p := range pairs {
		set := func() {
			e1, e2 := valErrors()
			w1.set(func(w *valWorker) { w.errors = e1 })
			w2.set(func(w *valWorker) { w.errors = e2 })
		}
		set()
		or := h.run(p[0]...)
		ot := took()
		set()
		dr := h.run(p[1]...)
		dt := took()
		if or.code != 0 || or.code != dr.code || or.stdout != dr.stdout || ot != dt {
			t.Errorf("%v: exit %d, requests %s\n%s\n%v: exit %d (%s), requests %s\n%s", p[0], or.code, ot, or.stdout, p[1], dr.code, dr.stderr, dt, dr.stdout)
		}
	}
}

// TestDMBinlogNames: binlog skip and replace post what task handle-error
// posts.
func TestDMBinlogNames(t *testing.T) {
	h := newHarness(t)
	w1 := h.fakeWorker("w1")
	h.ok("source", "create", h.sourceFile("mysql-01", ""), "--worker", "w1")
	h.ok("task", "start", h.file("task1.yaml", dmTaskYAML))
	w1.set(func(method, path string, _ []byte) (int, string) {
		switch {
		case method == http.MethodGet && path == "/api/v1/status":
			return 200, stuckStatus("w1", "mysql-01", true)
		case method == http.MethodPost && path == "/api/v1/subtasks/task1/handle-error":
			return 200, `{"result":"ok"}`
		}
		return 404, `{"error":{"code":"not-found","message":"no"}}`
	})
	pairs := [][2][]string{
		{{"task", "handle-error", "task1", "skip"}, {"binlog", "skip", "task1"}},
		{{"task", "handle-error", "task1", "skip", "--binlog-pos", "mariadb-bin.000002:1234", "--source", "mysql-01"},
			{"binlog", "skip", "task1", "-b", "mariadb-bin.000002:1234", "-s", "mysql-01"}},
		{{"task", "handle-error", "task1", "replace", "--sql", "ALTER TABLE t ADD c INT", "--sql", "ALTER TABLE t ADD d INT"},
			{"binlog", "replace", "task1", "ALTER TABLE t ADD c INT", "ALTER TABLE t ADD d INT"}},
	}
	for _, p := range pairs {
		or := h.run(p[0]...)
		op := fmt.Sprintf("%+v", w1.posts())
		dr := h.run(p[1]...)
		dp := fmt.Sprintf("%+v", w1.posts())
		if or.code != 0 || dr.code != 0 || or.stdout != dr.stdout || op != dp || op == "[]" {
			t.Errorf("%v: exit %d, posts %s\n%s\n%v: exit %d (%s), posts %s\n%s", p[0], or.code, op, or.stdout, p[1], dr.code, dr.stderr, dp, dr.stdout)
		}
	}
	h.fail([]string{"binlog", "replace", "task1"}, "needs a task name and at least one statement")
}
