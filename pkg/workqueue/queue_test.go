package workqueue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dmworker/dm-worker/pkg/backoff"
	"github.com/dmworker/dm-worker/tests/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDedupAndProcessingReadd(t *testing.T) {
	q := New(time.Millisecond, 10*time.Millisecond)
	defer q.ShutDown()
	ctx := context.Background()
	q.Add("a")
	q.Add("a")
	q.Add("b")
	if q.Len() != 2 {
		t.Fatalf("want 2 waiting keys, got %d", q.Len())
	}
	k, ok := q.Get(ctx)
	if !ok || k != "a" {
		t.Fatalf("got %q %v", k, ok)
	}
	q.Add("a") // while processing: must not be handed out twice
	k2, _ := q.Get(ctx)
	if k2 != "b" {
		t.Fatalf("want b while a is processing, got %q", k2)
	}
	if q.Len() != 0 {
		t.Fatalf("a must wait for Done, queue has %d", q.Len())
	}
	q.Done("a")
	k3, _ := q.Get(ctx)
	if k3 != "a" {
		t.Fatalf("want a again after Done, got %q", k3)
	}
	q.Done("a")
	q.Done("b")
}

func TestNoConcurrentProcessingOfOneKey(t *testing.T) {
	q := New(time.Millisecond, 10*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu     sync.Mutex
		active = map[string]bool{}
		wg     sync.WaitGroup
		failed bool
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k, ok := q.Get(ctx)
				if !ok {
					return
				}
				mu.Lock()
				if active[k] {
					failed = true
				}
				active[k] = true
				mu.Unlock()
				time.Sleep(50 * time.Microsecond)
				mu.Lock()
				active[k] = false
				mu.Unlock()
				q.Done(k)
			}
		}()
	}
	// Deferred, so that the workers also end when the wait below fails.
	stop := sync.OnceFunc(func() {
		cancel()
		wg.Wait()
		q.ShutDown()
	})
	defer stop()
	for i := range 5000 {
		q.Add(string(rune('a' + i%5)))
	}
	testutil.Eventually(t, 5*time.Second, "the workers to drain the queue", func() error {
		if n := q.Len(); n > 0 {
			return fmt.Errorf("%d keys still waiting", n)
		}
		return nil
	})
	stop()
	if failed {
		t.Fatal("a key was processed by two workers at once")
	}
}

func TestRateLimitedBackoffGrowsAndForgetResets(t *testing.T) {
	q := New(20*time.Millisecond, 80*time.Millisecond)
	defer q.ShutDown()
	ctx := context.Background()
	var delays []time.Duration
	for range 4 {
		start := time.Now()
		q.AddRateLimited("k")
		k, ok := q.Get(ctx)
		if !ok || k != "k" {
			t.Fatalf("got %q %v", k, ok)
		}
		delays = append(delays, time.Since(start))
		q.Done(k)
	}
	// Each delay is at least its step (20, 40, 80ms) less the jitter.
	low := func(step time.Duration) time.Duration { return time.Duration(float64(step) * (1 - backoff.Jitter)) }
	if delays[0] < low(20*time.Millisecond) || delays[1] < low(40*time.Millisecond) || delays[2] < low(80*time.Millisecond) {
		t.Fatalf("backoff did not grow: %v", delays)
	}
	if delays[3] > 80*time.Millisecond*3 {
		t.Fatalf("backoff not capped: %v", delays)
	}
	q.Forget("k")
	start := time.Now()
	q.AddRateLimited("k")
	q.Get(ctx)
	if d := time.Since(start); d > 60*time.Millisecond {
		t.Fatalf("Forget did not reset the backoff: %v", d)
	}
	q.Done("k")
}

func TestGetReturnsOnCancelAndShutDown(t *testing.T) {
	q := New(time.Millisecond, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, ok := q.Get(ctx); ok {
			t.Error("Get returned a key from an empty queue")
		}
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Get did not return after cancel")
	}
	q.ShutDown()
	if _, ok := q.Get(context.Background()); ok {
		t.Fatal("Get after ShutDown returned a key")
	}
}
