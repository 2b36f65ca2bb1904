package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// TestHTTPAPIShapes checks every endpoint of DESIGN.md §6 on a real worker
// process: success shapes, and the documented JSON error for each failure.
func TestHTTPAPIShapes(t *testing.T) {
	c := newEtcdCluster(t)
	w := startWorker(t, workerOptions{name: "w1", endpoints: c.endpoints, prefix: c.prefix})

	// Unbound worker.
	r := get(t, w, "/healthz")
	if r.code != http.StatusOK || r.body != "ok" {
		t.Errorf("GET /healthz = %d %q, want 200 ok", r.code, r.body)
	}
	if r = get(t, w, "/debug/pprof/"); r.code != http.StatusOK || !strings.Contains(r.body, "goroutine") {
		t.Errorf("GET /debug/pprof/ = %d, want 200 with the profile index", r.code)
	}
	doc := decodeObject(t, get(t, w, "/api/v1/status"), http.StatusOK)
	for _, f := range []string{"worker", "addr", "source", "relay", "subtasks", "streams"} {
		if _, ok := doc[f]; !ok {
			t.Errorf("status lacks field %q: %v", f, doc)
		}
	}
	if doc["worker"] != "w1" || doc["addr"] != w.addr || doc["source"] != "" {
		t.Errorf("status identity = %v %v %v", doc["worker"], doc["addr"], doc["source"])
	}
	if relay, _ := doc["relay"].(map[string]any); relay == nil || relay["enabled"] != false {
		t.Errorf(`status relay = %v, want {"enabled":false}`, doc["relay"])
	}
	for _, f := range []string{"subtasks", "streams"} {
		if arr, ok := doc[f].([]any); !ok || len(arr) != 0 {
			t.Errorf("status %s = %#v, want []", f, doc[f])
		}
	}
	expectError(t, w, http.MethodPost, "/api/v1/relay/purge", `{"inactive":true}`, http.StatusConflict, "not-bound")

	// Bound to a source, no relay, one task whose target does not answer.
	c.ok("source", "create", writeFile(t, "mysql-01.yaml", sourceYAML("mysql-01")), "--worker", "w1")
	c.ok("task", "start", writeFile(t, "task1.yaml", taskYAML("task1", "mysql-01")))
	w.waitStatus(10*time.Second, "worker bound and task1 paused by its unreachable target", func(st workerStatus) bool {
		return st.hasSubtaskError("task1", "unit-init")
	})
	if doc := decodeObject(t, get(t, w, "/api/v1/subtasks/task1"), http.StatusOK); doc["name"] != "task1" || doc["unit"] != "Dump" {
		t.Errorf("GET /api/v1/subtasks/task1 = %v, want task1 at its Dump unit", doc)
	}
	body := get(t, w, "/api/v1/status").body
	for _, secret := range []string{sourcePassword, targetPassword} {
		if strings.Contains(body, secret) {
			t.Errorf("status contains a password:\n%s", body)
		}
	}
	// dm_worker_subtasks is set by the source worker's stage gauge, once
	// a second while bound.
	testutil.WaitFor(t, 10*time.Second, "dm_worker_ metrics exported", func() bool {
		return hasDMWorkerMetric(t, get(t, w, "/metrics"))
	})

	cases := []struct {
		method, path, body string
		status             int
		code               string
	}{
		{http.MethodGet, "/api/v1/subtasks/nope", "", http.StatusNotFound, "subtask-not-found"},
		{http.MethodGet, "/api/v1/streams/nope", "", http.StatusNotFound, "stream-not-found"},
		{http.MethodPost, "/api/v1/relay/purge", `{"inactive":`, http.StatusBadRequest, "bad-request"},
		{http.MethodPost, "/api/v1/relay/purge", `{"bogus":1}`, http.StatusBadRequest, "bad-request"},
		{http.MethodPost, "/api/v1/relay/purge", `{}`, http.StatusBadRequest, "bad-request"},
		{http.MethodPost, "/api/v1/relay/purge", `{"inactive":true}`, http.StatusConflict, "relay-not-enabled"},
		{http.MethodPost, "/api/v1/relay/purge", `{"filename":"mariadb-bin.000003"}`, http.StatusConflict, "relay-not-enabled"},
		{http.MethodPost, "/api/v1/relay/purge", `{"time":"2026-01-02T15:04:05Z"}`, http.StatusConflict, "relay-not-enabled"},
		{http.MethodPost, "/api/v1/subtasks/nope/handle-error", `{"op":"skip"}`, http.StatusNotFound, "subtask-not-found"},
		{http.MethodPost, "/api/v1/subtasks/nope/handle-error", `{"op":"replace","sqls":["SELECT 1"]}`, http.StatusNotFound, "subtask-not-found"},
		{http.MethodPost, "/api/v1/subtasks/nope/handle-error", `not json`, http.StatusBadRequest, "bad-request"},
		{http.MethodPost, "/api/v1/subtasks/nope/handle-error", `{"op":"explode"}`, http.StatusBadRequest, "bad-request"},
		{http.MethodPost, "/api/v1/subtasks/nope/handle-error", `{"op":"replace"}`, http.StatusBadRequest, "bad-request"},
		{http.MethodGet, "/api/v1/subtasks/nope/validation/errors?state=all", "", http.StatusNotFound, "subtask-not-found"},
		{http.MethodGet, "/api/v1/subtasks/nope/validation/errors?state=bogus", "", http.StatusBadRequest, "bad-request"},
		{http.MethodPost, "/api/v1/subtasks/nope/validation/errors", `{"op":"ignore","id":1}`, http.StatusNotFound, "subtask-not-found"},
		{http.MethodPost, "/api/v1/subtasks/nope/validation/errors", `{"op":"clear","all":true}`, http.StatusNotFound, "subtask-not-found"},
		{http.MethodPost, "/api/v1/subtasks/nope/validation/errors", `{"op":`, http.StatusBadRequest, "bad-request"},
		{http.MethodPost, "/api/v1/subtasks/nope/validation/errors", `{"op":"ignore"}`, http.StatusBadRequest, "bad-request"},
		{http.MethodGet, "/api/v1/nothing-here", "", http.StatusNotFound, "not-found"},
		{http.MethodGet, "/api/v2/status", "", http.StatusNotFound, "not-found"},
		{http.MethodPost, "/api/v1/status", `{}`, http.StatusMethodNotAllowed, "method-not-allowed"},
		{http.MethodDelete, "/api/v1/subtasks/task1", "", http.StatusMethodNotAllowed, "method-not-allowed"},
		{http.MethodGet, "/api/v1/relay/purge", "", http.StatusMethodNotAllowed, "method-not-allowed"},
		{http.MethodGet, "/api/v1/subtasks/task1/handle-error", "", http.StatusMethodNotAllowed, "method-not-allowed"},
		{http.MethodPut, "/api/v1/subtasks/task1/validation/errors", `{}`, http.StatusMethodNotAllowed, "method-not-allowed"},
		{http.MethodPost, "/healthz", "", http.StatusMethodNotAllowed, "method-not-allowed"},
	}
	for _, tc := range cases {
		expectError(t, w, tc.method, tc.path, tc.body, tc.status, tc.code)
	}
}

func get(t *testing.T, w *workerProc, path string) httpResult {
	t.Helper()
	r, err := httpDo(http.MethodGet, w.url(path), "")
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return r
}

// decodeObject requires status and a JSON object body, and returns it.
func decodeObject(t *testing.T, r httpResult, status int) map[string]any {
	t.Helper()
	if r.code != status {
		t.Fatalf("status %d, want %d: %s", r.code, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, r.body)
	}
	return doc
}

// expectError requires the documented error shape:
// {"error":{"code":code,"message":"<not empty>"}} with status.
func expectError(t *testing.T, w *workerProc, method, path, body string, status int, code string) {
	t.Helper()
	r, err := httpDo(method, w.url(path), body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if r.code != status {
		t.Errorf("%s %s %s: status %d, want %d: %s", method, path, body, r.code, status, r.body)
		return
	}
	var doc struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil || doc.Error == nil {
		t.Errorf("%s %s: body is not an error object: %v\n%s", method, path, err, r.body)
		return
	}
	if doc.Error.Code != code || doc.Error.Message == "" {
		t.Errorf("%s %s %s: error %+v, want code %q and a message", method, path, body, *doc.Error, code)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
}

// hasDMWorkerMetric parses /metrics as Prometheus text and reports whether
// it holds a dm_worker_ metric family with samples.
func hasDMWorkerMetric(t *testing.T, r httpResult) bool {
	t.Helper()
	if r.code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", r.code, r.body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(r.body))
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	if _, ok := families["go_goroutines"]; !ok {
		t.Errorf("/metrics lacks the Go runtime collector (go_goroutines)")
	}
	for name, f := range families {
		if strings.HasPrefix(name, "dm_worker_") && len(f.GetMetric()) > 0 {
			return true
		}
	}
	return false
}
