package periodic

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/testutil"
)

func TestRunNowCallsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var n atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, time.Hour, Now, func(context.Context) { n.Add(1) })
	}()
	testutil.WaitFor(t, 5*time.Second, "the first call before any interval", func() bool { return n.Load() == 1 })
	cancel()
	<-done
	if got := n.Load(); got != 1 {
		t.Fatalf("%d calls within an hour's interval, want 1", got)
	}
}

func TestRunAfterIntervalRepeatsAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	done := make(chan struct{})
	start := time.Now()
	var first atomic.Int64
	go func() {
		defer close(done)
		Run(ctx, 20*time.Millisecond, AfterInterval, func(context.Context) {
			if n.Add(1) == 1 {
				first.Store(int64(time.Since(start)))
			}
		})
	}()
	testutil.WaitFor(t, 5*time.Second, "three calls", func() bool { return n.Load() >= 3 })
	cancel()
	<-done
	if d := time.Duration(first.Load()); d < 20*time.Millisecond {
		t.Fatalf("first call after %s, before one interval of 20ms", d)
	}
	after := n.Load()
	time.Sleep(60 * time.Millisecond)
	if n.Load() != after {
		t.Fatal("called after Run returned")
	}
}

func TestRunDoneContextNeverCalls(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Run(ctx, time.Millisecond, Now, func(context.Context) { t.Fatal("called with a done context") })
}
