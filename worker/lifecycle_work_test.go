package worker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/pkg/supervise"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// stuckWork is work that ignores its context until released, as a relay
// pull still writing when its stop gives up waiting; it counts how many
// runs are inside at once.
type stuckWork struct {
	release chan struct{}

	mu             sync.Mutex // guards the fields below
	inside, most   int
	starts, exited int
}

func (s *stuckWork) run(context.Context) {
	s.mu.Lock()
	s.starts++
	s.inside++
	s.most = max(s.most, s.inside)
	s.mu.Unlock()
	<-s.release
	s.mu.Lock()
	s.inside--
	s.exited++
	s.mu.Unlock()
}

func (s *stuckWork) counts() (starts, inside, most int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts, s.inside, s.most
}

// returned reports whether done was closed within d.
func returned(done <-chan struct{}, d time.Duration) bool {
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// A stop whose context ends while the work still runs keeps waiting for
// it afterwards: a start with a short context refuses, a start with a
// longer one waits for the old goroutine to exit before it starts the new
// one, and Close waits too before it releases what the work uses. It used
// to drop done on the timeout, so a resume started a second pull and
// Close released the relay under the first.
func TestBGWorkStopAfterTimeout(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := &stuckWork{release: make(chan struct{})}
	w := supervise.NewWork(nil)
	if err := w.Start(t.Context(), s.run); err != nil {
		t.Fatal(err)
	}
	startsAre := func(want int) {
		t.Helper()
		testutil.WaitFor(t, 10*time.Second, "work to start", func() bool {
			starts, _, _ := s.counts()
			return starts == want
		})
	}
	startsAre(1)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := w.Stop(ctx, "test work"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop of stuck work: %v, want the deadline", err)
	}
	// Later stops still wait for it.
	ctx2, cancel2 := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel2()
	if err := w.Stop(ctx2, "test work"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second stop of stuck work: %v, want the deadline", err)
	}
	ctx3, cancel3 := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel3()
	if err := w.Start(ctx3, s.run); !errors.Is(err, supervise.ErrRunning) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("start while the old work runs: %v, want %v", err, supervise.ErrRunning)
	}

	started := make(chan struct{})
	go func() {
		defer close(started)
		if err := w.Start(t.Context(), s.run); err != nil {
			t.Error(err)
		}
	}()
	if returned(started, 50*time.Millisecond) {
		t.Fatal("start returned while the old work still runs")
	}
	if starts, _, _ := s.counts(); starts != 1 {
		t.Fatalf("%d runs started while the first still runs", starts)
	}
	s.release <- struct{}{} // the first run exits
	if !returned(started, 10*time.Second) {
		t.Fatal("start still waits after the old work exited")
	}
	startsAre(2)

	// Close (stopWork) with the second run stuck: it waits for it before
	// release, however long it takes.
	l := newLifecycle("test work", nil)
	l.stage = stage.Running
	var releasedInside int
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		l.stopWork(w, func() { _, releasedInside, _ = s.counts() })
	}()
	if returned(closed, 50*time.Millisecond) {
		t.Fatal("close returned while the work still runs")
	}
	close(s.release)
	if !returned(closed, 10*time.Second) {
		t.Fatal("close still waits after the work exited")
	}
	if _, _, most := s.counts(); most != 1 || releasedInside != 0 {
		t.Fatalf("%d runs at once, %d still inside at release; want 1 and 0", most, releasedInside)
	}
	if l.Stage() != stage.Stopped {
		t.Fatalf("stage %s after close", l.Stage())
	}
}

// A pause whose wait times out leaves the holder Paused with its old run
// still counted: a resume refuses until it exits, then starts one run.
func TestBGWorkResumeAfterTimedOutPause(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := &stuckWork{release: make(chan struct{})}
	w := supervise.NewWork(nil)
	var l lifecycle
	run := func(ctx context.Context) {
		l.runWork(ctx, w, RealClock{}, func(ctx context.Context) error { s.run(ctx); return nil }, func(error) {})
	}
	l = newLifecycle("test work", func(ctx context.Context, auto bool) error { return l.restartWork(ctx, auto, w, run) })
	if err := l.start(); err != nil {
		t.Fatal(err)
	}
	run(t.Context())

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := l.pauseWork(ctx, w); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("pause of stuck work: %v, want the deadline", err)
	}
	if l.Stage() != stage.Paused {
		t.Fatalf("stage %s after the pause", l.Stage())
	}
	ctx2, cancel2 := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel2()
	if err := l.Resume(ctx2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("resume while the old run is inside: %v, want the deadline", err)
	}
	if l.Stage() != stage.Paused {
		t.Fatalf("stage %s after the refused resume", l.Stage())
	}
	close(s.release)
	if err := l.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	l.stopWork(w, nil)
	if starts, _, most := s.counts(); starts != 2 || most != 1 {
		t.Fatalf("%d runs, %d at once; want 2 and 1", starts, most)
	}
}

// Work started on a supervise.Work with a life ends when that life does, whoever
// started it and with what context.
func TestBGWorkEndsWithItsLife(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	life, end := context.WithCancel(context.Background())
	w := supervise.NewWork(life)
	exited := make(chan struct{})
	if err := w.Start(context.Background(), func(ctx context.Context) {
		defer close(exited)
		<-ctx.Done()
	}); err != nil {
		t.Fatal(err)
	}
	if returned(exited, 20*time.Millisecond) {
		t.Fatal("work ended before its life")
	}
	end()
	if !returned(exited, 10*time.Second) {
		t.Fatal("work still runs after its life ended")
	}
	if err := w.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
}
