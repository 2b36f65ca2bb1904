//go:build bench

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// binaries are the dm-worker and dmctl programs built for a benchmark.
type binaries struct {
	worker, dmctl string
}

// goCommand is the go command of the toolchain running the benchmarks.
func goCommand(t *testing.T) string {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Fatalf("find the go command: %v", err)
		}
	}
	return goBin
}

// buildBinaries builds ./cmd/dm-worker and ./cmd/dmctl (as `make build` does, without the
// version stamp) into a temporary directory.
func buildBinaries(t *testing.T) binaries {
	t.Helper()
	dir := t.TempDir()
	modRoot, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), goCommand(t), "build", "-o", dir+string(os.PathSeparator), "./cmd/dm-worker", "./cmd/dmctl")
	cmd.Dir = modRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/dm-worker ./cmd/dmctl in %s: %v\n%s", modRoot, err, out)
	}
	return binaries{worker: filepath.Join(dir, "dm-worker"), dmctl: filepath.Join(dir, "dmctl")}
}

// dmctlCluster is what dmctl is pointed at: etcd endpoints and a key prefix.
type dmctlCluster struct {
	bin       binaries
	endpoints string
	prefix    string
}

// run runs dmctl with the cluster's global flags before args, failing the test unless it exits 0.
func (c dmctlCluster) run(t *testing.T, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	full := append([]string{"--etcd-endpoints", c.endpoints, "--etcd-prefix", c.prefix, "--timeout", "10s"}, args...)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, c.bin.dmctl, full...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("dmctl %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// waitWorkerAlive waits until `dmctl worker list` shows worker alive.
func (c dmctlCluster) waitWorkerAlive(t *testing.T, worker string) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, "dmctl worker list shows "+worker+" alive", func() error {
		var doc struct {
			Workers []struct {
				Name  string `json:"name"`
				Alive bool   `json:"alive"`
			} `json:"workers"`
		}
		out := c.run(t, "--output", "json", "worker", "list")
		if err := json.Unmarshal(out, &doc); err != nil {
			return fmt.Errorf("worker list %q: %w", out, err)
		}
		for _, w := range doc.Workers {
			if w.Name == worker && w.Alive {
				return nil
			}
		}
		return fmt.Errorf("worker list %+v", doc.Workers)
	})
}

// workerProc is a dm-worker process started by a benchmark.
type workerProc struct {
	name    string
	pid     int
	addr    string // --status-addr
	logFile string
	done    chan struct{} // closed by the goroutine that waits for the process
	// exit is written by that goroutine before it closes done.
	exit error
}

// startWorker starts dm-worker name against etcd endpoints under prefix, with its data in
// dataDir and the flags extra, waits until GET /healthz answers ok, and stops it in
// t.Cleanup. The process dies with the test binary (Pdeathsig).
func startWorker(t *testing.T, bin binaries, name, endpoints, prefix, dataDir string, extra ...string) *workerProc {
	t.Helper()
	logDir := t.TempDir()
	w := &workerProc{name: name, addr: testutil.FreeAddr(t), logFile: filepath.Join(logDir, "dm-worker.log"),
		done: make(chan struct{})}
	out, err := os.Create(filepath.Join(logDir, "dm-worker.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close() // the child holds its own copy
	args := append([]string{"--name", name, "--etcd-endpoints", endpoints, "--etcd-prefix", prefix,
		"--status-addr", w.addr, "--data-dir", dataDir, "--log-file", w.logFile}, extra...)
	started := make(chan error, 1)
	go func() {
		defer close(w.done)
		// Pdeathsig fires when the thread that started the child exits: keep this one.
		runtime.LockOSThread()
		cmd := exec.Command(bin.worker, args...)
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		w.pid = cmd.Process.Pid
		started <- nil
		w.exit = cmd.Wait()
	}()
	if err := <-started; err != nil {
		<-w.done
		t.Fatalf("start dm-worker %s: %v", name, err)
	}
	t.Cleanup(func() {
		w.stop(t)
		if t.Failed() {
			t.Logf("dm-worker %s log tail:\n%s", name, fileTail(w.logFile))
		}
	})
	testutil.Eventually(t, 30*time.Second, "dm-worker "+name+" serves /healthz", func() error {
		select {
		case <-w.done:
			t.Fatalf("dm-worker %s exited before serving /healthz: %v\n%s", name, w.exit, fileTail(out.Name()))
		default:
		}
		code, body, err := httpGet(t.Context(), w.url("/healthz"))
		if err != nil {
			return err
		}
		if code != http.StatusOK || string(body) != "ok" {
			return fmt.Errorf("GET /healthz: %d %q", code, body)
		}
		return nil
	})
	return w
}

// url is the worker's HTTP URL of path.
func (w *workerProc) url(path string) string { return "http://" + w.addr + path }

// pidString is the worker's process id for /proc.
func (w *workerProc) pidString() string { return strconv.Itoa(w.pid) }

// stop sends SIGTERM, and SIGKILL when the worker has not exited 30 s later, and waits for it.
func (w *workerProc) stop(t *testing.T) {
	t.Helper()
	select {
	case <-w.done:
		return
	default:
	}
	if err := syscall.Kill(w.pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("SIGTERM to dm-worker %s (pid %d): %v", w.name, w.pid, err)
	}
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Errorf("dm-worker %s (pid %d) did not exit within 30s of SIGTERM; killing it", w.name, w.pid)
		_ = syscall.Kill(w.pid, syscall.SIGKILL)
		<-w.done
	}
}

// boundSource is the "source" field of the worker's GET /api/v1/status: the source bound to it.
func (w *workerProc) boundSource(ctx context.Context) (string, error) {
	code, body, err := httpGet(ctx, w.url("/api/v1/status"))
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("GET /api/v1/status: %d %s", code, body)
	}
	var st struct {
		Source string `json:"source"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return "", fmt.Errorf("GET /api/v1/status: %w\n%s", err, body)
	}
	return st.Source, nil
}

// streamDoc is the part of GET /api/v1/streams/{stream} the stream benchmark reads.
type streamDoc struct {
	Stage      string `json:"stage"`
	State      string `json:"state"`
	Checkpoint string `json:"checkpoint"`
	Events     int64  `json:"events"`
	Errors     []struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"errors"`
}

// stream reads one stream object from the worker.
func (w *workerProc) stream(ctx context.Context, name string) (streamDoc, error) {
	var d streamDoc
	code, body, err := httpGet(ctx, w.url("/api/v1/streams/"+name))
	if err != nil {
		return d, err
	}
	if code != http.StatusOK {
		return d, fmt.Errorf("GET /api/v1/streams/%s: %d %s", name, code, body)
	}
	if err := json.Unmarshal(body, &d); err != nil {
		return d, fmt.Errorf("GET /api/v1/streams/%s: %w\n%s", name, err, body)
	}
	return d, nil
}

// profiler fetches back-to-back CPU profiles of a worker (GET /debug/pprof/profile) into files
// <dir>/<prefix>-<n>.cpu.pprof until stopped; `go tool pprof -top` merges several files.
type profiler struct {
	cancel context.CancelFunc
	done   chan struct{} // closed by the fetching goroutine when it returns
	// files and err are written by the fetching goroutine before it closes done.
	files []string
	err   error
}

// profileSlice is the length of one fetched profile: short enough that stopping waits little.
const profileSlice = 2

// startProfiler starts fetching profiles of w.
func startProfiler(ctx context.Context, w *workerProc, dir, prefix string) *profiler {
	ctx, cancel := context.WithCancel(ctx)
	p := &profiler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for n := 0; ctx.Err() == nil; n++ {
			// The request runs with its own deadline, not ctx: cancelling ctx mid-profile
			// would lose the profile being taken.
			reqCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), (profileSlice+10)*time.Second)
			code, body, err := httpGet(reqCtx, w.url(fmt.Sprintf("/debug/pprof/profile?seconds=%d", profileSlice)))
			stop()
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("GET /debug/pprof/profile: %d %s", code, body)
			}
			if err != nil {
				p.err = err
				return
			}
			path := filepath.Join(dir, fmt.Sprintf("%s-%d.cpu.pprof", prefix, n))
			if err := os.WriteFile(path, body, 0o644); err != nil {
				p.err = err
				return
			}
			p.files = append(p.files, path)
		}
	}()
	return p
}

// stop ends the fetching after the profile being taken and returns the files written.
func (p *profiler) stop() ([]string, error) {
	p.cancel()
	<-p.done
	return p.files, p.err
}

// httpGet sends one GET without keep-alive (no idle connection outlives it) and returns the
// status code and body.
func httpGet(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// createSource creates the benchmarks' source (relay off, the harness's source user with DM's
// grants) on inst with dmctl, bound to worker w, and waits until w reports it bound.
func (c dmctlCluster) createSource(t *testing.T, ctx context.Context, w *workerProc, dir string, inst *mariadbtest.Instance) {
	t.Helper()
	sourceFile := filepath.Join(dir, "source.yaml")
	writeText(t, sourceFile, fmt.Sprintf("source-id: %s\nflavor: mariadb\nenable-relay: false\n"+
		"from: {host: %s, port: %d, user: %s, password: %q}\n",
		benchSourceID, inst.Host(), inst.Port(), mariadbtest.SourceUser, mariadbtest.SourcePassword))
	c.run(t, "source", "create", sourceFile, "--worker", w.name)
	testutil.Eventually(t, 30*time.Second, "dm-worker binds source "+benchSourceID, func() error {
		src, err := w.boundSource(ctx)
		if err == nil && src != benchSourceID {
			err = fmt.Errorf("bound source %q", src)
		}
		return err
	})
}
