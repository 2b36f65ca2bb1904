// Package backoff is the one exponential backoff of the worker: watch
// relists, reconcile retries, re-registration, relay reconnects and
// auto-resume all wait through it, so they share one growth rule and one
// jitter.
//
// A delay sequence starts at Min and doubles per step up to Max. Each delay
// is spread by ±Jitter (10 %) around its step and never exceeds Max, so that
// many retries that failed together do not retry in step, while the steps
// stay at Min·2ⁿ (jitter is not compounded into the next step).
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Jitter is the relative spread of every delay around its step.
const Jitter = 0.1

// Clock is what a Backoff waits on. Tests inject one they move by hand.
type Clock interface {
	// After returns a channel that receives once d has passed, and a
	// function that releases the timer early.
	After(d time.Duration) (<-chan time.Time, func())
}

// RealClock waits on real timers.
type RealClock struct{}

// After is time.NewTimer.
func (RealClock) After(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

// Backoff is one delay sequence. It is owned by one goroutine (or guarded
// by its owner's lock) and has no lock of its own. The zero value is not
// usable: build it with New.
type Backoff struct {
	min, max time.Duration
	step     time.Duration // the next un-jittered delay; 0 before the first Next after a Reset
	clock    Clock
	rand     func() float64
}

// Option configures a Backoff.
type Option func(*Backoff)

// WithClock makes Wait wait on c.
func WithClock(c Clock) Option { return func(b *Backoff) { b.clock = c } }

// WithRand replaces the jitter's random source (values in [0, 1)); 0.5
// gives delays exactly on their steps.
func WithRand(r func() float64) Option { return func(b *Backoff) { b.rand = r } }

// New returns a sequence from lo to hi. A non-positive lo is taken as
// 1ms; hi below lo is taken as lo.
func New(lo, hi time.Duration, opts ...Option) *Backoff {
	if lo <= 0 {
		lo = time.Millisecond
	}
	b := &Backoff{min: lo, max: max(hi, lo), clock: RealClock{}, rand: rand.Float64}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Next returns the next delay and advances the sequence.
func (b *Backoff) Next() time.Duration {
	step := b.Step()
	b.step = min(2*step, b.max)
	return b.spread(step)
}

// Step is the un-jittered step the next delay is spread around.
func (b *Backoff) Step() time.Duration {
	if b.step == 0 {
		return b.min
	}
	return b.step
}

// Reset starts the sequence over at min.
func (b *Backoff) Reset() { b.step = 0 }

// Wait waits for the next delay or until ctx is done; it reports whether
// the delay passed, and returns the delay for logging.
func (b *Backoff) Wait(ctx context.Context) (time.Duration, bool) {
	d := b.Next()
	return d, Sleep(ctx, b.clock, d)
}

// spread puts d at a random point of [d·(1−Jitter), d·(1+Jitter)], capped
// at max.
func (b *Backoff) spread(d time.Duration) time.Duration {
	f := 1 + Jitter*(2*b.rand()-1)
	return min(time.Duration(float64(d)*f), b.max)
}

// Sleep waits d on c or until ctx is done; it reports whether d passed.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	ch, stop := c.After(d)
	defer stop()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}
