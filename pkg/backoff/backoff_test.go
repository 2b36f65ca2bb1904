package backoff

import (
	"context"
	"testing"
	"time"
)

func TestSequenceDoublesWithinJitterAndCaps(t *testing.T) {
	b := New(100*time.Millisecond, time.Second)
	for i, step := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		step *= time.Millisecond
		if got := b.Step(); got != step {
			t.Fatalf("attempt %d: step %s, want %s", i, got, step)
		}
		d := b.Next()
		lo, hi := time.Duration(float64(step)*(1-Jitter)), min(time.Duration(float64(step)*(1+Jitter)), time.Second)
		if d < lo || d > hi {
			t.Fatalf("attempt %d: delay %s outside [%s, %s]", i, d, lo, hi)
		}
	}
	b.Reset()
	if got := b.Step(); got != 100*time.Millisecond {
		t.Fatalf("after Reset: step %s, want 100ms", got)
	}
}

func TestJitterBounds(t *testing.T) {
	for _, r := range []float64{0, 0.5, 0.999999} {
		b := New(time.Second, time.Hour, WithRand(func() float64 { return r }))
		d := b.Next()
		want := time.Duration(float64(time.Second) * (1 + Jitter*(2*r-1)))
		if d != want {
			t.Fatalf("rand %v: delay %s, want %s", r, d, want)
		}
	}
	// Never above max, even when the spread would be.
	b := New(time.Second, time.Second, WithRand(func() float64 { return 0.999 }))
	if d := b.Next(); d != time.Second {
		t.Fatalf("delay %s above max 1s", d)
	}
}

func TestNewNormalisesBounds(t *testing.T) {
	b := New(0, -1, WithRand(func() float64 { return 0.5 }))
	if d := b.Next(); d != time.Millisecond {
		t.Fatalf("delay %s, want the 1ms floor", d)
	}
}

// manualClock fires After channels only when the test says so.
type manualClock struct{ fire chan time.Time }

func (c manualClock) After(time.Duration) (<-chan time.Time, func()) { return c.fire, func() {} }

func TestWaitUsesInjectedClockAndCtx(t *testing.T) {
	c := manualClock{fire: make(chan time.Time, 1)}
	b := New(time.Hour, time.Hour, WithClock(c))
	c.fire <- time.Time{}
	if _, ok := b.Wait(context.Background()); !ok {
		t.Fatal("Wait returned false although the clock fired")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := b.Wait(ctx); ok {
		t.Fatal("Wait returned true on a done ctx with a clock that never fires")
	}
}
