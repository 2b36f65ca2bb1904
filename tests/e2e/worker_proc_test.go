package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// workerOptions say how to start a dm-worker process.
type workerOptions struct {
	name      string
	endpoints string // --etcd-endpoints
	prefix    string // --etcd-prefix; "" = the default
	dataDir   string // "" = a new t.TempDir()
	embedEtcd bool
	// ready bounds the wait for /healthz (default 20s).
	ready time.Duration
	// args are more flags, appended after the ones above.
	args []string
}

// workerProc is a running dm-worker process.
type workerProc struct {
	*process
	t       testing.TB
	addr    string // --status-addr
	dataDir string
	logFile string // --log-file
	outFile string // stdout and stderr
}

// startWorker starts dm-worker with opts on a free status port, waits until
// /healthz answers, and kills it in t.Cleanup (printing its log tail when
// the test failed). A status port taken between the pick and the start is
// retried with another one.
func startWorker(t *testing.T, opts workerOptions) *workerProc {
	t.Helper()
	if opts.dataDir == "" {
		opts.dataDir = t.TempDir()
	}
	if opts.ready == 0 {
		opts.ready = 20 * time.Second
	}
	for attempt := 1; ; attempt++ {
		w, err := tryStartWorker(t, opts)
		if err == nil {
			return w
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("retrying on another status port: %v", err)
	}
}

func tryStartWorker(t *testing.T, opts workerOptions) (*workerProc, error) {
	t.Helper()
	logDir := t.TempDir()
	w := &workerProc{
		t:       t,
		addr:    testutil.FreeAddr(t),
		dataDir: opts.dataDir,
		logFile: filepath.Join(logDir, "dm-worker.log"),
		outFile: filepath.Join(logDir, "dm-worker.out"),
	}
	args := []string{
		"--name", opts.name,
		"--etcd-endpoints", opts.endpoints,
		"--status-addr", w.addr,
		"--data-dir", w.dataDir,
		"--keepalive-ttl", "2s",
		"--log-file", w.logFile,
	}
	if opts.prefix != "" {
		args = append(args, "--etcd-prefix", opts.prefix)
	}
	if opts.embedEtcd {
		args = append(args, "--embed-etcd")
	}
	args = append(args, opts.args...)
	p, err := startProcess("dm-worker "+opts.name, bin.worker, args, w.outFile)
	if err != nil {
		return nil, err
	}
	w.process = p
	t.Cleanup(func() {
		w.stop(t)
		if t.Failed() {
			t.Logf("dm-worker %s output:\n%s\nlog tail:\n%s", opts.name, tail(w.outFile, 20), tail(w.logFile, 40))
		}
	})
	// errExited stops the wait: the process is gone and will not serve.
	var errExited error
	err = testutil.Poll(opts.ready, func() error {
		if p.exited() {
			code, _ := p.wait(0)
			errExited = fmt.Errorf("dm-worker %s exited with %d before serving /healthz:\n%s\n%s",
				opts.name, code, tail(w.outFile, 20), tail(w.logFile, 20))
			return nil
		}
		r, err := httpDo(http.MethodGet, w.url("/healthz"), "")
		if err != nil {
			return err
		}
		if r.code != http.StatusOK || r.body != "ok" {
			return fmt.Errorf("GET /healthz: %d %q", r.code, r.body)
		}
		return nil
	})
	if errExited != nil {
		return nil, errExited
	}
	if err != nil {
		return nil, fmt.Errorf("dm-worker %s: /healthz not ok within %s: %w", opts.name, opts.ready, err)
	}
	return w, nil
}

// url is the worker's HTTP URL of path.
func (w *workerProc) url(path string) string { return "http://" + w.addr + path }

// terminate sends SIGTERM and requires exit code 0 within d.
func (w *workerProc) terminate(d time.Duration) {
	w.t.Helper()
	start := time.Now()
	w.signal(w.t, syscall.SIGTERM)
	code, err := w.wait(d)
	if err != nil {
		w.t.Fatalf("after SIGTERM: %v", err)
	}
	if code != 0 {
		w.t.Fatalf("after SIGTERM: exit code %d, want 0", code)
	}
	w.t.Logf("dm-worker stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond))
}

// status reads GET /api/v1/status.
func (w *workerProc) status() workerStatus {
	w.t.Helper()
	var st workerStatus
	r, err := httpDo(http.MethodGet, w.url("/api/v1/status"), "")
	if err != nil || r.code != http.StatusOK {
		w.t.Fatalf("GET /api/v1/status: %d %v\n%s", r.code, err, r.body)
	}
	if err := json.Unmarshal([]byte(r.body), &st); err != nil {
		w.t.Fatalf("GET /api/v1/status: %v\n%s", err, r.body)
	}
	return st
}

// waitStatus waits up to d until the worker's status satisfies cond; a
// timeout prints the last status.
func (w *workerProc) waitStatus(d time.Duration, what string, cond func(workerStatus) bool) {
	w.t.Helper()
	testutil.Eventually(w.t, d, what, func() error {
		if st := w.status(); !cond(st) {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
}

// workerStatus is the part of the status document the tests look at.
type workerStatus struct {
	Worker string `json:"worker"`
	Addr   string `json:"addr"`
	Source string `json:"source"`
	Relay  struct {
		Enabled bool `json:"enabled"`
	} `json:"relay"`
	Subtasks []statusSubtask `json:"subtasks"`
	Errors   []struct {
		Task      string `json:"task"`
		Code      string `json:"code"`
		Message   string `json:"message"`
		Resumable bool   `json:"resumable"`
	} `json:"errors"`
}

// statusSubtask is a subtask object of the worker's status.
type statusSubtask struct {
	Name   string `json:"name"`
	Stage  string `json:"stage"`
	Unit   string `json:"unit"`
	Errors []struct {
		Code      string `json:"code"`
		Resumable bool   `json:"resumable"`
	} `json:"errors"`
}

// hasSubtaskError reports whether the status lists subtask task with an
// error of code.
func (s workerStatus) hasSubtaskError(task, code string) bool {
	for _, st := range s.Subtasks {
		for _, e := range st.Errors {
			if st.Name == task && e.Code == code {
				return true
			}
		}
	}
	return false
}

// hasError reports whether the status lists an error with code for task.
func (s workerStatus) hasError(task, code string) bool {
	for _, e := range s.Errors {
		if e.Task == task && e.Code == code {
			return true
		}
	}
	return false
}

// httpResult is one HTTP exchange.
type httpResult struct {
	code   int
	header http.Header
	body   string
}

// httpDo sends one request without keep-alive (no idle connection
// outlives it).
func httpDo(method, url, body string) (httpResult, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return httpResult{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return httpResult{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return httpResult{code: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

// writeFile writes content into a new file in a temp dir and returns its
// path.
func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
