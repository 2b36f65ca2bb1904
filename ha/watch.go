package ha

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/backoff"
)

// Item is one key of a watched prefix as the watcher saw it.
type Item[T any] struct {
	Key string
	// Value is the decoded value. It is zero when Err != nil. On delete it
	// is what the Decoder returns for a nil value: for stages and bounds
	// IsDeleted with the names taken from the key, for configs nil.
	Value    T
	Deleted  bool
	Revision int64 // ModRevision of the kv, or revision of the delete event
	Err      error // decoding error for this key only
}

// Decoder turns one key and value (nil on delete) into T.
type Decoder[T any] func(key string, value []byte) (T, error)

// Handler receives a full snapshot after every (re)list, then the events
// that follow it in order. Calls are sequential, from Watch's goroutine.
type Handler[T any] interface {
	// Resync is called with every key under the prefix at revision rev. It
	// must converge local state to exactly this set (level-triggered:
	// anything local that is not in items is gone).
	Resync(ctx context.Context, items []Item[T], rev int64) error
	// Changed is called for each event after the snapshot, in revision
	// order.
	Changed(ctx context.Context, item Item[T]) error
}

// Reasons passed to WatchOptions.OnRestart.
const (
	RestartCompacted        = "compacted"
	RestartNoLeader         = "no-leader"
	RestartDisconnected     = "disconnected"
	RestartCanceledByServer = "canceled-by-server"
	RestartHandlerError     = "handler-error"
)

// WatchOptions tunes Watch. The zero value is valid.
type WatchOptions struct {
	Logger     *zap.Logger   // default: no logging
	BackoffMin time.Duration // default 100ms
	BackoffMax time.Duration // default 5s
	// OnRestart, if set, is called with a reason (the Restart* constants)
	// every time the loop relists; for metrics.
	OnRestart func(reason string)
	// HealthyAfter is how long a watch must have run for the backoff to
	// start over from BackoffMin when it fails. Default 10s.
	HealthyAfter time.Duration
	// ListTimeout bounds each list, so that the loop keeps retrying while
	// etcd is unreachable. Default 5s.
	ListTimeout time.Duration
	// SingleKey watches prefix as one exact key (e.g. Keys.Bound(worker),
	// which as a prefix would also match the bound of worker "w10" for
	// "w1"). Resync then gets at most one item.
	SingleKey bool
}

func (o WatchOptions) withDefaults() WatchOptions {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = 100 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 5 * time.Second
	}
	o.BackoffMax = max(o.BackoffMax, o.BackoffMin)
	if o.HealthyAfter <= 0 {
		o.HealthyAfter = 10 * time.Second
	}
	if o.ListTimeout <= 0 {
		o.ListTimeout = 5 * time.Second
	}
	return o
}

// Watch lists prefix at revision R, calls h.Resync, and watches from R+1
// (with clientv3.WithRequireLeader), calling h.Changed for every event. On
// compaction, no leader, a closed watch channel, any other watch error or a
// handler error it backs off (pkg/backoff from BackoffMin to BackoffMax,
// reset after a healthy period) and starts over from a fresh snapshot.
// Watch blocks until ctx is done and then returns ctx.Err(). It starts no
// goroutine of its own; the client's watch goroutines are released by
// cancelling the watch context on every restart and on return.
func Watch[T any](ctx context.Context, cli *clientv3.Client, prefix string, dec Decoder[T], h Handler[T], opts WatchOptions) error {
	opts = opts.withDefaults()
	w := &watchLoop[T]{cli: cli, prefix: prefix, dec: dec, h: h, opts: opts,
		lg: opts.Logger.With(zap.String("prefix", prefix))}
	bo := backoff.New(opts.BackoffMin, opts.BackoffMax)
	for {
		end := w.once(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if end.watched >= opts.HealthyAfter {
			bo.Reset()
		}
		delay := bo.Next()
		w.lg.Warn("watch restarts from a fresh snapshot",
			zap.String("reason", end.reason), zap.Int64("rev", end.rev),
			zap.Duration("backoff", delay), zap.Error(end.err))
		if opts.OnRestart != nil {
			opts.OnRestart(end.reason)
		}
		if !backoff.Sleep(ctx, backoff.RealClock{}, delay) {
			return ctx.Err()
		}
	}
}

// watchLoop is the state of one Watch call; it is used by one goroutine.
type watchLoop[T any] struct {
	cli    *clientv3.Client
	prefix string
	dec    Decoder[T]
	h      Handler[T]
	opts   WatchOptions
	lg     *zap.Logger
}

// watchEnd says why one list+watch round ended.
type watchEnd struct {
	reason  string
	err     error
	rev     int64         // last revision delivered to the handler
	watched time.Duration // how long the watch ran after the snapshot
}

// once lists, resyncs and watches until the watch fails or ctx is done.
func (w *watchLoop[T]) once(ctx context.Context) watchEnd {
	var rangeOpts []clientv3.OpOption
	if !w.opts.SingleKey {
		rangeOpts = append(rangeOpts, clientv3.WithPrefix())
	}
	lctx, cancel := context.WithTimeout(ctx, w.opts.ListTimeout)
	resp, err := w.cli.Get(lctx, w.prefix, rangeOpts...)
	cancel()
	if err != nil {
		return watchEnd{reason: classify(err, false), err: fmt.Errorf("ha: list %s: %w", w.prefix, err)}
	}
	rev := resp.Header.Revision
	items := make([]Item[T], 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		items = append(items, w.item(kv, false))
	}
	w.lg.Debug("resync", zap.Int64("rev", rev), zap.Int("keys", len(items)))
	if err := w.h.Resync(ctx, items, rev); err != nil {
		return watchEnd{reason: RestartHandlerError, rev: rev,
			err: fmt.Errorf("ha: resync %s at revision %d: %w", w.prefix, rev, err)}
	}

	// The watch context is cancelled on return, which ends the client's
	// watch stream for it. (A watch cancelled while the client is still
	// creating it leaves the client's grpc stream open; the client reuses it
	// for the next watch with the same context metadata and closes it on
	// Close, so it does not accumulate.)
	if ctx.Err() != nil {
		return watchEnd{reason: RestartDisconnected, rev: rev, err: ctx.Err()}
	}
	wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer wcancel()
	started := time.Now()
	end := func(reason string, err error) watchEnd {
		return watchEnd{reason: reason, err: err, rev: rev, watched: time.Since(started)}
	}
	for wresp := range w.cli.Watch(wctx, w.prefix, append(rangeOpts, clientv3.WithRev(rev+1))...) {
		if wresp.CompactRevision != 0 {
			return end(RestartCompacted, fmt.Errorf("ha: watch %s from revision %d: compacted up to %d",
				w.prefix, rev+1, wresp.CompactRevision))
		}
		if err := wresp.Err(); err != nil {
			return end(classify(err, wresp.Canceled), fmt.Errorf("ha: watch %s from revision %d: %w", w.prefix, rev+1, err))
		}
		if wresp.Canceled {
			return end(RestartCanceledByServer, fmt.Errorf("ha: watch %s from revision %d: canceled by the server", w.prefix, rev+1))
		}
		for _, ev := range wresp.Events {
			item := w.item(ev.Kv, ev.Type == mvccpb.DELETE)
			if err := w.h.Changed(ctx, item); err != nil {
				return end(RestartHandlerError, fmt.Errorf("ha: handle %s at revision %d: %w", item.Key, item.Revision, err))
			}
			rev = ev.Kv.ModRevision
		}
	}
	return end(RestartDisconnected, fmt.Errorf("ha: watch %s from revision %d: watch channel closed", w.prefix, rev+1))
}

// item decodes one key-value of a list or a watch event.
func (w *watchLoop[T]) item(kv *mvccpb.KeyValue, deleted bool) Item[T] {
	it := Item[T]{Key: string(kv.Key), Deleted: deleted, Revision: kv.ModRevision}
	value := presentValue(kv.Value)
	if deleted {
		value = nil
	}
	v, err := w.dec(it.Key, value)
	if err != nil {
		it.Err = err
		w.lg.Warn("malformed key", zap.String("key", it.Key), zap.Int64("rev", it.Revision), zap.Error(err))
		return it
	}
	it.Value = stampRevision(v, kv.ModRevision)
	return it
}

// classify names the restart reason of a list or watch error.
func classify(err error, canceled bool) string {
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return RestartCompacted
	case errors.Is(err, rpctypes.ErrNoLeader):
		return RestartNoLeader
	case canceled:
		return RestartCanceledByServer
	default:
		return RestartDisconnected
	}
}
