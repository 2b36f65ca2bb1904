package validate

import (
	"context"
	"sync"
	"time"

	"github.com/dmworker/dm-worker/unit"
)

// The validator is a background check: it must not slow down a sync unit
// that is behind. While the sync unit catches up, the validator neither
// reads nor compares, for at most maxYield in a row; then it runs for at
// least minRun before it yields again, so its lag stays bounded under a
// sync unit that is behind for good. maxYield also stays below the
// source's net_write_timeout (60 s by default), which would cut an idle
// binlog dump.
const (
	maxYield   = 30 * time.Second
	minRun     = 10 * time.Second
	yieldCheck = 50 * time.Millisecond // how often the reader asks
	yieldSleep = 100 * time.Millisecond
)

// yielder decides when the validator gives the CPU to its sync unit. Safe
// for concurrent use.
type yielder struct {
	sync unit.SyncSource
	now  func() time.Time

	mu sync.Mutex
	// guarded by mu:
	since    time.Time // start of the current yield; zero when running
	runUntil time.Time // after a yield of maxYield, run at least until then
	checked  time.Time
	yielding bool
}

func newYielder(sync unit.SyncSource) *yielder {
	return &yielder{sync: sync, now: time.Now}
}

// update asks the sync unit (at most every yieldCheck unless force) and
// returns whether the validator yields now.
func (y *yielder) update(force bool) bool {
	y.mu.Lock()
	defer y.mu.Unlock()
	now := y.now()
	if !force && now.Sub(y.checked) < yieldCheck {
		return y.yielding
	}
	y.checked = now
	switch {
	case !y.sync.SyncBehind() || now.Before(y.runUntil):
		y.since, y.yielding = time.Time{}, false
	case y.since.IsZero():
		y.since, y.yielding = now, true
	case now.Sub(y.since) >= maxYield:
		y.since, y.yielding, y.runUntil = time.Time{}, false, now.Add(minRun)
	}
	return y.yielding
}

// active reports whether the validator yields, as last decided.
func (y *yielder) active() bool {
	y.mu.Lock()
	defer y.mu.Unlock()
	return y.yielding
}

// wait sleeps while the validator yields; it returns ctx's cause when ctx
// ends first.
func (y *yielder) wait(ctx context.Context, onYield func(bool)) error {
	if !y.update(false) {
		return nil
	}
	onYield(true)
	defer onYield(false)
	for y.update(true) {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(yieldSleep):
		}
	}
	return nil
}
