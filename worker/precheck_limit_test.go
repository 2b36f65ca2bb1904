package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
)

// blockingPrechecks is a unit.Factory whose prechecks block until release is
// closed, counting how many run at once.
type blockingPrechecks struct {
	unit.Factory
	release       chan struct{}
	running, peak atomic.Int32
}

func (f *blockingPrechecks) Precheck(ctx context.Context, _ *config.SubTaskConfig) error {
	n := f.running.Add(1)
	defer f.running.Add(-1)
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
	select {
	case <-f.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestPrecheckSlots starts three times precheckSlots prechecks through one
// source worker's factory: no more than precheckSlots run at once, a
// precheck waiting for a slot returns when its context is cancelled, and
// every other one runs once slots free up.
func TestPrecheckSlots(t *testing.T) {
	inner := &blockingPrechecks{release: make(chan struct{})}
	f := withSecrets(inner, nil)
	cfg := func(i int) *config.SubTaskConfig {
		c := config.NewSubTaskConfig()
		c.Name, c.SourceID = fmt.Sprintf("t%d", i), "s1"
		return c
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3*precheckSlots)
	for i := range 3 * precheckSlots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- f.Precheck(t.Context(), cfg(i))
		}()
	}
	testutil.Eventually(t, 10*time.Second, "precheckSlots prechecks running", func() error {
		if n := inner.running.Load(); n != precheckSlots {
			return fmt.Errorf("%d running", n)
		}
		return nil
	})
	testutil.Consistently(t, 100*time.Millisecond, "no more than precheckSlots prechecks run", func() error {
		if n := inner.running.Load(); n > precheckSlots {
			return fmt.Errorf("%d running", n)
		}
		return nil
	})

	ctx, cancel := context.WithCancel(t.Context())
	waiting := make(chan error, 1)
	go func() { waiting <- f.Precheck(ctx, cfg(-1)) }()
	cancel()
	select {
	case err := <-waiting:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("precheck cancelled while waiting for a slot: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("precheck cancelled while waiting for a slot did not return")
	}

	close(inner.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("precheck: %v", err)
		}
	}
	if p := inner.peak.Load(); p != precheckSlots {
		t.Errorf("at most %d prechecks ran at once, want %d", p, precheckSlots)
	}
}
