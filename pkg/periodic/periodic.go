// Package periodic is the one "every interval until cancelled" loop of the
// worker: status publishing, gauges, the auto-resume checker, the relay's
// purger and master-status refresh all run through it.
package periodic

import (
	"context"
	"time"
)

// When says whether f runs once at the start or only after the first
// interval.
type When bool

const (
	// Now runs f at once, then every interval.
	Now When = true
	// AfterInterval runs f first after one interval.
	AfterInterval When = false
)

// Run calls f every interval until ctx is done, starting as when says. A
// call that takes longer than the interval delays the next one rather than
// overlapping it. Run returns when ctx is done; f is never called after.
func Run(ctx context.Context, interval time.Duration, when When, f func(ctx context.Context)) {
	if when == Now && ctx.Err() == nil {
		f(ctx)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil {
			return
		}
		f(ctx)
	}
}
