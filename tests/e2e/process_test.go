package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// process is one run of a binary under test.
//
// Pdeathsig makes the kernel SIGKILL the child when the *thread* that
// forked it exits, so the child is forked by a goroutine locked to its OS
// thread that stays there, blocked in Wait, for the child's whole life (as
// tests/mariadbtest does): if the test binary dies, so does the child.
type process struct {
	name string
	pid  int
	proc *os.Process
	done chan struct{} // closed by the owning goroutine after Wait returned
	// state is written by the owning goroutine before it closes done.
	state *os.ProcessState
}

// startProcess starts path with args in a process group of its own, stdout
// and stderr appended to outPath.
func startProcess(name, path string, args []string, outPath string) (*process, error) {
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open output file of %s: %w", name, err)
	}
	defer out.Close() // the child holds its own copy

	p := &process{name: name, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer close(p.done)
		runtime.LockOSThread() // never unlocked: the thread must live as long as the child
		cmd := exec.Command(path, args...)
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.proc, p.pid = cmd.Process, cmd.Process.Pid
		started <- nil
		_ = cmd.Wait() // the exit status is in ProcessState
		p.state = cmd.ProcessState
	}()
	if err := <-started; err != nil {
		<-p.done
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// exited reports whether the process has exited and been reaped.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig unless the process has already exited.
func (p *process) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if p.exited() {
		return
	}
	if err := p.proc.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("send %v to %s (pid %d): %v", sig, p.name, p.pid, err)
	}
}

// wait waits up to d for the process to exit and returns its exit code
// (-1 when a signal killed it).
func (p *process) wait(d time.Duration) (int, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-p.done:
		if p.state == nil {
			return -1, fmt.Errorf("%s (pid %d): no exit status", p.name, p.pid)
		}
		return p.state.ExitCode(), nil
	case <-timer.C:
		return 0, fmt.Errorf("%s (pid %d) did not exit within %s", p.name, p.pid, d)
	}
}

// stop kills the process if it still runs, waits for it, and checks that
// its process group is empty.
func (p *process) stop(t testing.TB) {
	t.Helper()
	p.signal(t, syscall.SIGKILL)
	if _, err := p.wait(30 * time.Second); err != nil {
		t.Error(err)
		return
	}
	// Setpgid made the child the leader of group pid; after the reap the
	// group must have no member left.
	if err := syscall.Kill(-p.pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d of %s still has processes (kill -0: %v)", p.pid, p.name, err)
	}
}

// tail returns the last n lines of the file at path, for failure messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freeze stops the process with SIGSTOP and waits until every thread of
// it is stopped, so that what it wrote can be read while it writes no
// more.
func (p *process) freeze(t testing.TB) {
	t.Helper()
	p.signal(t, syscall.SIGSTOP)
	deadline := time.Now().Add(10 * time.Second)
	for {
		running, err := p.runningThreads()
		if err != nil {
			t.Fatalf("freeze %s (pid %d): %v", p.name, p.pid, err)
		}
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			out, _ := exec.Command("sh", "-c", fmt.Sprintf("cat /proc/%d/task/*/stat", p.pid)).Output()
			t.Fatalf("%s (pid %d): %d threads still run 10s after SIGSTOP; their stat lines:\n%s", p.name, p.pid, running, out)
		}
		time.Sleep(time.Millisecond)
	}
}

// thaw lets a frozen process run again.
func (p *process) thaw(t testing.TB) {
	t.Helper()
	p.signal(t, syscall.SIGCONT)
}

// runningThreads counts the threads of the process that may still run user
// code (state R or S in /proc/PID/task/TID/stat).
func (p *process) runningThreads() (int, error) {
	dir := fmt.Sprintf("/proc/%d/task", p.pid)
	tids, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	running := 0
	for _, tid := range tids {
		b, err := os.ReadFile(dir + "/" + tid.Name() + "/stat")
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread exited
		}
		if err != nil {
			return 0, err
		}
		// "pid (comm) S ...": comm may hold spaces and parentheses, the
		// state follows the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			return 0, fmt.Errorf("%s/%s/stat: unexpected %q", dir, tid.Name(), s)
		}
		// R and S run user code, or will; T/t stopped, Z/X gone, D in an
		// uninterruptible syscall (a write or fsync under load: it stops
		// on its way back to user code, running none of it).
		if st := s[i+2]; st == 'R' || st == 'S' {
			running++
		}
	}
	return running, nil
}
