package worker

import (
	"errors"
	"sync"
	"testing"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
)

// lifecycleAt returns a lifecycle driven to s through its own transitions.
func lifecycleAt(t *testing.T, s stage.Stage) *lifecycle {
	t.Helper()
	l := newLifecycle("thing", nil)
	steps := map[stage.Stage]func(){
		stage.New:     func() {},
		stage.Running: func() { must(t, l.start()) },
		stage.Pausing: func() { must(t, l.start()); _, err := l.pause(); must(t, err) },
		stage.Paused:  func() { must(t, l.start()); l.fail([]errs.Error{{Code: "x", Resumable: true}}) },
		stage.Resuming: func() {
			must(t, l.start())
			l.fail([]errs.Error{{Code: "x", Resumable: true}})
			_, err := l.beginResume(false)
			must(t, err)
		},
		stage.Finished: func() { must(t, l.start()); l.finish() },
		stage.Stopping: func() { l.beginStop() },
		stage.Stopped:  func() { l.beginStop(); l.stopped() },
	}
	steps[s]()
	if got := l.Stage(); got != s {
		t.Fatalf("drove lifecycle to %s, got %s", s, got)
	}
	return &l
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestLifecyclePause(t *testing.T) {
	for _, tt := range []struct {
		from     stage.Stage
		to       stage.Stage
		stop     bool
		sentinel error
	}{
		{stage.New, stage.Paused, false, nil},
		{stage.Running, stage.Pausing, true, nil},
		{stage.Resuming, stage.Pausing, true, nil},
		{stage.Pausing, stage.Pausing, true, nil},
		{stage.Paused, stage.Paused, false, nil},
		{stage.Finished, stage.Finished, false, ErrNotRunning},
		{stage.Stopping, stage.Stopping, false, ErrNotRunning},
		{stage.Stopped, stage.Stopped, false, ErrNotRunning},
	} {
		l := lifecycleAt(t, tt.from)
		stop, err := l.pause()
		if !errors.Is(err, tt.sentinel) || (err == nil) != (tt.sentinel == nil) || stop != tt.stop || l.Stage() != tt.to {
			t.Errorf("pause from %s: stop %v, err %v, stage %s; want stop %v, err %v, stage %s",
				tt.from, stop, err, l.Stage(), tt.stop, tt.sentinel, tt.to)
		}
		if err == nil && !l.ExplicitlyPaused() {
			t.Errorf("pause from %s did not mark the pause explicit", tt.from)
		}
	}
}

func TestLifecycleResume(t *testing.T) {
	failed := func(resumable bool) *lifecycle {
		l := lifecycleAt(t, stage.Running)
		l.fail([]errs.Error{{Code: "e", Resumable: resumable}})
		return l
	}
	explicit := lifecycleAt(t, stage.Running)
	if _, err := explicit.pause(); err != nil {
		t.Fatal(err)
	}
	explicit.settle()
	for _, tt := range []struct {
		name     string
		l        *lifecycle
		auto     bool
		sentinel error
	}{
		{"resumable error, auto", failed(true), true, nil},
		{"non-resumable error, auto", failed(false), true, ErrNotAutoResumable},
		{"non-resumable error, operator", failed(false), false, nil},
		{"explicit pause, auto", explicit, true, ErrNotAutoResumable},
		{"running", lifecycleAt(t, stage.Running), false, ErrNotPaused},
		{"new", lifecycleAt(t, stage.New), true, ErrNotPaused},
	} {
		before := tt.l.Stage()
		prev, err := tt.l.beginResume(tt.auto)
		if tt.sentinel != nil {
			if !errors.Is(err, tt.sentinel) || tt.l.Stage() != before {
				t.Errorf("%s: err %v, stage %s → %s; want %v and no move", tt.name, err, before, tt.l.Stage(), tt.sentinel)
			}
			continue
		}
		if err != nil || tt.l.Stage() != stage.Resuming || tt.l.Result() != nil || tt.l.ExplicitlyPaused() {
			t.Errorf("%s: err %v, stage %s, result %v, explicit %v; want Resuming with errors and mark cleared",
				tt.name, err, tt.l.Stage(), tt.l.Result(), tt.l.ExplicitlyPaused())
		}
		if !prev.Failed() {
			t.Errorf("%s: the cleared errors were not returned for the log", tt.name)
		}
		if !tt.l.running() || tt.l.Stage() != stage.Running {
			t.Errorf("%s: running() after resume left %s", tt.name, tt.l.Stage())
		}
	}
}

func TestLifecycleFailKeepsStopping(t *testing.T) {
	for _, tt := range []struct{ from, to stage.Stage }{
		{stage.Running, stage.Paused},
		{stage.Resuming, stage.Paused},
		{stage.Pausing, stage.Paused},
		{stage.Stopping, stage.Stopping},
	} {
		l := lifecycleAt(t, tt.from)
		from, to := l.fail([]errs.Error{{Code: "e"}})
		if from != tt.from || to != tt.to || l.Stage() != tt.to || !l.Result().Failed() {
			t.Errorf("fail from %s: reported %s → %s, stage %s, result %v; want → %s with the error kept",
				tt.from, from, to, l.Stage(), l.Result(), tt.to)
		}
	}
}

func TestLifecycleStopAndFinish(t *testing.T) {
	l := lifecycleAt(t, stage.Running)
	if !l.beginStop() || l.Stage() != stage.Stopping || !l.stopping() {
		t.Fatalf("beginStop from Running: stage %s", l.Stage())
	}
	if l.finish() || l.Stage() != stage.Stopping {
		t.Fatalf("finish moved a stopping lifecycle to %s", l.Stage())
	}
	l.settle()
	if l.Stage() != stage.Stopping {
		t.Fatalf("settle moved a stopping lifecycle to %s", l.Stage())
	}
	l.stopped()
	if l.beginStop() {
		t.Fatal("beginStop of a stopped lifecycle reported work to stop")
	}
	if err := l.start(); !errors.Is(err, ErrNotNew) {
		t.Fatalf("start of a stopped lifecycle: %v, want ErrNotNew", err)
	}

	h := lifecycleAt(t, stage.Running)
	if !h.handOver() {
		t.Fatal("handOver of a running lifecycle stopped the work")
	}
	if _, err := h.pause(); err != nil {
		t.Fatal(err)
	}
	if h.handOver() || h.Stage() != stage.Paused {
		t.Fatalf("handOver while pausing: stage %s, want Paused and the work stopped", h.Stage())
	}
}

// TestLifecycleOneWinner races an operator's resume against the checker's:
// the compare-and-swap lets exactly one move Paused to Resuming.
func TestLifecycleOneWinner(t *testing.T) {
	for range 200 {
		l := lifecycleAt(t, stage.Paused)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			wins int
		)
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := l.beginResume(i%2 == 0); err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("%d resumes won, want exactly 1", wins)
		}
	}
}
