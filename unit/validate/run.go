package validate

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/binlog/upstream"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/onlineddl"
	"github.com/dmworker/dm-worker/pkg/rowimage"
)

// Timing of a run.
const (
	// waitSyncEvery is how often a validator waiting for its sync unit looks.
	waitSyncEvery = 500 * time.Millisecond
	// judgeTick is how often the judge looks for rows to check.
	judgeTick = 100 * time.Millisecond
	// saveEvery is how often the checkpoint is saved and status refreshed.
	saveEvery = time.Second
	// batchRows is how many keys one target query reads.
	batchRows = 200
)

// errRunEnded cancels a run's goroutines when its reader returns.
var errRunEnded = errors.New("validate: run ended")

// run is one run of the validator: what its reader, judge and workers
// share.
type run struct {
	v     *Validator
	store *store
	cmp   *comparer
	// srcCmp reads the source's current rows, to tell a stale image from
	// a real mismatch while the validator is behind the sync unit; srcEP
	// and srcDB are how the run reaches the source (also for its binlog).
	srcCmp *comparer
	srcEP  *dbconn.Endpoint
	srcDB  *sql.DB
	pend   *pendingSet
	sel    filter.Selection
	// osc names the shadow and trash tables of online schema changes,
	// whose rows are not validated (nil: online-ddl is off).
	osc *onlineddl.Rules
	// retryEvery is how long a failed row waits before its recheck.
	retryEvery time.Duration
	yield      *yielder
	checked    atomic.Int64

	mu sync.Mutex
	// guarded by mu: how far the reader has read (every change before it
	// is in pend) and its last transaction boundary.
	readLoc, boundary binlog.Location
	skipped           []string
}

// open opens a pool of n connections to a server of the subtask (ref
// names it in errors and picks its TLS settings).
func (v *Validator) open(db config.DBConfig, ref dbconn.Ref, n int) (*dbconn.Endpoint, *sql.DB, error) {
	ep, err := dbconn.NewEndpoint(db, ref)
	if err != nil {
		return nil, nil, errs.New(CodeConfig, false, "validate: %w", err)
	}
	pool, err := v.openPool(ep, n)
	if err != nil {
		return nil, nil, errs.New(CodeConfig, false, "validate: %w", err)
	}
	return ep, pool, nil
}

// openTarget opens a pool of n connections to the subtask's target.
func (v *Validator) openTarget(n int) (*sql.DB, error) {
	_, db, err := v.open(v.cfg.TargetDatabase, dbconn.TargetRef(v.cfg.Name), n)
	return db, err
}

// runOnce connects, waits for the sync unit, then validates from the
// checkpoint until ctx ends or something fails.
func (v *Validator) runOnce(ctx context.Context) error {
	db, err := v.openTarget(v.workers + 2)
	if err != nil {
		return err
	}
	defer closeDB(db, v.logger)
	st := newStore(db, v.cfg.MetaSchema, v.cfg.Name, v.cfg.SourceID)
	if err := v.loadStore(ctx, st); err != nil {
		return err
	}
	defer v.setStore(nil)
	start, checked, found, err := st.loadCheckpoint(ctx)
	if err != nil {
		return err
	}
	v.setState(StateWaiting)
	applied, err := v.waitSync(ctx)
	if err != nil {
		return err
	}
	if !found {
		start = applied
		v.logger.Info("validator starts where the sync unit is", zap.Stringer("binlog", start), zap.String("gtid", start.GTID))
	}
	v.setState(StateValidating)
	r := &run{v: v, store: st, cmp: newComparer(db, v.full), pend: newPendingSet(v.limit),
		retryEvery: min(max(v.delay/10, 100*time.Millisecond), 10*time.Second), readLoc: start, boundary: start,
		yield: newYielder(v.sync)}
	r.checked.Store(checked)
	if r.sel, err = filter.NewSelection(v.cfg, v.src); err != nil {
		return errs.New(CodeConfig, false, "validate: %w", err)
	}
	if r.osc, err = v.cfg.OnlineDDLRules(); err != nil {
		return errs.New(CodeConfig, false, "validate: %w", err)
	}
	if r.srcEP, r.srcDB, err = v.open(v.src.From, dbconn.SourceRef(v.src.SourceID), 2); err != nil {
		return err
	}
	defer closeDB(r.srcDB, v.logger)
	r.srcCmp = newComparer(r.srcDB, v.full)
	return r.run(ctx, start, rowimage.NewTables(db, r.sel.Router))
}

// loadStore prepares the meta tables, loads the error counts and makes st
// the store of the running validator.
func (v *Validator) loadStore(ctx context.Context, st *store) error {
	if err := st.prepare(ctx); err != nil {
		return err
	}
	counts, err := st.counts(ctx)
	if err != nil {
		return err
	}
	v.mu.Lock()
	v.st.counts, v.store = counts, st
	v.mu.Unlock()
	v.metrics.setCounts(counts)
	return nil
}

func (v *Validator) setStore(s *store) {
	v.mu.Lock()
	v.store = s
	v.mu.Unlock()
}

// waitSync waits until the subtask's sync unit runs and returns its
// applied location.
func (v *Validator) waitSync(ctx context.Context) (binlog.Location, error) {
	for {
		if applied, _, ok := v.sync.SyncProgress(); ok {
			return applied, nil
		}
		select {
		case <-ctx.Done():
			return binlog.Location{}, ctx.Err()
		case <-time.After(waitSyncEvery):
		}
	}
}

// streamOpener returns the relay reader while relay runs for the source,
// else a replication connection of the validator's own, with the source's
// flavor and how long the stream may stay silent (0 for relay).
func (r *run) streamOpener(ctx context.Context) (binlog.StreamOpener, string, time.Duration, error) {
	v := r.v
	flavor, err := v.sources.Flavor(ctx, r.srcEP, v.src.Flavor)
	if err != nil {
		return nil, "", 0, errs.Wrap(err, CodeRead, "validate: source %s", v.src.SourceID)
	}
	if v.relay != nil {
		if o := v.relay(); o != nil {
			return o, flavor, 0, nil
		}
	}
	id := upstream.ServerID("validator/"+v.cfg.Name, v.cfg.SourceID)
	return upstream.NewOpener(v.src, r.srcEP, flavor, id, v.sources), flavor, upstream.SilenceLimit, nil
}

// run reads from start until ctx ends or something fails, with the judge,
// the workers and the checkpoint saver beside it; at the end it saves the
// checkpoint once more.
func (r *run) run(ctx context.Context, start binlog.Location, tables *rowimage.Tables) error {
	opener, flavor, silence, err := r.streamOpener(ctx)
	if err != nil {
		return err
	}
	defer opener.Close()
	gset, err := mysql.ParseGTIDSet(flavor, start.GTID)
	if err != nil {
		return errs.New(CodeConfig, false, "validate: GTID set %q of the checkpoint: %w", start.GTID, err)
	}
	stream, err := opener.Open(ctx, start)
	if err != nil {
		return readError(err)
	}
	r.v.logger.Info("validator reads binlog", zap.Stringer("from", start), zap.String("gtid", start.GTID))
	r.v.mu.Lock()
	r.v.st.err = nil // connected again: the last retried error is over
	r.v.mu.Unlock()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(errRunEnded)
	var wg sync.WaitGroup
	r.startHelpers(runCtx, cancel, &wg)
	rd := &reader{run: r, tables: tables, tr: binlog.NewTracker(start, gset), silence: silence}
	readErr := rd.loop(runCtx, stream)
	cancel(readErr)
	r.pend.close()
	wg.Wait()
	saveCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer stop()
	if err := r.save(saveCtx); err != nil {
		r.v.logger.Warn("validator could not save its checkpoint at the end of its run", zap.Error(err))
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return context.Cause(runCtx)
}

// startHelpers starts the judge, the workers and the checkpoint saver; the
// first to fail cancels ctx with its error.
func (r *run) startHelpers(ctx context.Context, cancel context.CancelCauseFunc, wg *sync.WaitGroup) {
	work := make(chan batch, r.v.workers)
	goFn := func(fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				cancel(err)
			}
		}()
	}
	goFn(func(ctx context.Context) error { return r.judge(ctx, work) })
	for i := 0; i < r.v.workers; i++ {
		goFn(func(ctx context.Context) error { return r.work(ctx, work) })
	}
	goFn(r.saveLoop)
}

// readError classifies a binlog read error: the source refusing the
// position (1236: purged or unknown binlog) is not resumable, anything
// else is.
func readError(err error) error {
	if errs.Code(err) == dbconn.CodeTLS {
		return err
	}
	var myErr *mysql.MyError
	if errors.As(err, &myErr) && myErr.Code == 1236 {
		return errs.New(CodeRead, false, "validate: the source cannot send the binlog from the validator's checkpoint: %w", err)
	}
	return errs.New(CodeRead, true, "validate: read binlog: %w", err)
}

// read returns how far the reader has read.
func (r *run) read() binlog.Location {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.readLoc
}
