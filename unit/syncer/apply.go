package syncer

import (
	"context"
	"database/sql"
	"hash/maphash"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingcap/failpoint"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
)

// job is what the read loop hands a worker: a change, or a mark (seq > 0)
// that makes the worker commit what it holds and report the mark applied.
type job struct {
	change *change
	mark   uint64
}

// applyWorker applies the changes given to it, in order, in batches of up
// to batch changes per target transaction. It owns nothing but its input
// channel's consumption; the read loop owns the channel.
type applyWorker struct {
	id       int
	in       chan job
	db       *sql.DB
	store    *checkpointStore
	batch    int
	stats    *counters
	metrics  *unitMetrics
	logger   *zap.Logger
	progress chan<- struct{} // poked (without blocking) after each mark
	// floor is the highest location applied before this run (the safe
	// point it started with): a worker's safe point never goes below it,
	// so a later restart cannot leave safe mode too early.
	floor binlog.Location

	marked atomic.Uint64 // highest mark applied
	// catchingUp is the dispatcher's: while set, a worker with less than a
	// full batch waits up to catchUpLinger for more before committing.
	catchingUp *atomic.Bool
}

// catchUpLinger is how long a worker waits for a batch to fill while the
// unit is catching up (the binlog it reads is catchUpLag or more behind).
// Full batches mean fewer target transactions and more rows per
// statement; in steady replication nothing waits.
const (
	catchUpLinger = 30 * time.Millisecond
	catchUpLag    = 2 * time.Second
)

// run applies jobs until ctx is done or applying fails.
func (w *applyWorker) run(ctx context.Context) error {
	pending := make([]*change, 0, w.batch)
	var fill batchFill
	linger := time.NewTimer(catchUpLinger)
	linger.Stop()
	defer linger.Stop()
	for {
		var j job
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case j = <-w.in:
		}
		var mark uint64
	collect:
		for {
			if j.mark != 0 {
				mark = j.mark
				break
			}
			pending = append(pending, j.change)
			if rows, n := fill.add(j.change); rows >= w.batch || n >= maxBatchChanges(w.batch) {
				break
			}
			select {
			case j = <-w.in:
				continue
			default:
			}
			if !w.catchingUp.Load() {
				break collect
			}
			linger.Reset(catchUpLinger)
			select {
			case j = <-w.in:
				linger.Stop()
			case <-linger.C:
				break collect
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		if len(pending) > 0 {
			if err := w.apply(ctx, pending); err != nil {
				return err
			}
			clear(pending)
			pending = pending[:0]
			fill.reset()
		}
		if mark != 0 {
			w.marked.Store(mark)
			select {
			case w.progress <- struct{}{}:
			default:
			}
		}
	}
}

// apply commits one batch, with the worker's safe point, in one target
// transaction; deadlocks and lock wait timeouts are retried.
func (w *applyWorker) apply(ctx context.Context, batch []*change) error {
	stmts := statements(batch)
	highest := w.floor
	for _, c := range batch {
		if highest.IsZero() || c.loc.Compare(highest) > 0 {
			highest = c.loc
		}
	}
	if tp, ok := w.store.tablePointStmt(batch); ok {
		stmts = append(stmts, tp)
	}
	stmts = append(stmts, w.store.safePointStmt(w.id, highest))
	began := time.Now()
	// A batch sent to the target runs to its end even when the run is
	// cancelled (pause, stop), so that no transaction commits on the target
	// after the unit has stopped; only a batch still running applyGrace
	// after the cancel is abandoned.
	execCtx, release := graceContext(ctx, applyGrace)
	defer release()
	// The batch runs under execCtx; a cancel of ctx during a pause between
	// attempts ends the retries at once.
	err := dbconn.RetryLockConflict(ctx, func() error { return execTx(execCtx, w.db, stmts) }, func(attempt int, err error) {
		w.logger.Warn("batch aborted by the target; retrying", zap.Int("worker", w.id), zap.Int("attempt", attempt), zap.Error(err))
	})
	if err != nil {
		if ctx.Err() != nil {
			if execCtx.Err() != nil {
				w.logger.Warn("a batch still running on the target after the grace period was abandoned; it may yet commit, "+
					"which the safe point written with it makes harmless", zap.Int("worker", w.id), zap.Stringer("binlog", highest))
			}
			return context.Cause(ctx)
		}
		return errs.Wrap(err, CodeExec, "sync: apply a batch of %d row changes (up to binlog %s) on the target, worker %d",
			len(batch), highest, w.id)
	}
	failpoint.Inject("SyncCrashAfterBatch", func() {
		w.logger.Warn("failpoint SyncCrashAfterBatch: exiting the process", zap.Stringer("binlog", highest))
		os.Exit(crashExitCode)
	})
	var byKind [len(w.stats.rows)]uint64
	for _, c := range batch {
		byKind[c.kind]++
	}
	for k, n := range byKind {
		if n > 0 {
			w.stats.rows[k].Add(n)
			w.metrics.rows(changeKind(k), n)
		}
	}
	w.stats.batches.Add(1)
	w.metrics.batch(len(batch), time.Since(began))
	return nil
}

// applyGrace is how long a batch already sent may keep running after its
// run is cancelled.
const applyGrace = 5 * time.Second

// graceContext returns a context that ends grace after ctx ends (or when
// release is called), not at once.
func graceContext(ctx context.Context, grace time.Duration) (_ context.Context, release func()) {
	out, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var (
		mu    sync.Mutex
		timer *time.Timer
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(grace, func() { cancel(context.Cause(ctx)) })
	})
	return out, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel(nil)
	}
}

// crashExitCode is the exit status of the crash fault points.
const crashExitCode = 77

// clipSQL shortens a statement for an error message.
func clipSQL(s string) string {
	const max = 200
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// maxCausalityKeys bounds each generation of the dispatcher's key map (see
// dispatcher.rotate): the map holds at most twice as many keys.
const maxCausalityKeys = 1 << 16

// dispatcher hands changes to workers so that changes sharing a row key go
// to the same worker, in binlog order. It is owned by the read loop.
type dispatcher struct {
	workers []*applyWorker
	// keys maps a causality key hash to the worker holding changes of it:
	// keys since the last rotation, and in old those of the generation
	// before, whose changes may not all be applied yet; oldMark is the mark
	// sent when old was retired, after all of them.
	keys     map[uint64]int
	old      map[uint64]int
	oldMark  uint64
	maxKeys  int    // keys of a generation: maxCausalityKeys
	seq      uint64 // last mark sent
	progress chan struct{}
	seed     maphash.Seed
	scratch  []uint64 // causality key hashes of the change being dispatched
	buf      []byte
	// catchingUp is set by the read loop while it reads binlog written
	// catchUpLag or more ago; the workers read it.
	catchingUp atomic.Bool
	// launch starts a worker at its first job: an idle subtask keeps no
	// goroutine or queue for workers it never needed (1,000 idle subtasks
	// with 16 workers each held ~120 KiB apiece). A worker never started
	// holds nothing, so mark records every mark as applied by it.
	launch func(w *applyWorker)
}

func newDispatcher(progress chan struct{}) *dispatcher {
	return &dispatcher{keys: map[uint64]int{}, old: map[uint64]int{}, maxKeys: maxCausalityKeys, progress: progress,
		seed: maphash.MakeSeed()}
}

// dispatch sends one change to its worker. When the change's keys are held
// by different workers, it first waits for every worker to drain.
func (d *dispatcher) dispatch(ctx context.Context, c *change) error {
	var keys []uint64
	keys, d.buf = causalityKeys(d.scratch[:0], c, d.seed, d.buf)
	d.scratch = keys
	target, conflict := -1, false
	for _, k := range keys {
		w, ok := d.keys[k]
		if !ok {
			w, ok = d.old[k]
		}
		if ok {
			if target == -1 {
				target = w
			} else if target != w {
				conflict = true
			}
		}
	}
	if conflict {
		if err := d.barrier(ctx); err != nil {
			return err
		}
		target = -1
	} else if len(d.keys) >= d.maxKeys {
		// target, if any, still holds earlier changes of the keys: the
		// rotation keeps its mapping in old.
		if err := d.rotate(ctx); err != nil {
			return err
		}
	}
	if target == -1 {
		target = int(keys[0] % uint64(len(d.workers)))
	}
	for _, k := range keys {
		d.keys[k] = target
	}
	return d.send(ctx, d.workers[target], job{change: c})
}

func (d *dispatcher) send(ctx context.Context, w *applyWorker, j job) error {
	if w.in == nil {
		d.launch(w)
	}
	select {
	case w.in <- j:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// mark sends a new mark to every worker and returns its sequence number.
func (d *dispatcher) mark(ctx context.Context) (uint64, error) {
	d.seq++
	for _, w := range d.workers {
		if w.in == nil {
			w.marked.Store(d.seq)
			continue
		}
		if err := d.send(ctx, w, job{mark: d.seq}); err != nil {
			return 0, err
		}
	}
	return d.seq, nil
}

// applied is the highest mark every worker has applied: every change
// dispatched before it is committed on the target.
func (d *dispatcher) applied() uint64 {
	low := d.workers[0].marked.Load()
	for _, w := range d.workers[1:] {
		if m := w.marked.Load(); m < low {
			low = m
		}
	}
	return low
}

// barrier waits until every change dispatched so far is committed.
func (d *dispatcher) barrier(ctx context.Context) error {
	seq, err := d.mark(ctx)
	if err != nil {
		return err
	}
	if err := d.waitApplied(ctx, seq); err != nil {
		return err
	}
	clear(d.keys)
	clear(d.old)
	return nil
}

// rotate starts a new generation of the key map without waiting for the
// workers: the current keys become old, and a mark sent now tells when
// all their changes are committed. The generation before, retired at the
// previous rotation, must be by then (its mark normally is applied long
// before: the workers' queues hold far fewer changes than a generation);
// only then its map is dropped. So no mapping is forgotten while its
// worker may still hold changes of the key, the map holds at most two
// generations of maxKeys, and a transaction touching millions of
// distinct rows streams through it without the stall of a barrier.
func (d *dispatcher) rotate(ctx context.Context) error {
	if err := d.waitApplied(ctx, d.oldMark); err != nil {
		return err
	}
	seq, err := d.mark(ctx)
	if err != nil {
		return err
	}
	clear(d.old)
	d.keys, d.old, d.oldMark = d.old, d.keys, seq
	return nil
}

// waitApplied waits until every worker has applied mark seq.
func (d *dispatcher) waitApplied(ctx context.Context, seq uint64) error {
	for d.applied() < seq {
		select {
		case <-d.progress:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// queueDepth is the number of jobs waiting in the workers' channels.
func (d *dispatcher) queueDepth() int {
	n := 0
	for _, w := range d.workers {
		n += len(w.in)
	}
	return n
}
