package worker

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// fuzzEndpoints are the API requests that carry untrusted input: POST
// bodies and the validation errors' state query. The task name in the path
// is fuzzed too.
var fuzzEndpoints = []struct {
	method string
	path   func(task string) string
	// valid reports whether the handler must accept body/query (answer
	// anything but 400): an independent reading of the request's contract.
	valid func(body []byte, query string) bool
}{
	{http.MethodPost, func(string) string { return "/api/v1/relay/purge" }, func(body []byte, _ string) bool {
		var req PurgeRequest
		if !strictJSON(body, &req) {
			return false
		}
		set := 0
		for _, b := range []bool{req.Inactive, req.Filename != "", req.Time != nil} {
			if b {
				set++
			}
		}
		return set == 1
	}},
	{http.MethodPost, func(task string) string { return "/api/v1/subtasks/" + url.PathEscape(task) + "/handle-error" }, func(body []byte, _ string) bool {
		var req struct {
			Op        string   `json:"op"`
			BinlogPos string   `json:"binlog-pos"`
			SQLs      []string `json:"sqls"`
		}
		return strictJSON(body, &req) && (req.Op == "skip" || req.Op == "replace" && len(req.SQLs) > 0)
	}},
	{http.MethodPost, func(task string) string { return "/api/v1/subtasks/" + url.PathEscape(task) + "/validation/errors" }, func(body []byte, _ string) bool {
		var req ValidationErrorsRequest
		return strictJSON(body, &req) && (req.Op == "ignore" || req.Op == "resolve" || req.Op == "clear") && (req.ID != nil) != req.All
	}},
	{http.MethodGet, func(task string) string { return "/api/v1/subtasks/" + url.PathEscape(task) + "/validation/errors" }, func(_ []byte, state string) bool {
		return state == "" || state == "new" || state == "ignored" || state == "resolved" || state == "all"
	}},
}

// strictJSON decodes exactly one JSON value with no unknown fields.
func strictJSON(body []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if dec.Decode(v) != nil {
		return false
	}
	_, err := dec.Token()
	return err == io.EOF // nothing after the value
}

// FuzzHTTPRequests sends fuzzed bodies, task names and queries to the
// worker's API behind its Guard (a worker bound to no source, from
// loopback). Properties:
// never a panic nor a 5xx; every error answer is JSON in the §6 shape
// {"error":{"code","message"}} with both set; a request the contract
// accepts is not answered 400, one it refuses is; a successful answer is
// JSON.
func FuzzHTTPRequests(f *testing.F) {
	bodies := []string{
		`{"inactive":true}`, `{"filename":"mariadb-bin.000003"}`, `{"time":"2026-01-02T03:04:05Z"}`,
		`{"inactive":true,"filename":"x"}`, `{"time":"yesterday"}`, `{"time":null}`, `{"inactive":false}`,
		`{"op":"skip"}`, `{"op":"skip","binlog-pos":"mariadb-bin.000003:1234"}`, `{"op":"replace","sqls":["INSERT INTO t VALUES (1)"]}`,
		`{"op":"replace"}`, `{"op":"replace","sqls":[]}`, `{"op":"skip","binlog-pos":"x:"}`,
		`{"op":"ignore","id":1}`, `{"op":"clear","all":true}`, `{"op":"resolve","id":1,"all":true}`, `{"op":"ignore","id":-9223372036854775809}`,
		``, `null`, `[]`, `{}`, `{"op":"skip"}{"op":"skip"}`, `{"op":"skip"} x`, `{"op":"skip"}]`, `{"inactive":true} }`, `{"unknown":1}`, `{"op":"skip","op":"replace"}`,
		`{"op":"\ud800"}`, "\xff\xfe", `{"sqls":[1]}`, `{"id":1e400}`, strings.Repeat("[", 10000),
	}
	for i := range fuzzEndpoints {
		for _, b := range bodies {
			f.Add(uint8(i), "t1", b, "")
		}
		f.Add(uint8(i), "", `{}`, "")
		f.Add(uint8(i), "a/b", `{"op":"skip"}`, "")
		f.Add(uint8(i), "../../x", `{"op":"skip"}`, "")
		f.Add(uint8(i), "t1", ``, "new")
		f.Add(uint8(i), "t1", ``, "bogus")
		f.Add(uint8(i), "t1", ``, "all&state=new")
	}
	srv := NewServer(ServerConfig{Name: "w1", Addr: "127.0.0.1:8262", Prefix: "/dm"})
	h := Guard(srv.Handler(prometheus.NewRegistry()), nil) // as dm-worker serves it
	f.Fuzz(func(t *testing.T, which uint8, task, body, state string) {
		ep := fuzzEndpoints[int(which)%len(fuzzEndpoints)]
		target := ep.path(task)
		if state != "" {
			target += "?state=" + url.QueryEscape(state)
		}
		req := httptest.NewRequest(ep.method, target, strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		if rec.Code >= 500 {
			t.Fatalf("%s %s with body %q: %d %s", ep.method, target, body, rec.Code, rec.Body)
		}
		// A task name that does not route (empty, a slash, a dot segment)
		// may get a redirect of the mux; the rest must reach its handler.
		routed := task != "" && !strings.Contains(task, "/") && task != "." && task != ".."
		if !routed && rec.Code >= 300 && rec.Code < 400 {
			return
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s %s: Content-Type %q, body %s", ep.method, target, ct, rec.Body)
		}
		if rec.Code < 400 {
			if !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%s %s: %d with a body that is not JSON: %q", ep.method, target, rec.Code, rec.Body)
			}
			return
		}
		var doc struct {
			Error *struct {
				Code    *string `json:"code"`
				Message *string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.Error == nil || doc.Error.Code == nil ||
			doc.Error.Message == nil || *doc.Error.Code == "" || *doc.Error.Message == "" {
			t.Fatalf("%s %s: %d answer is not {\"error\":{\"code\",\"message\"}}: %q", ep.method, target, rec.Code, rec.Body)
		}
		if rec.Code == http.StatusBadRequest && *doc.Error.Code != CodeBadRequest {
			t.Fatalf("%s %s: 400 with code %q", ep.method, target, *doc.Error.Code)
		}
		if !routed {
			return // a 404 of the mux: the contract does not apply
		}
		if valid := ep.valid([]byte(body), state); valid == (rec.Code == http.StatusBadRequest) {
			t.Fatalf("%s %s with body %q: %d %s; the contract says the request is valid=%v", ep.method, target, body, rec.Code, rec.Body, valid)
		}
	})
}
