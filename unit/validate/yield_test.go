package validate

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/pkg/binlog"
)

// behindSync is a SyncSource whose catching-up flag the test sets.
type behindSync struct{ behind atomic.Bool }

func (s *behindSync) SyncProgress() (binlog.Location, binlog.Location, bool) {
	return binlog.Location{}, binlog.Location{}, true
}
func (s *behindSync) SyncBehind() bool { return s.behind.Load() }

// TestYielder: the validator yields while the sync unit is behind, for at
// most maxYield in a row, then runs for minRun before it yields again.
func TestYielder(t *testing.T) {
	src := &behindSync{}
	y := newYielder(src)
	now := time.Unix(1000, 0)
	y.now = func() time.Time { return now }
	step := func(d time.Duration, want bool, what string) {
		t.Helper()
		now = now.Add(d)
		if got := y.update(true); got != want || y.active() != want {
			t.Fatalf("%s: yielding %v, want %v", what, got, want)
		}
	}
	step(0, false, "sync caught up")
	src.behind.Store(true)
	step(time.Second, true, "sync behind")
	step(maxYield-time.Second, true, "just before maxYield")
	step(time.Second, false, "maxYield reached: run")
	step(minRun-time.Second, false, "still within minRun")
	step(time.Second, true, "minRun over, sync still behind")
	src.behind.Store(false)
	step(time.Millisecond, false, "sync caught up again")
	src.behind.Store(true)
	step(time.Millisecond, true, "a new yield starts at once")
	// Without force, the sync unit is asked at most every yieldCheck.
	src.behind.Store(false)
	now = now.Add(yieldCheck / 2)
	if !y.update(false) {
		t.Fatal("asked the sync unit again within yieldCheck")
	}
	now = now.Add(yieldCheck)
	if y.update(false) {
		t.Fatal("still yielding after the sync unit caught up")
	}
}
