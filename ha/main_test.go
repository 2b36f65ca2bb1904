package ha

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newStore starts an embedded etcd and returns a Store on it with the
// default prefix, and the cluster.
func newStore(t *testing.T) (*Store, *etcdtest.Cluster) {
	t.Helper()
	c := etcdtest.Start(t)
	return NewStore(c.Client(t), ""), c
}

// recorder is a level-triggered Handler: state is converged to every
// Resync and updated by every event. It records what it saw.
type recorder[T any] struct {
	changedErr func(Item[T]) error // optional failure injection

	mu      sync.Mutex
	state   map[string]Item[T]
	resyncs []resyncCall[T]
	events  []Item[T]
}

type resyncCall[T any] struct {
	rev   int64
	items []Item[T]
}

func newRecorder[T any]() *recorder[T] {
	return &recorder[T]{state: make(map[string]Item[T])}
}

func (r *recorder[T]) Resync(_ context.Context, items []Item[T], rev int64) error {
	r.mu.Lock()
	r.state = make(map[string]Item[T], len(items))
	for _, it := range items {
		r.state[it.Key] = it
	}
	r.resyncs = append(r.resyncs, resyncCall[T]{rev: rev, items: slices.Clone(items)})
	r.mu.Unlock()
	return nil
}

func (r *recorder[T]) Changed(_ context.Context, it Item[T]) error {
	if r.changedErr != nil {
		if err := r.changedErr(it); err != nil {
			return err
		}
	}
	r.mu.Lock()
	if it.Deleted {
		delete(r.state, it.Key)
	} else {
		r.state[it.Key] = it
	}
	r.events = append(r.events, it)
	r.mu.Unlock()
	return nil
}

// waitFor waits until cond, evaluated under the recorder's lock, holds; a
// timeout reports what the recorder had seen by then.
func (r *recorder[T]) waitFor(t *testing.T, d time.Duration, what string, cond func(r *recorder[T]) bool) {
	t.Helper()
	testutil.Eventually(t, d, what, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if cond(r) {
			return nil
		}
		return fmt.Errorf("%d resyncs and %d events seen, local keys %v", len(r.resyncs), len(r.events), r.keys())
	})
}

// keys returns the keys of the local state, sorted.
func (r *recorder[T]) keys() []string {
	out := make([]string, 0, len(r.state))
	for k := range r.state {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// lastEvent returns the last event for key.
func (r *recorder[T]) lastEvent(key string) (Item[T], bool) {
	for i := len(r.events) - 1; i >= 0; i-- {
		if r.events[i].Key == key {
			return r.events[i], true
		}
	}
	return Item[T]{}, false
}

// startWatch runs Watch in a goroutine until the test ends, then checks it
// returned context.Canceled.
func startWatch[T any](t *testing.T, cli *clientv3.Client, prefix string, dec Decoder[T], h Handler[T], opts WatchOptions) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t)
	}
	if opts.BackoffMin == 0 {
		opts.BackoffMin = 20 * time.Millisecond
	}
	if opts.BackoffMax == 0 {
		opts.BackoffMax = 200 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Watch(ctx, cli, prefix, dec, h, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Watch returned %v, want context.Canceled", err)
		}
	})
}

// reasons records OnRestart calls.
type reasons struct {
	mu   sync.Mutex
	list []string
}

func (r *reasons) add(reason string) {
	r.mu.Lock()
	r.list = append(r.list, reason)
	r.mu.Unlock()
}

// snapshot returns a copy of the reasons recorded so far.
func (r *reasons) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.list)
}

func (r *reasons) has(reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.list, reason)
}
