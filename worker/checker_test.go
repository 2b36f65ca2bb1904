package worker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/pkg/backoff"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
)

// fakeClock is a Clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	// guarded by mu:
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fakeItem is a Resumable whose stage and errors the test sets, on the
// lifecycle subtasks and the relay use. AutoResume records the call and,
// when failAgain is set, fails again at once. It counts as the relay in
// metrics.
type fakeItem struct {
	lifecycle
	name string

	mu sync.Mutex
	// guarded by mu:
	failAgain bool
	resumes   []time.Time
}

func newPausedItem(name string, resumable ...bool) *fakeItem {
	it := &fakeItem{name: name}
	it.lifecycle = newLifecycle("fake "+name, it.resume)
	if err := it.start(); err != nil {
		panic(err)
	}
	it.fail(resumable...)
	return it
}

// fail fails the run with one error per element of resumable, each
// resumable or not.
func (it *fakeItem) fail(resumable ...bool) {
	var entries []errs.Error
	for i, res := range resumable {
		entries = append(entries, errs.Error{Code: []string{"first", "second"}[i%2], Resumable: res, Time: time.Now()})
	}
	it.lifecycle.fail(entries)
}

// pauseExplicitly marks an explicit pause, as the master's Paused does.
func (it *fakeItem) pauseExplicitly() *fakeItem {
	if _, err := it.pause(); err != nil {
		panic(err)
	}
	return it
}

func (it *fakeItem) Name() string { return it.name }

func (it *fakeItem) Kind() string { return "relay" }

// resume is the fake's part of Resume and AutoResume.
func (it *fakeItem) resume(_ context.Context, auto bool) error {
	if _, err := it.beginResume(auto); err != nil {
		return err
	}
	it.running()
	it.mu.Lock()
	defer it.mu.Unlock()
	it.resumes = append(it.resumes, time.Now())
	if it.failAgain {
		it.fail(true)
	}
	return nil
}

func (it *fakeItem) Resumes() []time.Time {
	it.mu.Lock()
	defer it.mu.Unlock()
	return append([]time.Time(nil), it.resumes...)
}

// checkResumes is nil when the item has been auto-resumed exactly want times.
func (it *fakeItem) checkResumes(want int) error {
	if n := len(it.Resumes()); n != want {
		return fmt.Errorf("%d auto-resumes, want %d", n, want)
	}
	return nil
}

// itemList is the checker's list of items, counting how often it is read
// (once per check).
type itemList struct {
	mu sync.Mutex
	// guarded by mu:
	items []Resumable
	reads int
}

func (l *itemList) list() []Resumable {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	return append([]Resumable(nil), l.items...)
}

func (l *itemList) set(items ...Resumable) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = items
}

// waitChecks waits until the checker has started two more checks, so at
// least one of them ran entirely after the caller's last change.
func (l *itemList) waitChecks(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	from := l.reads
	l.mu.Unlock()
	testutil.Eventually(t, unitWait, "two checks", func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.reads < from+2 {
			return fmt.Errorf("%d checks since the wait began", l.reads-from)
		}
		return nil
	})
}

// startChecker runs a checker until the test ends.
func startChecker(t *testing.T, cfg CheckerConfig, l *itemList, clock Clock, m *Metrics) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := NewChecker(cfg, l.list, clock, m, zaptest.NewLogger(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func TestCheckerBackoffGrows(t *testing.T) {
	it := newPausedItem("task1", true)
	it.failAgain = true
	pausedAt := time.Now()
	l := &itemList{items: []Resumable{it}}
	m := NewMetrics()
	startChecker(t, CheckerConfig{Enable: true, Interval: time.Millisecond, BackoffMin: 20 * time.Millisecond,
		BackoffMax: 160 * time.Millisecond, QuietWindow: time.Minute}, l, RealClock{}, m)

	testutil.Eventually(t, unitWait, "six auto-resumes", func() error {
		if n := len(it.Resumes()); n < 6 {
			return fmt.Errorf("%d auto-resumes", n)
		}
		return nil
	})
	rs := it.Resumes()
	// Expected delays: 20, 40, 80, 160 (capped), 160, 160 ms, with ±10 %
	// jitter after the first and never above the cap. Wall-clock delays on
	// a loaded machine can only be checked from below (never resumed early)
	// and roughly from above; TestCheckerBackoffSequence checks them exactly
	// on a fake clock.
	want := []time.Duration{20, 40, 80, 160, 160, 160}
	prev := pausedAt
	for i, r := range rs[:6] {
		gap := r.Sub(prev)
		lo := want[i] * time.Millisecond
		if i > 0 {
			lo = lo * 9 / 10
		}
		if hi := lo + time.Second; gap < lo || gap > hi {
			t.Errorf("delay before auto-resume %d = %v, want within [%v, %v]", i+1, gap, lo, hi)
		}
		prev = r
	}
	var pm dto.Metric
	if err := m.AutoResumes.WithLabelValues("relay").Write(&pm); err != nil {
		t.Fatal(err)
	}
	if got := pm.GetCounter().GetValue(); got < 6 {
		t.Fatalf("auto-resume metric %v, want >= 6", got)
	}
}

func TestCheckerNeverResumes(t *testing.T) {
	tests := []struct {
		name string
		item *fakeItem
	}{
		{"non-resumable", newPausedItem("t", false)},
		{"one of two non-resumable", newPausedItem("t", true, false)},
		{"explicitly paused", newPausedItem("t", true).pauseExplicitly()},
		{"paused without error", newPausedItem("t")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1_000_000, 0)}
			l := &itemList{items: []Resumable{tt.item}}
			startChecker(t, CheckerConfig{Enable: true, Interval: time.Millisecond, BackoffMin: 20 * time.Millisecond,
				BackoffMax: 160 * time.Millisecond}, l, clock, nil)
			for range 5 {
				l.waitChecks(t)
				clock.Advance(time.Hour)
			}
			l.waitChecks(t)
			if n := len(tt.item.Resumes()); n != 0 {
				t.Fatalf("auto-resumed %d times", n)
			}
		})
	}
}

func TestCheckerDisabled(t *testing.T) {
	it := newPausedItem("t", true)
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	l := &itemList{items: []Resumable{it}}
	startChecker(t, CheckerConfig{Enable: false, Interval: time.Millisecond}, l, clock, nil)
	clock.Advance(time.Hour)
	// A disabled checker never reads the list; give it time to misbehave.
	time.Sleep(20 * time.Millisecond)
	l.mu.Lock()
	reads := l.reads
	l.mu.Unlock()
	if reads != 0 || len(it.Resumes()) != 0 {
		t.Fatalf("disabled checker read the list %d times and resumed %d times", reads, len(it.Resumes()))
	}
}

// expectResumeAfter expects the auto-resume after the delay d spread by
// the backoff's jitter: not before d·(1−Jitter), by d·(1+Jitter).
func expectResumeAfter(t *testing.T, l *itemList, clock *fakeClock, it *fakeItem, d time.Duration) {
	t.Helper()
	expectResumeBetween(t, l, clock, it, time.Duration(float64(d)*(1-backoff.Jitter)), time.Duration(float64(d)*(1+backoff.Jitter)))
}

// expectResumeBetween advances the fake clock by just under lo (no resume),
// then to hi (resume).
func expectResumeBetween(t *testing.T, l *itemList, clock *fakeClock, it *fakeItem, lo, hi time.Duration) {
	t.Helper()
	n := len(it.Resumes())
	l.waitChecks(t) // the pause has been seen at the current time
	clock.Advance(lo - time.Millisecond)
	l.waitChecks(t)
	if got := len(it.Resumes()); got != n {
		t.Fatalf("resumed after %v, before the backoff of at least %v", lo-time.Millisecond, lo)
	}
	clock.Advance(hi - lo + time.Millisecond)
	testutil.Eventually(t, unitWait, "auto-resume", func() error { return it.checkResumes(n + 1) })
}

func TestCheckerBackoffSequence(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	it := newPausedItem("task1", true)
	l := &itemList{items: []Resumable{it}}
	startChecker(t, CheckerConfig{Enable: true, Interval: time.Millisecond, BackoffMin: 100 * time.Millisecond,
		BackoffMax: 800 * time.Millisecond, QuietWindow: time.Hour}, l, clock, nil)

	// 100 ms, then doubling, each with ±10 % jitter, capped at 800 ms.
	for _, base := range []time.Duration{100, 200, 400, 800, 800, 800} {
		lo, hi := base*time.Millisecond*9/10, min(base*time.Millisecond*11/10, 800*time.Millisecond)
		expectResumeBetween(t, l, clock, it, lo, hi)
		it.fail(true) // the auto-resume is followed by another error
	}
}

func TestCheckerBackoffResetsAfterQuietWindow(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	it := newPausedItem("task1", true)
	l := &itemList{items: []Resumable{it}}
	startChecker(t, CheckerConfig{Enable: true, Interval: time.Millisecond, BackoffMin: 100 * time.Millisecond,
		BackoffMax: time.Second, QuietWindow: 10 * time.Second}, l, clock, nil)

	expectResumeAfter(t, l, clock, it, 100*time.Millisecond)
	it.fail(true) // failed again after the auto-resume: 200 ms ± 10 %
	l.waitChecks(t)
	clock.Advance(179 * time.Millisecond)
	l.waitChecks(t)
	if len(it.Resumes()) != 1 {
		t.Fatal("second auto-resume before the doubled backoff")
	}
	clock.Advance(41 * time.Millisecond)
	testutil.Eventually(t, unitWait, "second auto-resume", func() error { return it.checkResumes(2) })

	// Running for the quiet window resets the backoff.
	l.waitChecks(t)
	clock.Advance(10 * time.Second)
	l.waitChecks(t)
	it.fail(true)
	expectResumeAfter(t, l, clock, it, 100*time.Millisecond)
}

func TestCheckerForgetsVanishedItems(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	it := newPausedItem("task1", true)
	l := &itemList{items: []Resumable{it}}
	startChecker(t, CheckerConfig{Enable: true, Interval: time.Millisecond, BackoffMin: 100 * time.Millisecond,
		BackoffMax: time.Second, QuietWindow: time.Hour}, l, clock, nil)

	expectResumeAfter(t, l, clock, it, 100*time.Millisecond)
	l.set()
	l.waitChecks(t)
	// The same name again is a new item: its first delay is BackoffMin, not
	// the doubled one.
	it.fail(true)
	l.set(it)
	expectResumeAfter(t, l, clock, it, 100*time.Millisecond)
}

func TestCheckerResumesSubTask(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		explicit   bool
		wantResume bool
	}{
		{"resumable", errs.New("sync-exec", true, "deadlock"), false, true},
		{"not resumable", errs.New("sync-ddl", false, "unsupported DDL"), false, false},
		{"explicitly paused", errs.New("sync-exec", true, "deadlock"), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newTestUnit(unit.TypeSync, 0)
			s := NewSubTask(testConfig("incremental"), newTestFactory(false, u), zaptest.NewLogger(t))
			defer s.Close()
			s.Run(context.Background())
			waitUnit(t, u, usRunning, "unit running")
			u.send(t, tt.err)
			waitStage(t, s, stage.Paused)
			if tt.explicit {
				if err := s.Pause(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			clock := &fakeClock{now: time.Unix(1_000_000, 0)}
			l := &itemList{items: []Resumable{s}}
			m := NewMetrics()
			startChecker(t, CheckerConfig{Enable: true, Interval: time.Millisecond, BackoffMin: time.Second}, l, clock, m)
			l.waitChecks(t)
			clock.Advance(time.Duration(float64(time.Second) * (1 + backoff.Jitter)))
			if tt.wantResume {
				waitUnit(t, u, usRunning, "unit resumed")
				if u.count("Resume") != 1 || s.Stage() != stage.Running {
					t.Fatalf("calls %v stage %s", u.Calls(), s.Stage())
				}
				var pm dto.Metric
				if err := m.AutoResumes.WithLabelValues("subtask").Write(&pm); err != nil {
					t.Fatal(err)
				}
				if pm.GetCounter().GetValue() != 1 {
					t.Fatalf("subtask auto-resumes metric %v, want 1", pm.GetCounter().GetValue())
				}
				return
			}
			l.waitChecks(t)
			if s.Stage() != stage.Paused || u.count("Resume") != 0 {
				t.Fatalf("stage %s calls %v: resumed", s.Stage(), u.Calls())
			}
		})
	}
}
