package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
)

// Passwords put into etcd by the HTTP tests; no answer may contain them.
const (
	httpSourcePassword = "src-pw-5f3a"
	httpTargetPassword = "tgt-pw-9c1e"
)

// startBoundServer runs a Server bound to testSource, whose config carries
// a password, with subtask t1 Running in a blocking Sync test unit, and
// returns it with its HTTP handler.
func startBoundServer(t *testing.T) (*serverEnv, http.Handler) {
	t.Helper()
	e := startServer(t)
	src := testSourceConfig()
	src.From.Password = httpSourcePassword
	if _, err := e.master.PutSourceConfig(e.ctx(), src); err != nil {
		t.Fatal(err)
	}
	if _, err := e.master.PutBound(e.ctx(), ha.Bound{Source: testSource, Worker: "w1"}); err != nil {
		t.Fatal(err)
	}
	cfg := taskConfig("t1")
	cfg.TargetDatabase.Password = httpTargetPassword
	if _, err := e.master.PutSubTask(e.ctx(), cfg, ha.Stage{Expect: stage.Running, Source: testSource, Task: "t1"}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "t1 running", func() error {
		return errors.Join(e.checkSubtaskStage("t1", stage.Running), checkUnitState(e.factory.latest("t1"), usRunning))
	})
	return e, e.srv.Handler(prometheus.NewRegistry())
}

// serve runs one request through h.
func serve(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// apiErrorOf decodes an error answer; it fails when the body is not one.
func apiErrorOf(t *testing.T, rec *httptest.ResponseRecorder) (code, message string) {
	t.Helper()
	var doc struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.Error == nil {
		t.Fatalf("body is not an error object: %v\n%s", err, rec.Body)
	}
	return doc.Error.Code, doc.Error.Message
}

func TestHTTPSubTaskObject(t *testing.T) {
	_, h := startBoundServer(t)
	rec := serve(h, http.MethodGet, "/api/v1/subtasks/t1", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /api/v1/subtasks/t1: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, rec.Body)
	}
	if doc["name"] != "t1" || doc["stage"] != "Running" || doc["unit"] != "Sync" {
		t.Errorf("name/stage/unit = %v/%v/%v", doc["name"], doc["stage"], doc["unit"])
	}
	if errs, ok := doc["errors"].([]any); !ok || len(errs) != 0 {
		t.Errorf("errors = %#v, want []", doc["errors"])
	}
	if p, ok := doc["progress"].(map[string]any); !ok || p["state"] != string(usRunning) {
		t.Errorf("progress = %#v, want the unit's own status", doc["progress"])
	}
	v, ok := doc["validator"].(map[string]any)
	if !ok || v["stage"] != "Stopped" {
		t.Fatalf("validator = %#v, want a Stopped validator object", doc["validator"])
	}
	if _, ok := v["pending"]; !ok {
		t.Errorf("validator lacks pending: %v", v)
	}
	if counts, ok := v["errors"].(map[string]any); !ok || len(counts) != 3 {
		t.Errorf("validator errors = %#v, want new/ignored/resolved counts", v["errors"])
	}
}

func TestHTTPErrorsOfABoundWorker(t *testing.T) {
	_, h := startBoundServer(t)
	cases := []struct {
		name         string
		method, path string
		body         string
		status       int
		code         string
	}{
		// The blocking test Sync unit does not implement unit.ErrorHandler.
		{"handle-error skip, unit cannot", http.MethodPost, "/api/v1/subtasks/t1/handle-error", `{"op":"skip"}`,
			http.StatusConflict, CodeHandleErrorUnsupported},
		{"handle-error replace, unit cannot", http.MethodPost, "/api/v1/subtasks/t1/handle-error",
			`{"op":"replace","binlog-pos":"mariadb-bin.000001:4","sqls":["SELECT 1"]}`, http.StatusConflict, CodeHandleErrorUnsupported},
		{"handle-error unknown task", http.MethodPost, "/api/v1/subtasks/t9/handle-error", `{"op":"skip"}`,
			http.StatusNotFound, CodeSubTaskNotFound},
		{"validation errors list, no validator", http.MethodGet, "/api/v1/subtasks/t1/validation/errors?state=new", "",
			http.StatusConflict, CodeValidatorNotRunning},
		{"validation errors operate, no validator", http.MethodPost, "/api/v1/subtasks/t1/validation/errors", `{"op":"resolve","all":true}`,
			http.StatusConflict, CodeValidatorNotRunning},
		{"purge, relay off", http.MethodPost, "/api/v1/relay/purge", `{"inactive":true}`,
			http.StatusConflict, CodeRelayNotEnabled},
		{"purge, relay off, by file", http.MethodPost, "/api/v1/relay/purge", `{"filename":"mariadb-bin.000001"}`,
			http.StatusConflict, CodeRelayNotEnabled},
		{"purge, two selectors", http.MethodPost, "/api/v1/relay/purge", `{"inactive":true,"filename":"mariadb-bin.000001"}`,
			http.StatusBadRequest, CodeBadRequest},
		{"subtask of an invalid name", http.MethodGet, "/api/v1/subtasks/bad%20name", "",
			http.StatusNotFound, CodeSubTaskNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(h, tc.method, tc.path, tc.body)
			if rec.Code != tc.status {
				t.Fatalf("%s %s: %d, want %d: %s", tc.method, tc.path, rec.Code, tc.status, rec.Body)
			}
			code, msg := apiErrorOf(t, rec)
			if code != tc.code || msg == "" {
				t.Errorf("error code %q message %q, want code %q and a message", code, msg, tc.code)
			}
		})
	}
}

// TestHTTPValidatorRunningButWithoutErrorStore checks that a validator
// that keeps no validation errors (the test validator) is answered like a
// missing one, not with a 500.
func TestHTTPValidatorRunningButWithoutErrorStore(t *testing.T) {
	e, h := startBoundServer(t)
	if _, err := e.master.PutValidatorStage(e.ctx(), ha.Stage{Expect: stage.Running, Source: testSource, Task: "t1"}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "validator running", func() bool {
		st := e.srv.SourceWorker().SubTask("t1")
		return st != nil && st.Validator() != nil
	})
	rec := serve(h, http.MethodGet, "/api/v1/subtasks/t1", "")
	var doc struct {
		Validator struct{ Stage string } `json:"validator"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.Validator.Stage != "Running" {
		t.Errorf("subtask validator = %+v (%v), want Running\n%s", doc.Validator, err, rec.Body)
	}
	rec = serve(h, http.MethodGet, "/api/v1/subtasks/t1/validation/errors", "")
	if code, _ := apiErrorOf(t, rec); rec.Code != http.StatusConflict || code != CodeValidatorNotRunning {
		t.Errorf("GET validation errors: %d %s", rec.Code, rec.Body)
	}
}

// TestHTTPStatusHasNoPasswords checks every status view (HTTP status,
// subtask object, the status key in etcd) for the passwords of the source
// and target configs.
func TestHTTPStatusHasNoPasswords(t *testing.T) {
	e, h := startBoundServer(t)
	// A malformed sibling task makes the status carry an error entry too.
	e.putRaw("/dm/task/config/"+testSource+"/t2", `{"name":"t2","target-database":{"password":"`+httpTargetPassword+`"`)
	e.putRaw("/dm/stage/subtask/"+testSource+"/t2", `{"expect":"Running","source":"`+testSource+`","task":"t2"}`)
	testutil.Eventually(t, 5*time.Second, "t2 reported", func() error {
		return e.checkErrorListed(func(te TaskError) bool { return te.Task == "t2" && te.Code == CodeSubTaskValueMalformed })
	})
	views := map[string]string{
		"GET /api/v1/status":      serve(h, http.MethodGet, "/api/v1/status", "").Body.String(),
		"GET /api/v1/subtasks/t1": serve(h, http.MethodGet, "/api/v1/subtasks/t1", "").Body.String(),
	}
	testutil.Eventually(t, 5*time.Second, "status key with t2's error published", func() error {
		st, _, err := e.master.GetStatuses(e.ctx())
		if err != nil {
			return err
		}
		if !strings.Contains(string(st["w1"]), CodeSubTaskValueMalformed) {
			return fmt.Errorf("status key holds %s", st["w1"])
		}
		views["P/status/w1"] = string(st["w1"])
		return nil
	})
	for view, body := range views {
		if !strings.Contains(body, `"t1"`) {
			t.Errorf("%s does not show t1: %s", view, body)
		}
		for _, pw := range []string{httpSourcePassword, httpTargetPassword} {
			if strings.Contains(body, pw) {
				t.Errorf("%s contains a password:\n%s", view, body)
			}
		}
	}
}

// refusingUnit is a test unit whose HandleError always refuses, like the
// sync unit when nothing is stuck.
type refusingUnit struct{ *testUnit }

func (refusingUnit) HandleError(context.Context, unit.HandleErrorRequest) error {
	return errs.New("sync-handle-error", false, "sync: no failed DDL to skip")
}

func TestHTTPHandleErrorRefusedByTheUnitIsAConflict(t *testing.T) {
	e := startServer(t)
	e.factory.wrap = func(u *testUnit) unit.Unit { return refusingUnit{u} }
	e.bind()
	e.putTask("h1", stage.Running)
	testutil.Eventually(t, 5*time.Second, "h1 running", func() error { return e.checkSubtaskStage("h1", stage.Running) })
	rec := serve(e.srv.Handler(prometheus.NewRegistry()), http.MethodPost, "/api/v1/subtasks/h1/handle-error", `{"op":"skip"}`)
	if rec.Code != http.StatusConflict {
		t.Fatalf("status %d, want 409: %s", rec.Code, rec.Body)
	}
	code, msg := apiErrorOf(t, rec)
	if code != CodeHandleErrorUnsupported || !strings.Contains(msg, "no failed DDL to skip") || !strings.Contains(msg, `"h1"`) {
		t.Errorf("error %s: %q", code, msg)
	}
}
