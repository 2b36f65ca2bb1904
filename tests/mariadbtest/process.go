package mariadbtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// serverProcess is one run of mariadbd.
//
// Pdeathsig makes the kernel send SIGKILL to the server when the *thread* that forked it exits,
// not when the test process exits. So the server is forked by a goroutine that locks itself to
// its OS thread and stays on it, blocked in Wait, for the whole life of the server: that thread
// ends only after the server has exited, or together with the test process, in which case the
// kernel kills the server. The goroutine never unlocks the thread, so the runtime retires the
// thread when the goroutine returns instead of handing it to other goroutines.
type serverProcess struct {
	proc *os.Process
	pid  int
	done chan struct{} // closed by the owning goroutine after Wait has returned
	// waitErr is written by the owning goroutine before it closes done; read it only after done.
	waitErr error
}

// startServerProcess starts path with args, with stdout and stderr appended to outPath, in a
// process group of its own (so a terminal's Ctrl-C reaches the test binary, which then takes
// the server down with it through Pdeathsig).
func startServerProcess(path string, args []string, outPath string) (*serverProcess, error) {
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("mariadbtest: open server output file: %w", err)
	}
	defer out.Close() // the child holds its own copy of the descriptor

	p := &serverProcess{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer close(p.done)
		runtime.LockOSThread() // deliberately never unlocked, see the type's comment
		cmd := exec.Command(path, args...)
		cmd.Stdout = out
		cmd.Stderr = out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			p.waitErr = err
			started <- err
			return
		}
		p.proc = cmd.Process
		p.pid = cmd.Process.Pid
		started <- nil
		p.waitErr = cmd.Wait()
	}()
	if err := <-started; err != nil {
		<-p.done
		return nil, fmt.Errorf("mariadbtest: start %s: %w", path, err)
	}
	return p, nil
}

// exited reports whether the process has exited and been reaped.
func (p *serverProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process; a process that has already exited is not an error.
func (p *serverProcess) signal(sig syscall.Signal) error {
	if p.exited() {
		return nil
	}
	// os.Process signals through a pidfd and knows when Wait has reaped the process, so a
	// signal racing with the exit can never reach a recycled pid.
	if err := p.proc.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("mariadbtest: send %v to mariadbd pid %d: %w", sig, p.pid, err)
	}
	return nil
}

// wait waits up to timeout for the process to exit and returns its exit error (nil for status 0).
func (p *serverProcess) wait(timeout time.Duration) (exitErr error, err error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.waitErr, nil
	case <-timer.C:
		return nil, fmt.Errorf("mariadbtest: mariadbd pid %d did not exit within %v", p.pid, timeout)
	}
}

// kill sends SIGKILL and waits for the process to be reaped.
func (p *serverProcess) kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	_, err := p.wait(killTimeout)
	return err
}

// killTimeout bounds the wait for a SIGKILLed process; only an unkillable (D state) process
// takes longer.
const killTimeout = 30 * time.Second
