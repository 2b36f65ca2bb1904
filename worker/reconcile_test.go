package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/pkg/workqueue"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// countingReconciler fails the first failFirst reconciles of each name and
// records every call and the most calls of one name running at once.
type countingReconciler struct {
	failFirst int
	delay     time.Duration

	mu sync.Mutex
	// guarded by mu:
	calls      map[string]int
	active     map[string]int
	maxOverlap int
}

func newCountingReconciler(failFirst int, delay time.Duration) *countingReconciler {
	return &countingReconciler{failFirst: failFirst, delay: delay, calls: map[string]int{}, active: map[string]int{}}
}

func (r *countingReconciler) Reconcile(_ context.Context, name string) error {
	r.mu.Lock()
	r.calls[name]++
	n := r.calls[name]
	r.active[name]++
	r.maxOverlap = max(r.maxOverlap, r.active[name])
	r.mu.Unlock()
	time.Sleep(r.delay)
	r.mu.Lock()
	r.active[name]--
	r.mu.Unlock()
	if n <= r.failFirst {
		return errors.New("etcd unreachable")
	}
	return nil
}

func (r *countingReconciler) snapshot() (map[string]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.calls))
	for k, v := range r.calls {
		out[k] = v
	}
	return out, r.maxOverlap
}

func startRunner(t *testing.T, byKind map[string]Reconciler, m *Metrics) *workqueue.Queue {
	t.Helper()
	q := workqueue.New(time.Millisecond, 10*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	(&reconcileRunner{queue: q, byKind: byKind, metrics: m, log: zaptest.NewLogger(t)}).start(ctx, &wg, 4)
	t.Cleanup(func() {
		q.ShutDown()
		cancel()
		wg.Wait()
	})
	return q
}

func counter(t *testing.T, m *Metrics, kind, result string) float64 {
	t.Helper()
	var pm dto.Metric
	if err := m.ReconcileTotal.WithLabelValues(kind, result).Write(&pm); err != nil {
		t.Fatal(err)
	}
	return pm.GetCounter().GetValue()
}

// TestReconcileRunnerRetriesUntilSuccess: a failing reconcile is retried
// after its backoff until it succeeds, and each result is counted under
// the key's kind.
func TestReconcileRunnerRetriesUntilSuccess(t *testing.T) {
	rec := newCountingReconciler(2, 0)
	m := NewMetrics()
	q := startRunner(t, map[string]Reconciler{kindSubTask: rec}, m)
	q.Add(queueKey(kindSubTask, "t1"))
	testutil.Eventually(t, 5*time.Second, "t1 reconciled three times (two failures, one success)", func() error {
		calls, _ := rec.snapshot()
		if calls["t1"] != 3 || counter(t, m, kindSubTask, "ok") != 1 {
			return fmt.Errorf("calls %v, ok %v, error %v", calls, counter(t, m, kindSubTask, "ok"), counter(t, m, kindSubTask, "error"))
		}
		return nil
	})
	if got := counter(t, m, kindSubTask, "error"); got != 2 {
		t.Fatalf("error count %v, want 2", got)
	}
	time.Sleep(50 * time.Millisecond) // no retry after the success
	if calls, _ := rec.snapshot(); calls["t1"] != 3 {
		t.Fatalf("reconciled again after success: %v", calls)
	}
}

// TestReconcileRunnerDispatchesByKind: each kind goes to its own
// Reconciler with the name after the kind; a kind with none is dropped.
func TestReconcileRunnerDispatchesByKind(t *testing.T) {
	subs, relays := newCountingReconciler(0, 0), newCountingReconciler(0, 0)
	q := startRunner(t, map[string]Reconciler{kindSubTask: subs, kindRelay: relays}, NewMetrics())
	for _, k := range []string{queueKey(kindSubTask, "a"), queueKey(kindSubTask, "b"), queueKey(kindRelay, ""), "stream/x"} {
		q.Add(k)
	}
	testutil.Eventually(t, 5*time.Second, "every known key reconciled", func() error {
		s, _ := subs.snapshot()
		r, _ := relays.snapshot()
		if s["a"] != 1 || s["b"] != 1 || r[""] != 1 || len(s) != 2 || len(r) != 1 {
			return fmt.Errorf("subtask reconciler saw %v, relay reconciler %v", s, r)
		}
		return nil
	})
	testutil.WaitFor(t, 5*time.Second, "the queue drained (the unknown kind dropped)", func() bool { return q.Len() == 0 })
}

// TestReconcileRunnerOneKeyAtATime: keys added while their reconcile runs
// are reconciled again afterwards, never concurrently.
func TestReconcileRunnerOneKeyAtATime(t *testing.T) {
	rec := newCountingReconciler(0, 5*time.Millisecond)
	q := startRunner(t, map[string]Reconciler{kindSubTask: rec}, NewMetrics())
	for range 50 {
		q.Add(queueKey(kindSubTask, "hot"))
		time.Sleep(time.Millisecond)
	}
	testutil.WaitFor(t, 5*time.Second, "the queue drained", func() bool { return q.Len() == 0 })
	calls, overlap := rec.snapshot()
	if overlap != 1 || calls["hot"] < 2 {
		t.Fatalf("one key reconciled by %d workers at once (calls %v); want 1, and repeated reconciles", overlap, calls)
	}
}
