package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// valWorker stands in for a worker's status and validation-errors
// endpoints for task1: it keeps the errors in memory, applies the
// operations posted to it as the worker's API does, and records the
// requests.
type valWorker struct {
	name, source string

	mu sync.Mutex
	// validator is the raw "validator" object of task1's status; "" for
	// none.
	validator string
	errors    []validationError
	// refuse, when set, is the error code every validation request gets
	// (409).
	refuse string
	// changed makes POST answers carry {"changed":N}.
	changed bool
	queries []string                  // the query of every GET of the errors
	posts   []validationErrorsRequest // every POST of an operation
}

// valFake starts a valWorker registered (info, keepalive) as worker name.
func (h *harness) valFake(name, source string) *valWorker {
	h.t.Helper()
	w := &valWorker{name: name, source: source}
	srv := httptest.NewServer(http.HandlerFunc(w.serve))
	h.t.Cleanup(srv.Close)
	h.put("/worker/info/"+name, `{"name":"`+name+`","addr":"`+strings.TrimPrefix(srv.URL, "http://")+`"}`)
	h.put("/worker/keepalive/"+name, `{"name":"`+name+`","join-time":"2026-01-02T15:04:05Z"}`)
	return w
}

func (w *valWorker) serve(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	answer := func(code int, v any) {
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(code)
		_ = json.NewEncoder(rw).Encode(v)
	}
	fail := func(code int, c, msg string) {
		answer(code, map[string]any{"error": map[string]string{"code": c, "message": msg}})
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/status":
		v := ""
		if w.validator != "" {
			v = `,"validator":` + w.validator
		}
		fmt.Fprintf(rw, `{"worker":%q,"source":%q,"subtasks":[{"name":"task1","stage":"Running","unit":"Sync","errors":[]%s}],"errors":[]}`,
			w.name, w.source, v)
	case r.URL.Path != "/api/v1/subtasks/task1/validation/errors":
		fail(404, "not-found", "no such endpoint")
	case w.refuse != "":
		fail(409, w.refuse, `subtask "task1" has no running validator`)
	case r.Method == http.MethodGet:
		w.queries = append(w.queries, r.URL.RawQuery)
		state := r.URL.Query().Get("state")
		out := []validationError{}
		for _, e := range w.errors {
			if state == "all" || e.State == state {
				out = append(out, e)
			}
		}
		answer(200, map[string]any{"errors": out})
	default:
		var req validationErrorsRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || (req.ID == nil) == !req.All {
			fail(400, "bad-request", `give exactly one of "id":N or "all":true`)
			return
		}
		w.posts = append(w.posts, req)
		n, ok := w.apply(req)
		if !ok {
			fail(404, "validation-error-not-found", fmt.Sprintf("validation error %d not found", *req.ID))
			return
		}
		if w.changed {
			answer(200, map[string]any{"result": "ok", "changed": n})
			return
		}
		answer(200, map[string]string{"result": "ok"})
	}
}

// apply applies an operation to the errors; ok is false when the id is
// unknown.
func (w *valWorker) apply(req validationErrorsRequest) (n int, ok bool) {
	state := map[string]string{"ignore": "ignored", "resolve": "resolved"}[req.Op]
	var kept []validationError
	for _, e := range w.errors {
		match := req.All || e.ID == *req.ID
		if match {
			n++
			ok = true
		}
		switch {
		case match && req.Op == "clear":
			continue
		case match:
			e.State = state
		}
		kept = append(kept, e)
	}
	w.errors = kept
	return n, ok || req.All
}

// took returns the recorded GET queries and POSTs and forgets them.
func (w *valWorker) took() ([]string, []validationErrorsRequest) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q, p := w.queries, w.posts
	w.queries, w.posts = nil, nil
	return q, p
}

func (w *valWorker) set(fn func(w *valWorker)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fn(w)
}

// valHarness has task1 (taskYAML) on mysql-01 and mysql-02, bound to the
// fake workers w1 and w2.
func valHarness(t *testing.T) (*harness, *valWorker, *valWorker) {
	h := newHarness(t)
	w1, w2 := h.valFake("w1", "mysql-01"), h.valFake("w2", "mysql-02")
	h.ok("source", "create", h.sourceFile("mysql-01", ""), "--worker", "w1")
	h.ok("source", "create", h.sourceFile("mysql-02", ""), "--worker", "w2")
	h.ok("task", "start", h.file("task1.yaml", taskYAML))
	return h, w1, w2
}

// valLine returns the fields of the first output line starting with
// first.
func valLine(t *testing.T, out, first string) []string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == first {
			return f
		}
	}
	t.Fatalf("no line starts with %q in:\n%s", first, out)
	return nil
}

func TestValidationStatus(t *testing.T) {
	h, _, w2 := valHarness(t)
	w2.set(func(w *valWorker) {
		w.validator = `{"stage":"Running","pending":3,"errors":{"new":2,"ignored":1,"resolved":0},"mode":"full","state":"validating",
			"rows-checked":1234,"checkpoint":"mariadb-bin.000002:4","binlog":"mariadb-bin.000002:900","lag-seconds":1.5,
			"skipped-tables":["db2.nokey"],"error":{"code":"validator-store","message":"target down","resumable":true,"time":"2026-01-02T15:04:05Z"}}`
	})
	out := h.ok("validation", "status", "task1").stdout
	if got, want := valLine(t, out, "mysql-02"), strings.Fields("mysql-02 w2 Running Running full validating 3 2 1 0 1234 1.5 mariadb-bin.000002:4"); !slices.Equal(got, want) {
		t.Errorf("mysql-02 row = %q, want %q", got, want)
	}
	// mysql-01 has no validator mode, so no validator stage and object.
	if got := valLine(t, out, "mysql-01"); !slices.Equal(got, []string{"mysql-01", "w1", "-"}) {
		t.Errorf("mysql-01 row = %q", got)
	}
	for _, w := range []string{"SOURCE", "ROWS-CHECKED", "source mysql-02: tables not validated (no primary or NOT NULL unique key): db2.nokey",
		"source mysql-02: error [validator-store] target down"} {
		if !strings.Contains(out, w) {
			t.Errorf("validation status lacks %q:\n%s", w, out)
		}
	}

	h.ok("validation", "start", "task1")
	var doc validationStatusJSON
	h.runJSON(&doc, "validation", "status", "task1")
	if len(doc.Sources) != 2 || doc.Sources[0].Expect != "Running" || doc.Sources[0].Validator != nil {
		t.Fatalf("validation status JSON = %+v", doc)
	}
	if v := doc.Sources[1].Validator; v == nil || v.RowsChecked != 1234 || v.Errors.New != 2 || v.Error == nil || v.Error.Code != "validator-store" {
		t.Errorf("validator of mysql-02 = %+v", v)
	}
	h.fail([]string{"validation", "status", "nosuch"}, "task nosuch does not exist")
	h.fail([]string{"validation", "status"}, "needs TASK")
}

// valErrors are the errors the fake workers hold.
func valErrors() (w1, w2 []validationError) {
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	rec := func(id int64, table, kind, state, key, src, dst string) validationError {
		e := validationError{ID: id, Table: table, TargetTable: table, Kind: kind, State: state, Time: at,
			Key: json.RawMessage(key), Binlog: "mariadb-bin.000002:100"}
		if src != "" {
			e.SourceRow = json.RawMessage(src)
		}
		if dst != "" {
			e.TargetRow = json.RawMessage(dst)
		}
		return e
	}
	return []validationError{
			rec(1, "db1.t1", "missing", "new", `{"id":"1"}`, `{"id":"1","v":"a"}`, ""),
			rec(2, "db1.t1", "extra", "ignored", `{"id":"2"}`, "", `{"id":"2","v":"b"}`),
		}, []validationError{
			rec(1, "db2.t", "different", "new", `{"id": "7"}`, `{"id":"7","v":"x"}`, `{"id":"7","v":"y"}`),
		}
}

func TestValidationErrors(t *testing.T) {
	h, w1, w2 := valHarness(t)
	e1, e2 := valErrors()
	w1.set(func(w *valWorker) { w.errors = e1 })
	w2.set(func(w *valWorker) { w.errors = e2 })

	out := h.ok("validation", "errors", "task1").stdout
	at := e1[0].Time.Local().Format(time.DateTime)
	if got, want := valLine(t, out, "1"), append([]string{"1", "mysql-01", "db1.t1", "missing", "new"}, append(strings.Fields(at), `{"id":"1"}`)...); !slices.Equal(got, want) {
		t.Errorf("first row = %q, want %q", got, want)
	}
	if strings.Contains(out, "extra") || !strings.Contains(out, `mysql-02  db2.t   different  new`) || !strings.Contains(out, `{"id":"7"}`) {
		t.Errorf("default (new) listing:\n%s", out)
	}
	for _, w := range []*valWorker{w1, w2} {
		if q, _ := w.took(); !slices.Equal(q, []string{"state=new"}) {
			t.Errorf("%s got queries %q, want state=new", w.name, q)
		}
	}

	var doc validationErrorsJSON
	h.runJSON(&doc, "validation", "errors", "task1", "--state", "all", "--source", "mysql-01")
	if doc.State != "all" || len(doc.Sources) != 1 || len(doc.Sources[0].Errors) != 2 || doc.Sources[0].Worker != "w1" {
		t.Fatalf("errors JSON = %+v", doc)
	}
	if e := doc.Sources[0].Errors[1]; compactJSON(e.TargetRow) != `{"id":"2","v":"b"}` || string(e.SourceRow) != "null" || e.State != "ignored" {
		t.Errorf("error 2 of mysql-01 = %+v", e)
	}
	if q, _ := w2.took(); len(q) != 0 {
		t.Errorf("--source mysql-01 queried w2 too: %q", q)
	}

	// One worker refuses: the other's errors are shown, the command fails.
	w1.set(func(w *valWorker) { w.refuse = "validator-not-running" })
	r := h.run("validation", "errors", "task1", "-s", "mysql-02")
	if r.code != 0 {
		t.Errorf("errors of mysql-02 only: exit %d: %s", r.code, r.stderr)
	}
	r = h.run("validation", "errors", "task1")
	if r.code != 1 || !strings.Contains(r.stdout, "db2.t") || !strings.Contains(r.stdout, "source mysql-01: worker w1 answered 409 validator-not-running") ||
		!strings.Contains(r.stderr, "on source(s) mysql-01") {
		t.Errorf("a refusing worker: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}

	h.fail([]string{"validation", "errors", "task1", "--state", "open"}, `--state "open": use new, ignored, resolved or all`)
	h.fail([]string{"validation", "errors", "task1", "-s", "mysql-03"}, "task task1 has no subtask on source mysql-03")
	h.fail([]string{"validation", "errors", "nosuch"}, "task nosuch does not exist")
}

func TestValidationOperate(t *testing.T) {
	h, w1, w2 := valHarness(t)
	e1, e2 := valErrors()
	w1.set(func(w *valWorker) { w.errors = e1 })
	w2.set(func(w *valWorker) { w.errors = e2 })
	posts := func(w *valWorker, want ...string) {
		t.Helper()
		_, p := w.took()
		var got []string
		for _, r := range p {
			b, _ := json.Marshal(r)
			got = append(got, string(b))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s got POSTs %q, want %q", w.name, got, want)
		}
	}
	states := func(w *valWorker) string {
		w.mu.Lock()
		defer w.mu.Unlock()
		var s []string
		for _, e := range w.errors {
			s = append(s, fmt.Sprintf("%d:%s", e.ID, e.State))
		}
		return strings.Join(s, " ")
	}

	out := h.ok("validation", "ignore", "task1", "1", "--source", "mysql-01").stdout
	if !strings.Contains(out, "task task1 source mysql-01 (worker w1): ignore validation error 1: done") {
		t.Errorf("ignore output:\n%s", out)
	}
	posts(w1, `{"op":"ignore","id":1}`)
	posts(w2)
	if s := states(w1); s != "1:ignored 2:ignored" {
		t.Errorf("w1 errors after ignore 1: %s", s)
	}

	w1.set(func(w *valWorker) { w.changed = true })
	var doc validationOperateJSON
	h.runJSON(&doc, "validation", "resolve", "task1", "--all")
	if !doc.All || doc.ID != nil || len(doc.Sources) != 2 || doc.Sources[0].Changed == nil || *doc.Sources[0].Changed != 2 || doc.Sources[1].Changed != nil {
		t.Errorf("resolve --all JSON = %+v", doc)
	}
	posts(w1, `{"op":"resolve","all":true}`)
	posts(w2, `{"op":"resolve","all":true}`)
	if s1, s2 := states(w1), states(w2); s1 != "1:resolved 2:resolved" || s2 != "1:resolved" {
		t.Errorf("errors after resolve --all: w1 %s, w2 %s", s1, s2)
	}

	out = h.ok("validation", "clear", "task1", "--all", "-s", "mysql-02").stdout
	if !strings.Contains(out, "source mysql-02 (worker w2): clear all validation errors: done") || strings.Contains(out, "mysql-01") {
		t.Errorf("clear --all -s mysql-02 output:\n%s", out)
	}
	posts(w1)
	posts(w2, `{"op":"clear","all":true}`)

	// The worker's not-found answer: exit 1 with its code and message.
	r := h.run("validation", "clear", "task1", "99", "-s", "mysql-01")
	if r.code != 1 || !strings.Contains(r.stdout, "validation-error-not-found") || !strings.Contains(r.stdout, "validation error 99 not found") ||
		!strings.Contains(r.stderr, "validation clear of task task1 failed on source(s) mysql-01") {
		t.Errorf("unknown id: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	posts(w1, `{"op":"clear","id":99}`)

	h.fail([]string{"validation", "ignore", "task1", "1"}, "error IDs are per source: add --source S")
	h.fail([]string{"validation", "ignore", "task1"}, "needs TASK ID")
	h.fail([]string{"validation", "ignore", "task1", "x", "-s", "mysql-01"}, `error ID "x"`)
	h.fail([]string{"validation", "resolve", "task1", "0", "-s", "mysql-01"}, `error ID "0"`)
	h.fail([]string{"validation", "clear", "task1", "1", "--all"}, "give an error ID or --all, not both")
	h.fail([]string{"validation", "clear", "task1", "--all", "-s", "mysql-03"}, "task task1 has no subtask on source mysql-03")
	h.fail([]string{"validation", "clear", "nosuch", "--all"}, "task nosuch does not exist")
	posts(w1)
	posts(w2)
}
