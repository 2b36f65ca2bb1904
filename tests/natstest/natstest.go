// Package natstest runs a real `nats-server -js` for tests: one process on
// a free loopback port, its JetStream store under t.TempDir(), stopped by
// the test's Cleanup. Stop, Kill and Restart (same port, same store) let a
// test take the server away and bring it back.
//
// When nats-server is not installed the test is skipped, or fails when
// CI=true (a skip there would hide that nothing was tested); `make deps`
// (scripts/install-deps.sh) installs it.
package natstest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// readyTimeout bounds the wait for a started server to accept clients.
const readyTimeout = 15 * time.Second

// Server is one nats-server with JetStream.
type Server struct {
	tb   testing.TB
	bin  string
	port int
	dir  string // JetStream store (-sd) and the server's output file

	mu sync.Mutex
	// proc is the running process, nil while stopped; guarded by mu.
	proc *process
}

// Start starts nats-server -js on a free 127.0.0.1 port and registers its
// stop with tb.Cleanup.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := findServer()
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("natstest: %v, but CI=true, so this test must not be skipped; install it with `make deps` (scripts/install-deps.sh)", err)
		}
		tb.Skipf("natstest: skipping: %v (run `make deps` to install it)", err)
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir()}
	tb.Cleanup(s.Stop)
	var errs []error
	// Another process may take the free port before the server binds it.
	for range 5 {
		s.port = testutil.MustFreePort(tb)
		if err := s.start(); err != nil {
			errs = append(errs, err)
			continue
		}
		return s
	}
	tb.Fatalf("natstest: nats-server did not start: %v", errors.Join(errs...))
	return nil
}

// findServer looks nats-server up in $PATH, then in /usr/sbin and /usr/bin
// (Debian installs it in /usr/sbin, absent from many users' $PATH).
func findServer() (string, error) {
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
		p := filepath.Join(dir, "nats-server")
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("nats-server is not installed (searched $PATH, /usr/sbin, /usr/bin)")
}

// URL is the client URL, nats://127.0.0.1:<port>; it stays the same across
// Restart.
func (s *Server) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

// Dir is the server's JetStream store directory.
func (s *Server) Dir() string { return s.dir }

// Stop shuts the server down (SIGTERM, SIGKILL after 10 s) and waits for
// it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() { s.halt(syscall.SIGTERM) }

// Kill SIGKILLs the server (a crash) and waits for it to exit.
func (s *Server) Kill() { s.halt(syscall.SIGKILL) }

func (s *Server) halt(sig syscall.Signal) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	if err := s.proc.stop(sig, 10*time.Second); err != nil {
		s.tb.Errorf("natstest: %v", err)
	}
	s.proc = nil
}

// Restart starts the server again on the same port with the same store,
// after stopping it if it runs. The port may take a moment to be free
// again; Restart retries until readyTimeout.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	if err := testutil.Poll(readyTimeout, s.start); err != nil {
		s.tb.Fatalf("natstest: restart on port %d: %v", s.port, err)
	}
}

// start runs the server and waits until it accepts clients.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	outPath := filepath.Join(s.dir, "nats-server.out")
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", outPath, err)
	}
	defer out.Close() // the child holds its own descriptor
	args := []string{"-js", "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-sd", filepath.Join(s.dir, "store"), "-n", "natstest"}
	p, err := startProcess(s.bin, args, out)
	if err != nil {
		return err
	}
	if err := p.waitReady(s.port, readyTimeout); err != nil {
		_ = p.stop(syscall.SIGKILL, 10*time.Second) // the start failed already; its error says why
		return fmt.Errorf("%w; server output (%s):\n%s", err, outPath, tail(outPath, 20))
	}
	s.proc = p
	return nil
}

// process is one run of nats-server. Its owning goroutine forks it from an
// OS thread locked for the server's whole life, so that Pdeathsig (which
// follows the forking thread) kills the server only when the test process
// dies, never earlier.
type process struct {
	proc *os.Process
	done chan struct{} // closed by the owning goroutine once Wait returned
	err  error         // Wait's result; read only after done
}

func startProcess(bin string, args []string, out *os.File) (*process, error) {
	p := &process{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer close(p.done)
		runtime.LockOSThread() // never unlocked: the thread retires with this goroutine
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if p.err = cmd.Start(); p.err != nil {
			started <- p.err
			return
		}
		p.proc = cmd.Process
		started <- nil
		p.err = cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	return p, nil
}

// waitReady waits until the server on port greets a client with INFO.
func (p *process) waitReady(port int, d time.Duration) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return testutil.Poll(d, func() error {
		select {
		case <-p.done:
			return fmt.Errorf("nats-server exited: %v", p.err)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return fmt.Errorf("read the greeting of %s: %w", addr, err)
		}
		if !strings.HasPrefix(line, "INFO ") {
			return fmt.Errorf("%s greeted with %q, not INFO: another program holds the port", addr, line)
		}
		return nil
	})
}

// stop sends sig, then SIGKILL once d has passed, and waits for the exit.
func (p *process) stop(sig syscall.Signal, d time.Duration) error {
	if err := p.proc.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal nats-server pid %d: %w", p.proc.Pid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(d):
	}
	if err := p.proc.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill nats-server pid %d: %w", p.proc.Pid, err)
	}
	<-p.done
	return nil
}

// tail returns the last n lines of a file, for failure messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
