package worker

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/workqueue"
)

// watcher starts the watch loops of one owner (the Server, a
// SourceWorker). Every loop is ha.Watch over one prefix or key whose
// handler only enqueues queue keys: reconcilers read the values themselves,
// in one transaction per object, so a watch only needs to know which key
// changed.
type watcher struct {
	client                 *clientv3.Client
	queue                  *workqueue.Queue
	backoffMin, backoffMax time.Duration
	metrics                *Metrics
	log                    *zap.Logger
}

// watchSpec is what one watch loop follows and how its keys become queue
// keys.
type watchSpec struct {
	kind   string // label in logs and the watch-restart metric
	prefix string
	// exact watches prefix as one key (ha.WatchOptions.SingleKey): the bound
	// key of worker "w1" must not match that of "w10".
	exact bool
	// keyOf maps the part of an etcd key after prefix to a queue key; false
	// refuses the key (an invalid name).
	keyOf func(rest string) (string, bool)
	// extra lists queue keys to enqueue on every resync besides those
	// listed, so that local work whose keys vanished during a gap is
	// reconciled away.
	extra func() []string
	// bad, when set, records the keys keyOf refused, for status.
	bad *badKeys
}

// start runs the watch loop of spec in a goroutine owned by wg until ctx is
// done.
func (w watcher) start(ctx context.Context, wg *sync.WaitGroup, spec watchSpec) {
	h := &enqueueHandler{spec: spec, queue: w.queue, log: w.log}
	opts := ha.WatchOptions{
		Logger:     w.log.With(zap.String("watch", spec.kind)),
		BackoffMin: w.backoffMin,
		BackoffMax: w.backoffMax,
		SingleKey:  spec.exact,
		OnRestart: func(reason string) {
			w.metrics.WatchRestarts.WithLabelValues(spec.kind, reason).Inc()
		},
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Watch returns only when ctx is done.
		_ = ha.Watch(ctx, w.client, spec.prefix, keyDecoder, h, opts)
	}()
}

// keyDecoder ignores values: reconcilers read values themselves.
func keyDecoder(string, []byte) (struct{}, error) { return struct{}{}, nil }

// enqueueHandler turns watch snapshots and events into queue keys.
type enqueueHandler struct {
	spec  watchSpec
	queue *workqueue.Queue
	log   *zap.Logger
}

func (h *enqueueHandler) Resync(_ context.Context, items []ha.Item[struct{}], rev int64) error {
	h.log.Debug("resync", zap.String("watch", h.spec.kind), zap.Int64("rev", rev), zap.Int("keys", len(items)))
	var bad []string
	for _, it := range items {
		if !h.add(it.Key) {
			bad = append(bad, it.Key)
		}
	}
	if h.spec.bad != nil {
		h.spec.bad.replace(h.spec.prefix, bad)
	}
	if h.spec.extra != nil {
		for _, k := range h.spec.extra() {
			h.queue.Add(k)
		}
	}
	return nil
}

func (h *enqueueHandler) Changed(_ context.Context, it ha.Item[struct{}]) error {
	if !h.add(it.Key) && h.spec.bad != nil {
		h.spec.bad.set(it.Key, !it.Deleted)
	}
	return nil
}

// add enqueues the queue key of an etcd key; false when keyOf refuses it.
func (h *enqueueHandler) add(key string) bool {
	qk, ok := h.spec.keyOf(strings.TrimPrefix(key, h.spec.prefix))
	if !ok {
		h.log.Warn("ignoring key with an invalid name under a watched prefix; delete or rename it",
			zap.String("watch", h.spec.kind), zap.String("key", key))
		return false
	}
	h.queue.Add(qk)
	return true
}

// watchSet is a group of watch loops started and stopped together.
type watchSet struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startWatchSet starts the loops of specs under a child of ctx.
func startWatchSet(ctx context.Context, w watcher, specs ...watchSpec) *watchSet {
	ws := &watchSet{}
	ctx, ws.cancel = context.WithCancel(ctx)
	for _, spec := range specs {
		w.start(ctx, &ws.wg, spec)
	}
	return ws
}

// stop cancels the loops and waits for them; a nil set is stopped.
func (ws *watchSet) stop() {
	if ws == nil {
		return
	}
	ws.cancel()
	ws.wg.Wait()
}

// badKeys is the set of watched etcd keys whose names are invalid, with
// the time each was first seen.
type badKeys struct {
	now func() time.Time
	mu  sync.Mutex
	// guarded by mu:
	keys map[string]time.Time
}

func newBadKeys(now func() time.Time) *badKeys {
	return &badKeys{now: now, keys: make(map[string]time.Time)}
}

func (b *badKeys) set(key string, present bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !present {
		delete(b.keys, key)
	} else if _, ok := b.keys[key]; !ok {
		b.keys[key] = b.now()
	}
}

// replace makes keys the bad keys under prefix.
func (b *badKeys) replace(prefix string, keys []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	seen := make(map[string]time.Time)
	for k, t := range b.keys {
		if strings.HasPrefix(k, prefix) {
			seen[k] = t
			delete(b.keys, k)
		}
	}
	for _, k := range keys {
		if t, ok := seen[k]; ok {
			b.keys[k] = t
		} else {
			b.keys[k] = b.now()
		}
	}
}

// list returns the bad keys, sorted, with their first-seen times.
func (b *badKeys) list() ([]string, map[string]time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.keys)), maps.Clone(b.keys)
}
