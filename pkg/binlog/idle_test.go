package binlog

import (
	"context"
	"testing"
	"time"
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
