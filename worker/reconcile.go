package worker

import (
	"context"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/workqueue"
)

// Reconciler converges the local work of one kind of etcd key to etcd
// (level-triggered). Reconcile reads what the object named name needs in
// one etcd transaction and converges to it, whatever happened before. It
// returns an error only when it should be retried (etcd unreachable, a
// relay directory that may come back); problems with values are reported
// in status and logged, and end the reconcile without error.
type Reconciler interface {
	Reconcile(ctx context.Context, name string) error
}

// queueKey is the work-queue key of object name of a kind ("subtask/t1",
// "relay/", "bound/").
func queueKey(kind, name string) string { return kind + "/" + name }

// reconcileRunner drains a work queue into the Reconciler of each key's
// kind. The queue never hands one key to two workers at once, so one
// object is never reconciled twice at the same time.
type reconcileRunner struct {
	queue *workqueue.Queue
	// byKind maps the kind part of a queue key to its reconciler.
	byKind  map[string]Reconciler
	metrics *Metrics
	log     *zap.Logger
}

// start runs n workers in goroutines owned by wg until the queue is shut
// down or ctx is done.
func (r *reconcileRunner) start(ctx context.Context, wg *sync.WaitGroup, n int) {
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				key, ok := r.queue.Get(ctx)
				if !ok {
					return
				}
				r.reconcile(ctx, key)
				r.queue.Done(key)
			}
		}()
	}
}

// reconcile runs the reconciler of key once; a failure is retried after
// the key's backoff, a success resets it.
func (r *reconcileRunner) reconcile(ctx context.Context, key string) {
	kind, name, _ := strings.Cut(key, "/")
	rec, ok := r.byKind[kind]
	if !ok {
		r.log.Error("queue key of no known kind; dropped", zap.String("key", key))
		return
	}
	start := time.Now()
	err := rec.Reconcile(ctx, name)
	r.metrics.ReconcileDuration.WithLabelValues(kind).Observe(time.Since(start).Seconds())
	if err != nil {
		r.metrics.ReconcileTotal.WithLabelValues(kind, "error").Inc()
		if ctx.Err() == nil {
			r.log.Warn("reconcile failed; will retry", zap.String("key", key), zap.Error(err))
			r.queue.AddRateLimited(key)
		}
		return
	}
	r.metrics.ReconcileTotal.WithLabelValues(kind, "ok").Inc()
	r.queue.Forget(key)
}
