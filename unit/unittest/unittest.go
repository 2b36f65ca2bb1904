// Package unittest is test support for the units' own tests: it runs a
// unit's Process or Resume in a goroutine and waits for, or cancels, the
// run. It is imported only by _test files.
package unittest

import (
	"context"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/unit"
)

// Run is a unit's Process (or Resume) running in a goroutine.
type Run struct {
	// Cancel cancels the run's context.
	Cancel context.CancelFunc
	// Done receives the run's result once.
	Done chan unit.Result
}

// Start runs u's Process (Resume when resume) in a goroutine under a
// context cancelled by Cancel and, when timeout > 0, after timeout.
func Start(u unit.Unit, resume bool, timeout time.Duration) *Run {
	ctx, cancel := context.WithCancel(context.Background())
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), timeout)
	}
	r := &Run{Cancel: cancel, Done: make(chan unit.Result, 1)}
	go func() {
		if resume {
			r.Done <- u.Resume(ctx)
		} else {
			r.Done <- u.Process(ctx)
		}
	}()
	return r
}

// Stop cancels the run and returns its result; the test fails when the run
// does not return within 30 s of the cancel.
func (r *Run) Stop(t testing.TB) unit.Result {
	t.Helper()
	r.Cancel()
	select {
	case res := <-r.Done:
		return res
	case <-time.After(30 * time.Second):
		t.Fatal("Process did not return 30s after its context was cancelled")
		return unit.Result{}
	}
}

// Wait returns the run's result when it ends by itself within d; otherwise
// it cancels the run and fails the test.
func (r *Run) Wait(t testing.TB, d time.Duration) unit.Result {
	t.Helper()
	select {
	case res := <-r.Done:
		r.Cancel()
		return res
	case <-time.After(d):
		r.Cancel()
		<-r.Done
		t.Fatalf("Process did not end within %v", d)
		return unit.Result{}
	}
}
