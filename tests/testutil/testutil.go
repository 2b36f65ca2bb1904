// Package testutil holds what the tests of every package share: waiting
// for a condition with one poll interval (or checking that one keeps
// holding), finding a free loopback port, and reading a process's memory.
// Tests import it instead of writing their own loops, so that a timeout
// always reports the state at the deadline.
package testutil

import (
	"fmt"
	"net"
	"testing"
	"time"
)

// PollInterval is how often Eventually and WaitFor look again.
const PollInterval = 10 * time.Millisecond

// Eventually calls check until it returns nil, failing t once d has passed.
// The failure names what and the error of the last check, so it describes
// the state at the deadline, not the state when the wait began.
func Eventually(t testing.TB, d time.Duration, what string, check func() error) {
	t.Helper()
	if err := Poll(d, check); err != nil {
		t.Fatalf("not within %s: %s: %v", d, what, err)
	}
}

// WaitFor is Eventually for a condition with no state worth printing.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, d, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

var errNotYet = fmt.Errorf("condition still false")

// Consistently calls check every PollInterval for d, failing t at the
// first error: a condition that must keep holding (a paused relay that
// must not grow, subtasks that must keep running while etcd is down).
func Consistently(t testing.TB, d time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if err := check(); err != nil {
			t.Fatalf("%s: broke within %s: %v", what, d, err)
			return
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(PollInterval)
	}
}

// Poll calls check every PollInterval until it returns nil (then nil) or d
// has passed (then the last error). It is Eventually for code that must
// not fail a test itself, such as a harness returning errors.
func Poll(d time.Duration, check func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(PollInterval)
	}
}

// FreePort asks the kernel for a free TCP port on 127.0.0.1. Another
// process may take it before the caller binds it; callers that start
// servers retry with another port when binding fails.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("release probe port %d: %w", port, err)
	}
	return port, nil
}

// MustFreePort is FreePort for tests: it fails t when no port is free.
func MustFreePort(t testing.TB) int {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// FreeAddr is MustFreePort as a "127.0.0.1:port" address.
func FreeAddr(t testing.TB) string {
	return fmt.Sprintf("127.0.0.1:%d", MustFreePort(t))
}
