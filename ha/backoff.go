package ha

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff is an exponential backoff with jitter. It is owned by one
// goroutine and has no lock.
type backoff struct {
	min, max time.Duration
	cur      time.Duration // 0 until the first next() after a reset
}

// next returns the next delay: the current step doubled (from min, capped
// at max), with a random value in [step/2, step].
func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	half := b.cur / 2
	return half + rand.N(b.cur-half+1)
}

// reset starts over from min.
func (b *backoff) reset() { b.cur = 0 }

// sleepCtx waits d or until ctx is done; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
