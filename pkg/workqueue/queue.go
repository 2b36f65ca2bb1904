// Package workqueue is a keyed work queue in the manner of client-go's: a
// key added many times before it is processed is processed once, a key is
// never handed to two workers at the same time, and a key that failed can be
// re-added after a per-key exponential backoff (pkg/backoff).
//
// It owns only queue bookkeeping; what a key means is the caller's business.
package workqueue

import (
	"context"
	"sync"
	"time"

	"github.com/dmworker/dm-worker/pkg/backoff"
)

// Queue is a deduplicating queue of string keys. The zero value is not
// usable; call New. Every goroutine it starts for delayed adds is owned by the
// queue and ends at ShutDown.
type Queue struct {
	backoffMin time.Duration
	backoffMax time.Duration

	mu         sync.Mutex
	cond       *sync.Cond
	order      []string                    // keys ready to hand out, FIFO
	dirty      map[string]struct{}         // keys waiting (in order, or re-added while processing)
	processing map[string]struct{}         // keys handed out and not yet Done
	backoffs   map[string]*backoff.Backoff // per key with a failure since its last Forget
	timers     map[string]*time.Timer
	shutdown   bool
}

// New returns a queue whose AddRateLimited delays grow from backoffMin,
// doubling per consecutive failure, capped at backoffMax (see pkg/backoff).
func New(backoffMin, backoffMax time.Duration) *Queue {
	q := &Queue{
		backoffMin: backoffMin,
		backoffMax: backoffMax,
		dirty:      make(map[string]struct{}),
		processing: make(map[string]struct{}),
		backoffs:   make(map[string]*backoff.Backoff),
		timers:     make(map[string]*time.Timer),
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add queues key unless it is already waiting. A key being processed is
// queued again once its worker calls Done.
func (q *Queue) Add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(key)
}

func (q *Queue) addLocked(key string) {
	if q.shutdown {
		return
	}
	if _, ok := q.dirty[key]; ok {
		return
	}
	q.dirty[key] = struct{}{}
	if _, ok := q.processing[key]; ok {
		return
	}
	q.order = append(q.order, key)
	q.cond.Signal()
}

// AddRateLimited queues key after its backoff, which doubles with every call
// until Forget. Use it when processing key failed.
func (q *Queue) AddRateLimited(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	b, ok := q.backoffs[key]
	if !ok {
		b = backoff.New(q.backoffMin, q.backoffMax)
		q.backoffs[key] = b
	}
	d := b.Next()
	if t, ok := q.timers[key]; ok {
		t.Stop()
	}
	q.timers[key] = time.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		delete(q.timers, key)
		q.addLocked(key)
	})
}

// Forget resets the backoff of key after it was processed successfully.
func (q *Queue) Forget(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.backoffs, key)
}

// Get blocks until a key is ready, the queue is shut down, or ctx is done.
// The caller must call Done(key) when finished with it. ok is false when no
// key will come.
func (q *Queue) Get(ctx context.Context) (key string, ok bool) {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.cond.Broadcast()
	})
	defer stop()

	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.order) == 0 && !q.shutdown && ctx.Err() == nil {
		q.cond.Wait()
	}
	if q.shutdown || ctx.Err() != nil {
		return "", false
	}
	key = q.order[0]
	q.order = q.order[1:]
	delete(q.dirty, key)
	q.processing[key] = struct{}{}
	return key, true
}

// Done marks key as processed; if it was added meanwhile it is queued again.
func (q *Queue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	if _, ok := q.dirty[key]; ok && !q.shutdown {
		q.order = append(q.order, key)
		q.cond.Signal()
	}
}

// Len is the number of keys waiting to be handed out.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)
}

// ShutDown wakes every Get, stops pending delayed adds and refuses new keys.
func (q *Queue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	for k, t := range q.timers {
		t.Stop()
		delete(q.timers, k)
	}
	q.cond.Broadcast()
}
