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

// job is what the read loop hands a worker: the changes of one rows event
// that go to that worker, in binlog order, or a mark (seq > 0) that makes
// the worker commit what it holds and report the mark applied.
type job struct {
	changes []*change
	// size is the part of the dispatcher's in-flight budget the job holds
	// (the estimated size of its changes); the worker returns it once the
	// changes are committed.
	size int64
	// bulk: the changes come from a bulk rows event, so the worker's batch
	// may grow to bulkBatchRows (dispatcher.add).
	bulk bool
	mark uint64
}

// Bulk row events. A rows event with bulkEventRows or more changes (a
// multi-row INSERT, INSERT ... SELECT, a big UPDATE or DELETE: the source
// splits them into events of binlog_row_event_max_size, 8 KiB by default)
// is a bulk event. Its changes whose keys no worker holds go in runs of
// bulkBatchRows, in binlog order, to bulkSpread workers in turn
// (bulkWorker), not each to the worker of its own key hash; a worker's
// changes of one event travel as one job, and a batch holding bulk jobs
// takes up to bulkBatchRows row writes. Scattering a bulk load's rows by
// key hash over 16 workers had each target transaction insert 100 rows
// spread over the whole key range while 15 others did the same into the
// same B-tree: the target spent 13.8 CPU-s on sysbench's prepare (200,000
// rows), native replication 2.7 (docs/benchmarks.md, issue 27). A run
// writes neighbouring keys in big statements, as the source did; a few
// runs and different tables still load in parallel, and changes of keys a
// worker holds still go to it.
const (
	bulkEventRows = 16
	bulkBatchRows = 4096
	// maxJobChanges bounds one job; an event larger than that (a large
	// binlog_row_event_max_size) is sent as several.
	maxJobChanges = 1024
	// maxBatchBytes bounds a batch by the estimated size of its changes
	// (change.size): its statements stay far below max_allowed_packet and
	// maxJoinedSQL whatever the rows hold.
	maxBatchBytes = 2 << 20
	// maxInflightBytes bounds the estimated size of the changes dispatched
	// and not yet committed, over all workers: with the rows of a 1 GB
	// transaction streaming through, the queues and batches hold at most
	// this much (the channels' capacity in jobs alone would not bound it,
	// a job holding up to maxJobChanges changes). It is enough for the
	// bulkSpread workers of a bulk load to each commit one batch while the
	// next fills (sysbench rows: 4,096 rows are ~1 MiB); the real memory is
	// 2-3 times the estimate (boxed values, slices, the change itself).
	// At 32 MiB a 200k-row transaction peaked at 131-160 MiB RSS, at 8 MiB
	// at 127-135 MiB (71-84 MiB before bulk events).
	maxInflightBytes = 8 << 20
	// bulkSpread is how many workers share the runs of a bulk load.
	bulkSpread = 4
)

// applyWorker applies the changes given to it, in order, in batches of up
// to batch changes per target transaction. It owns nothing but its input
// channel's consumption; the read loop owns the channel.
type applyWorker struct {
	id       int
	in       chan job
	db       *sql.DB
	escapes  escapeMode // of db's sessions (literal.go)
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
	// inflight is the dispatcher's budget: the worker subtracts the size of
	// the jobs it committed and pokes progress.
	inflight *atomic.Int64
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
	var (
		fill batchFill
		held int64 // budget held by the jobs in pending
		bulk bool  // pending holds a bulk job
	)
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
			pending = append(pending, j.changes...)
			held += j.size
			bulk = bulk || j.bulk
			var rows, n, size int
			for _, c := range j.changes {
				rows, n, size = fill.add(c, j.bulk)
			}
			if batchFull(w.batch, bulk, rows, n, size) {
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
			bulk = false
		}
		if held > 0 && w.inflight != nil {
			w.inflight.Add(-held)
			held = 0
			w.poke()
		}
		if mark != 0 {
			w.marked.Store(mark)
			w.poke()
		}
	}
}

// batchFull reports whether a batch of rows row writes, n changes and an
// estimated size of size is complete: batch row writes (bulkBatchRows when
// it holds a bulk job), four times as many changes, or maxBatchBytes.
func batchFull(batch int, bulk bool, rows, n, size int) bool {
	if bulk {
		batch = max(batch, bulkBatchRows)
	}
	return rows >= batch || n >= maxBatchChanges(batch) || size >= maxBatchBytes
}

// poke tells the dispatcher, without blocking, that a mark was applied or
// budget returned.
func (w *applyWorker) poke() {
	select {
	case w.progress <- struct{}{}:
	default:
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
	err := dbconn.RetryLockConflict(ctx, func() error { return execTx(execCtx, w.db, stmts, w.escapes) }, func(attempt int, err error) {
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
	// groups holds, per worker, the changes of the rows event being
	// dispatched that go to it, sent as one job by flush.
	groups []pendingJob
	// inflight is the estimated size of the changes sent and not yet
	// committed (maxInflightBytes); the workers subtract what they commit.
	inflight    atomic.Int64
	maxInflight int64
	// bulkRows counts the bulk changes sent to the current run's worker,
	// bulkRun the runs (bulkWorker).
	bulkRows int
	bulkRun  uint64
	// eventRows is the number of changes of the event being dispatched
	// (setEvent), the capacity of each job collected for it.
	eventRows int
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
		seed: maphash.MakeSeed(), maxInflight: maxInflightBytes}
}

// pendingJob is a job being collected for one worker.
type pendingJob struct {
	changes []*change
	size    int64
	bulk    bool
}

// setEvent tells add how many changes the rows event being dispatched has.
func (d *dispatcher) setEvent(rows int) { d.eventRows = max(rows, 1) }

// dispatch sends one change to its worker at once.
func (d *dispatcher) dispatch(ctx context.Context, c *change) error {
	d.setEvent(1)
	if err := d.add(ctx, c, false); err != nil {
		return err
	}
	return d.flush(ctx)
}

// add assigns one change of the rows event being dispatched to its worker:
// the worker holding changes of its keys, else the worker of its bulk run
// (bulk) or of its first key's hash. When the change's keys are
// held by different workers, it first sends what it collected and waits for
// every worker to drain. The change is sent by flush, which the caller
// calls at the end of the event, or when its worker's job is full.
func (d *dispatcher) add(ctx context.Context, c *change, bulk bool) error {
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
		if err := d.barrier(ctx); err != nil { // sends what add collected first
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
		if bulk {
			target = d.bulkWorker(c.table)
		} else {
			target = int(keys[0] % uint64(len(d.workers)))
		}
	}
	for _, k := range keys {
		d.keys[k] = target
	}
	if d.groups == nil {
		d.groups = make([]pendingJob, len(d.workers))
	}
	g := &d.groups[target]
	if g.changes == nil {
		g.changes = make([]*change, 0, min(d.eventRows, maxJobChanges))
	}
	g.changes = append(g.changes, c)
	g.size += int64(c.size)
	g.bulk = g.bulk || bulk
	if len(g.changes) >= maxJobChanges || g.size >= maxBatchBytes {
		return d.sendGroup(ctx, target)
	}
	return nil
}

// bulkWorker is the worker of a bulk event's change whose keys no worker
// holds: a bulk load's rows go in runs of bulkBatchRows, in binlog order, to
// bulkSpread workers in turn, starting at one chosen by the table. Each
// target transaction then writes a run of neighbouring keys, as the source
// did, and a few runs load at once; different tables start at different
// workers.
func (d *dispatcher) bulkWorker(ti *tableInfo) int {
	n := len(d.workers)
	h := maphash.String(d.seed, ti.Target.Schema)*31 + maphash.String(d.seed, ti.Target.Table)
	w := (int(h%uint64(n)) + int(d.bulkRun%uint64(min(bulkSpread, n)))) % n
	if d.bulkRows++; d.bulkRows >= bulkBatchRows {
		d.bulkRows = 0
		d.bulkRun++
	}
	return w
}

// flush sends every job add collected.
func (d *dispatcher) flush(ctx context.Context) error {
	for i := range d.groups {
		if len(d.groups[i].changes) > 0 {
			if err := d.sendGroup(ctx, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// sendGroup sends worker i's collected job once the in-flight budget has
// room for it (a job larger than the whole budget waits for an empty one).
func (d *dispatcher) sendGroup(ctx context.Context, i int) error {
	g := d.groups[i]
	d.groups[i] = pendingJob{}
	size := min(g.size, d.maxInflight)
	for d.inflight.Load() > 0 && d.inflight.Load()+size > d.maxInflight {
		select {
		case <-d.progress:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	d.inflight.Add(size)
	return d.send(ctx, d.workers[i], job{changes: g.changes, size: size, bulk: g.bulk})
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
	// Changes collected for a job come before the mark.
	if err := d.flush(ctx); err != nil {
		return 0, err
	}
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
