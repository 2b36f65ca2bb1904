package binlog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
)

func TestIdleWait(t *testing.T) {
	const tick = 200 * time.Millisecond
	w := NewIdleWait(t.Context(), tick)
	defer w.Stop()

	// Waits begun every tenth of a tick keep the context alive.
	ctx := w.Next()
	for range 20 {
		time.Sleep(tick / 10)
		if got := w.Next(); got != ctx || ctx.Err() != nil {
			t.Fatalf("context ended (%v) although a wait began every %s", context.Cause(ctx), tick/10)
		}
	}
	// Without waits it ends within two ticks, as idle.
	select {
	case <-ctx.Done():
	case <-time.After(10 * tick):
		t.Fatalf("context still alive %s after the last wait", 10*tick)
	}
	if !w.Expired(ctx) {
		t.Fatalf("Expired = false for a context ended by idleness (cause %v)", context.Cause(ctx))
	}
	// The next wait gets a fresh context.
	if next := w.Next(); next == ctx || next.Err() != nil {
		t.Fatal("Next after an idle expiry returned the ended context")
	}
}

func TestIdleWaitParentCancelled(t *testing.T) {
	parent, cancel := context.WithCancel(t.Context())
	w := NewIdleWait(parent, time.Hour)
	defer w.Stop()
	ctx := w.Next()
	cancel()
	<-ctx.Done()
	if w.Expired(ctx) {
		t.Fatal("Expired = true for a context ended by its parent")
	}
}

// TestReadLoopWake: a wake ends the wait for an event at once (the idle
// work runs long before the tick), and wakes do not count as silence.
func TestReadLoopWake(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wake := make(chan struct{}, 1)
	idles := make(chan time.Time, 16)
	done := make(chan error, 1)
	go func() {
		done <- ReadLoopWake(ctx, &eventsThenSilence{}, time.Hour, 3*time.Hour, wake,
			func(*replication.BinlogEvent) error { return nil },
			func() error { idles <- time.Now(); return nil },
			func(err error) error { return err })
	}()
	for i := range 10 {
		sent := time.Now()
		wake <- struct{}{}
		select {
		case at := <-idles:
			if d := at.Sub(sent); d > 5*time.Second {
				t.Fatalf("wake %d: idle work after %s", i, d)
			}
		case err := <-done:
			t.Fatalf("the loop ended after wake %d: %v", i, err)
		case <-ctx.Done():
			t.Fatalf("wake %d: no idle work", i)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("loop ended with %v", err)
	}
}

// TestIdleWaitWakeNotLost: a Wake that races the loop's renewal of its
// wait context (the loop between two waits) still ends a wait. Many quick
// rounds give the interleavings a chance; each round must see its wake
// within seconds although the tick is an hour.
func TestIdleWaitWakeNotLost(t *testing.T) {
	w := NewIdleWait(t.Context(), time.Hour)
	defer w.Stop()
	handled := make(chan struct{})
	go func() {
		for range handled {
			w.Wake()
		}
	}()
	defer close(handled)
	for i := range 20000 {
		ctx := w.Next()
		if i > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("round %d: the wake was lost", i)
			}
			if !w.Woken(ctx) {
				t.Fatalf("round %d: the wait ended with %v, not a wake", i, context.Cause(ctx))
			}
			w.ClearWake()
		}
		handled <- struct{}{}
	}
}
