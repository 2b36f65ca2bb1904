package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeWorker is an HTTP server standing in for a worker's API: it records
// every request and answers with the function the test sets.
type fakeWorker struct {
	srv *httptest.Server

	mu     sync.Mutex
	calls  []fakeCall
	answer func(method, path string, body []byte) (int, string)
}

type fakeCall struct {
	Method, Path string
	Body         map[string]any
}

// fakeWorker registers worker name (info with the fake server's address,
// keepalive) and returns the fake.
func (h *harness) fakeWorker(name string) *fakeWorker {
	h.t.Helper()
	f := &fakeWorker{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m map[string]any
		if len(body) > 0 {
			if err := json.Unmarshal(body, &m); err != nil {
				http.Error(w, "bad json", http.StatusBadRequest)
				return
			}
		}
		f.mu.Lock()
		f.calls = append(f.calls, fakeCall{r.Method, r.URL.Path, m})
		answer := f.answer
		f.mu.Unlock()
		code, out := http.StatusNotFound, `{"error":{"code":"not-found","message":"no such endpoint"}}`
		if answer != nil {
			code, out = answer(r.Method, r.URL.Path, body)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, out)
	}))
	h.t.Cleanup(f.srv.Close)
	addr := strings.TrimPrefix(f.srv.URL, "http://")
	h.put("/worker/info/"+name, `{"name":"`+name+`","addr":"`+addr+`"}`)
	h.put("/worker/keepalive/"+name, `{"name":"`+name+`","join-time":"2026-01-02T15:04:05Z"}`)
	return f
}

func (f *fakeWorker) set(answer func(method, path string, body []byte) (int, string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer = answer
}

// posts returns the recorded POST requests and forgets every call.
func (f *fakeWorker) posts() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeCall
	for _, c := range f.calls {
		if c.Method == http.MethodPost {
			out = append(out, c)
		}
	}
	f.calls = nil
	return out
}

func TestRelayPurge(t *testing.T) {
	h := newHarness(t)
	w1 := h.fakeWorker("w1")
	h.ok("source", "create", h.sourceFile("mysql-01", ""), "--worker", "w1")
	h.worker("w2", true)
	h.ok("source", "create", h.sourceFile("mysql-02", ""), "--worker", "w2")
	h.ok("unbind", "w2")

	w1.set(func(_, path string, _ []byte) (int, string) {
		if path != "/api/v1/relay/purge" {
			return 404, `{"error":{"code":"not-found","message":"no"}}`
		}
		return 200, `{"purged":["mariadb-bin.000001","mariadb-bin.000002"]}`
	})
	cases := []struct {
		args []string
		body string
	}{
		{[]string{"--inactive"}, `{"inactive":true}`},
		{[]string{"--filename", "mariadb-bin.000003"}, `{"filename":"mariadb-bin.000003"}`},
		{[]string{"--time", "2026-01-02T15:04:05+01:00"}, `{"time":"2026-01-02T14:04:05Z"}`},
	}
	for _, c := range cases {
		out := h.ok(append([]string{"relay", "purge", "mysql-01"}, c.args...)...).stdout
		if !strings.Contains(out, "purged 2 file(s)") || !strings.Contains(out, "mariadb-bin.000002") {
			t.Errorf("relay purge %v output:\n%s", c.args, out)
		}
		posts := w1.posts()
		if len(posts) != 1 || posts[0].Path != "/api/v1/relay/purge" {
			t.Fatalf("relay purge %v: worker saw %+v", c.args, posts)
		}
		if got, _ := json.Marshal(posts[0].Body); string(got) != c.body {
			t.Errorf("relay purge %v: body %s, want %s", c.args, got, c.body)
		}
	}
	var res purgeResult
	h.runJSON(&res, "relay", "purge", "mysql-01", "--inactive")
	if res.Source != "mysql-01" || res.Worker != "w1" || strings.Join(res.Purged, ",") != "mariadb-bin.000001,mariadb-bin.000002" {
		t.Errorf("relay purge JSON = %+v", res)
	}
	w1.posts()

	// The worker's refusal is shown with its code and message.
	w1.set(func(string, string, []byte) (int, string) {
		return 409, `{"error":{"code":"purge-forbidden","message":"relay file mariadb-bin.000002 is still needed by paused subtask task1"}}`
	})
	h.fail([]string{"relay", "purge", "mysql-01", "--inactive"}, "purge-forbidden", "still needed by paused subtask task1", "worker w1")

	h.fail([]string{"relay", "purge", "mysql-01"}, "exactly one of --inactive, --filename F or --time T")
	h.fail([]string{"relay", "purge", "mysql-01", "--inactive", "--filename", "x"}, "exactly one of")
	h.fail([]string{"relay", "purge", "mysql-01", "--time", "yesterday"}, `--time "yesterday"`)
	h.fail([]string{"relay", "purge", "mysql-02", "--inactive"}, "source mysql-02 is not bound", "dmctl bind mysql-02")
	h.fail([]string{"relay", "purge", "nosuch", "--inactive"}, "source nosuch does not exist")
	if n := len(w1.posts()); n != 1 {
		t.Errorf("the worker got %d POSTs from the failing commands, want 1 (the refused one)", n)
	}
}

// stuckStatus is a worker status whose task1 is paused with an error.
func stuckStatus(worker, source string, stuck bool) string {
	stage, errs := "Running", `[]`
	if stuck {
		stage, errs = "Paused", `[{"code":"sync-ddl","message":"the target rejected DDL","resumable":false,"time":"2026-01-02T15:04:05Z"}]`
	}
	return `{"worker":"` + worker + `","source":"` + source + `","subtasks":[{"name":"task1","stage":"` + stage +
		`","unit":"Sync","errors":` + errs + `}],"errors":[]}`
}

func TestTaskHandleError(t *testing.T) {
	h := newHarness(t)
	w1, w2 := h.fakeWorker("w1"), h.fakeWorker("w2")
	h.ok("source", "create", h.sourceFile("mysql-01", ""), "--worker", "w1")
	h.ok("source", "create", h.sourceFile("mysql-02", ""), "--worker", "w2")
	h.ok("task", "start", h.file("task1.yaml", taskYAML))

	answer := func(worker, source string, stuck bool) func(string, string, []byte) (int, string) {
		return func(method, path string, _ []byte) (int, string) {
			switch {
			case method == http.MethodGet && path == "/api/v1/status":
				return 200, stuckStatus(worker, source, stuck)
			case method == http.MethodPost && path == "/api/v1/subtasks/task1/handle-error":
				return 200, `{"result":"ok"}`
			}
			return 404, `{"error":{"code":"not-found","message":"no"}}`
		}
	}
	w1.set(answer("w1", "mysql-01", false))
	w2.set(answer("w2", "mysql-02", true))
	stageRev := func(source string) int64 {
		t.Helper()
		resp, err := h.cli.Get(h.ctx(), testPrefix+"/stage/subtask/"+source+"/task1")
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("stage of %s: %v %v", source, err, resp)
		}
		return resp.Kvs[0].ModRevision
	}

	// Without --source: only the stuck source (mysql-02) is handled, and
	// its Running stage is rewritten so that the worker resumes.
	before1, before2 := stageRev("mysql-01"), stageRev("mysql-02")
	out := h.ok("task", "handle-error", "task1", "skip").stdout
	if !strings.Contains(out, "task task1 source mysql-02 (worker w2): skip recorded; subtask resumed") {
		t.Errorf("handle-error output:\n%s", out)
	}
	if p := w1.posts(); len(p) != 0 {
		t.Errorf("w1 (not stuck) got %+v", p)
	}
	p := w2.posts()
	if len(p) != 1 || p[0].Path != "/api/v1/subtasks/task1/handle-error" || p[0].Body["op"] != "skip" || p[0].Body["sqls"] != nil {
		t.Fatalf("w2 got %+v", p)
	}
	if stageRev("mysql-01") != before1 || stageRev("mysql-02") == before2 {
		t.Errorf("stage revisions: mysql-01 %d→%d (want unchanged), mysql-02 %d→%d (want rewritten)",
			before1, stageRev("mysql-01"), before2, stageRev("mysql-02"))
	}

	// replace with --source and --binlog-pos.
	var res handleErrorResult
	h.runJSON(&res, "task", "handle-error", "task1", "replace", "--source", "mysql-01", "--binlog-pos", "mariadb-bin.000002:1234",
		"--sql", "ALTER TABLE t ADD c INT", "--sql", "ALTER TABLE t ADD d INT")
	if len(res.Sources) != 1 || res.Sources[0].Source != "mysql-01" || !res.Sources[0].Resumed || res.Sources[0].Error != nil {
		t.Errorf("replace result = %+v", res)
	}
	p = w1.posts()
	if got, _ := json.Marshal(p[0].Body); len(p) != 1 ||
		string(got) != `{"binlog-pos":"mariadb-bin.000002:1234","op":"replace","sqls":["ALTER TABLE t ADD c INT","ALTER TABLE t ADD d INT"]}` {
		t.Errorf("w1 got %+v", p)
	}

	// A paused task is not resumed: the stage stays as the operator set it.
	h.ok("task", "pause", "task1")
	before2 = stageRev("mysql-02")
	out = h.ok("task", "handle-error", "task1", "skip", "-s", "mysql-02").stdout
	if !strings.Contains(out, "applies it when resumed") || stageRev("mysql-02") != before2 {
		t.Errorf("handle-error on a paused task: output %q, stage rev %d→%d", out, before2, stageRev("mysql-02"))
	}
	w2.posts()

	// The worker's refusal: exit 1 with its code and message.
	w2.set(func(string, string, []byte) (int, string) {
		return 409, `{"error":{"code":"handle-error-unsupported","message":"subtask \"task1\" is in unit \"Load\""}}`
	})
	r := h.run("task", "handle-error", "task1", "skip", "--source", "mysql-02")
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "handle-error-unsupported") || !strings.Contains(r.stderr, "failed on source(s) mysql-02") {
		t.Errorf("refused handle-error: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}

	w2.set(answer("w2", "mysql-02", false))
	h.fail([]string{"task", "handle-error", "task1", "skip"}, "no subtask of task task1 is paused with an error", "--source")
	h.fail([]string{"task", "handle-error", "task1", "skip", "--binlog-pos", "mariadb-bin.000002:4"}, "add --source S")
	h.fail([]string{"task", "handle-error", "task1", "replace", "-s", "mysql-01"}, "replace needs at least one --sql")
	h.fail([]string{"task", "handle-error", "task1", "skip", "--sql", "x", "-s", "mysql-01"}, "skip takes no --sql")
	h.fail([]string{"task", "handle-error", "task1", "ignore"}, `operation "ignore"`)
	h.fail([]string{"task", "handle-error", "task1", "skip", "-s", "mysql-03"}, "task task1 has no subtask on source mysql-03")
	h.fail([]string{"task", "handle-error", "task1", "skip", "-s", "mysql-01", "--binlog-pos", "nocolon"}, `--binlog-pos "nocolon"`)
	h.fail([]string{"task", "handle-error", "nosuch", "skip"}, "task nosuch does not exist")
}

func TestTaskConfig(t *testing.T) {
	h := taskHarness(t)
	h.ok("task", "start", h.file("task1.yaml", taskYAML))

	out := h.ok("task", "config", "task1").stdout
	for _, want := range []string{"# task task1, source mysql-01", "# task task1, source mysql-02", "---\n",
		"source-id: mysql-01", "password: '******'", "target-schema: db1_t", "worker-count: 4"} {
		if !strings.Contains(out, want) {
			t.Errorf("task config output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tpw") {
		t.Errorf("task config shows the target password:\n%s", out)
	}

	var doc struct {
		Task    string `json:"task"`
		Sources []struct {
			Source string         `json:"source"`
			Config map[string]any `json:"config"`
		} `json:"sources"`
	}
	h.runJSON(&doc, "task", "config", "task1")
	if doc.Task != "task1" || len(doc.Sources) != 2 || doc.Sources[1].Source != "mysql-02" {
		t.Fatalf("task config JSON = %+v", doc)
	}
	stored := h.getJSON("/task/config/mysql-02/task1")
	stored["target-database"].(map[string]any)["password"] = "******"
	got, _ := json.Marshal(doc.Sources[1].Config)
	want, _ := json.Marshal(stored)
	if string(got) != string(want) {
		t.Errorf("task config of mysql-02:\n got %s\nwant %s (etcd's value, password masked)", got, want)
	}

	h.put("/task/config/mysql-01/task1", `{not json`)
	h.fail([]string{"task", "config", "task1"}, "task task1 on source mysql-01", "cannot be read")
	h.fail([]string{"task", "config", "nosuch"}, "task nosuch does not exist")
}
