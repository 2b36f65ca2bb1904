package worker

import (
	"context"
	"sync/atomic"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
)

// TestSubTaskPrecheck: a fresh subtask runs the factory's precheck before
// its first unit; a failure pauses it with the precheck's error and no unit
// processes; the next resume checks again; a subtask whose first unit has
// progress skips the precheck.
func TestSubTaskPrecheck(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int32
	var pass atomic.Bool
	check := func(_ context.Context, cfg *config.SubTaskConfig) error {
		calls.Add(1)
		if pass.Load() {
			return nil
		}
		return errs.New("precheck-failed", false, "task %s: binlog_format is STATEMENT; fix: SET GLOBAL binlog_format=ROW", cfg.Name)
	}

	_, _, u := allUnits(0)
	f := newTestFactory(false, u)
	f.Registry = f.Registry.WithPrecheck(check)
	s := NewSubTask(testConfig("incremental"), f, zaptest.NewLogger(t))
	defer s.Close()
	s.Run(ctx)
	waitStage(t, s, stage.Paused)
	st := s.Status()
	if len(st.Errors) != 1 || st.Errors[0].Code != "precheck-failed" || st.Errors[0].Resumable {
		t.Fatalf("errors %+v, want the precheck's non-resumable error", st.Errors)
	}
	if n := u.count("Process"); n != 0 {
		t.Fatalf("the unit processed %d times although the precheck failed", n)
	}

	pass.Store(true)
	if err := s.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	waitUnit(t, u, usRunning, "unit running after the precheck passed")
	if n := calls.Load(); n != 2 {
		t.Fatalf("precheck ran %d times, want 2 (start, resume)", n)
	}

	// A first unit with saved progress: no precheck.
	_, _, u2 := allUnits(0)
	u2.set(func(u *testUnit) { u.fresh = false })
	f2 := newTestFactory(false, u2)
	f2.Registry = f2.Registry.WithPrecheck(check)
	s2 := NewSubTask(testConfig("incremental"), f2, zaptest.NewLogger(t))
	defer s2.Close()
	calls.Store(0)
	s2.Run(ctx)
	waitUnit(t, u2, usRunning, "unit with progress running")
	if n := calls.Load(); n != 0 {
		t.Fatalf("precheck ran %d times for a subtask with saved progress", n)
	}
}
