package syncer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/binlog/upstream"
	"github.com/dmworker/dm-worker/pkg/collation"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/onlineddl"
)

// idleTick is how long the read loop waits for an event before it does its
// idle work (checkpoint, lag).
const idleTick = 100 * time.Millisecond

// markEvery bounds how long the read loop goes between marks: the newest
// fully applied mark is the progress a validator waits for (SyncProgress),
// so it advances about every second while the checkpoint is still saved
// only every checkpoint-flush-interval. A mark makes each worker commit
// what it holds, so one a second costs at most one small commit per worker.
const markEvery = time.Second

// errRunEnded cancels the workers when the read loop returns.
var errRunEnded = errors.New("sync: run ended")

// pendingMark is a transaction boundary waiting for every worker to apply
// the mark sent right after it.
type pendingMark struct {
	seq uint64
	loc binlog.Location
}

// reader is the state of one run's read loop; only that goroutine uses it.
type reader struct {
	s      *Syncer
	cfg    *config.SubTaskConfig
	disp   *dispatcher
	tables *tableCache
	ddl    *ddlApplier
	shard  *shardRun          // nil without shard DDL coordination
	online *onlineddl.Tracker // nil without online-ddl
	exprs  *exprFilters       // nil without expression filters

	// tr follows the read location and the last transaction boundary.
	tr *binlog.Tracker
	// safeUntil: changes up to here may already be applied (safe mode).
	safeUntil  binlog.Location
	pendingDDL binlog.Location // from the checkpoint: DDL that may have run
	// points: the last change a previous run applied of each ordered
	// table (no key, or a foreign key group: tablepoint.go).
	points map[tableName]rowPoint

	saved    binlog.Location // last saved checkpoint
	savedAt  time.Time
	applied  binlog.Location // newest fully applied mark (saved or not)
	marks    []pendingMark
	markedAt time.Time
	marked   binlog.Location // location of the last mark sent
	interval time.Duration   // between checkpoint saves
	markGap  time.Duration   // between marks: min(interval, markEvery)

	lastTS      uint32    // timestamp of the last event with one
	publishedAt time.Time // when status last got the read location
	unpublished bool      // events were read since then

	// sinceCheck counts the events handled since afterEvent last checked
	// for a mark or save.
	sinceCheck int

	// silence: with a stream from the source (which sends heartbeats),
	// this long without any event means the connection is dead. Zero for
	// relay streams, which are silent while the source is.
	silence time.Duration
}

// publishEvery bounds how often the read loop formats its location for
// status while events stream; idle and the end of a run publish at once.
const publishEvery = 50 * time.Millisecond

// run is one Process/Resume: load the checkpoint, open the binlog stream,
// start the workers and read until ctx is done or something fails.
func (s *Syncer) run(ctx context.Context) (err error) {
	if s.target == nil {
		return errs.New(CodeConfig, false, "sync: Process before a successful Init")
	}
	s.setStuck(nil)
	start, err := s.startPoint(ctx)
	if err != nil {
		return err
	}
	if start.collations, err = s.readCollations(ctx); err != nil {
		return err
	}
	opener := s.streamOpener()
	defer opener.Close()
	stream, err := opener.Open(ctx, start.cp.loc)
	if err != nil {
		return readError(err)
	}
	s.logger.Info("sync unit starts reading binlog", zap.Stringer("from", start.cp.loc), zap.String("gtid", start.cp.loc.GTID),
		zap.Stringer("safe-mode-until", start.safeUntil), zap.Stringer("pending-ddl", start.cp.pendingDDL))

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(errRunEnded)
	// The foreign key comparison only adds status warnings: it runs beside
	// the first events (it reads both servers' information_schema, ~20 ms
	// that the start of every run would otherwise wait for), and the run
	// waits for it before it returns.
	fkDone := make(chan struct{})
	go func() {
		defer close(fkDone)
		s.warnForeignKeys(runCtx)
	}()
	defer func() { <-fkDone }()
	disp := newDispatcher(make(chan struct{}, 1))
	wg := s.startWorkers(runCtx, cancel, disp, start.safeUntil)
	s.publishRunStart(disp, start.cp.loc)

	r := s.newReader(disp, start)
	defer r.exprs.close()
	if _, direct := opener.(*upstream.Opener); direct {
		r.silence = upstream.SilenceLimit
	}
	loopErr := r.startShard(runCtx)
	if loopErr == nil {
		loopErr = r.startOnlineDDL(runCtx)
	}
	if loopErr == nil {
		loopErr = r.loop(runCtx, stream)
	}
	for {
		var rw *errRewind
		if !errors.As(loopErr, &rw) || runCtx.Err() != nil {
			break
		}
		if stream, loopErr = opener.Open(runCtx, rw.from); loopErr != nil {
			loopErr = readError(loopErr)
			break
		}
		if loopErr = r.rewound(rw.from); loopErr == nil {
			loopErr = r.loop(runCtx, stream)
		}
	}
	if loopErr != nil && runCtx.Err() == nil {
		r.drain(runCtx, loopErr)
	}
	r.flushPublish()
	cancel(loopErr)
	wg.Wait()
	r.shard.stop()

	// Everything before the newest fully applied mark is on the target.
	if loc := r.newestApplied(); loc.Compare(r.saved) > 0 {
		s.unsaved = &savedCheckpoint{loc: loc}
	}
	s.publishRunEnd()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return context.Cause(runCtx)
}

// startShard sets up shard DDL coordination for a sharding task: the
// run's shard state, and this source's tables in their sharding groups.
func (r *reader) startShard(ctx context.Context) error {
	sr, err := r.s.newShardRun(ctx, r)
	if err != nil || sr == nil {
		return err
	}
	r.shard = sr
	return sr.publishShares(ctx)
}

// rewound resets the read state to from, where the binlog was opened again
// for a shard DDL re-sync: the tracker, the marks, the applied location.
func (r *reader) rewound(from binlog.Location) error {
	gset, err := mysql.ParseGTIDSet(r.s.flavor, from.GTID)
	if err != nil {
		return errs.New(CodeConfig, false, "sync: GTID set %q of the re-sync start: %w", from.GTID, err)
	}
	r.tr = binlog.NewTracker(from, gset)
	r.marks = r.marks[:0]
	r.marked, r.markedAt = from, time.Now()
	r.applied = r.saved
	r.s.publishApplied(r.applied)
	r.pendingDDL = binlog.Location{}
	return nil
}

// drain lets every worker apply what the read loop gave it before the run
// ends. The loop stopped at an event it cannot pass (a DDL a filter rule
// refuses or the target rejects, a read error): the target then holds
// everything before that event, and the checkpoint can name the last
// transaction boundary before it. Cancelling instead would drop batches in
// flight and show an operator half a transaction. A pause or stop (ctx
// cancelled) or a failed worker (the run cancelled) ends the drain at once.
func (r *reader) drain(ctx context.Context, cause error) {
	err := r.maybeMark(ctx, true)
	if err == nil {
		err = r.disp.barrier(ctx)
	}
	if err != nil {
		r.s.logger.Info("sync unit stopped before every change read was applied", zap.NamedError("stopped-at", cause),
			zap.NamedError("drain", err))
	}
}

// runStart is where a run starts reading and what it knows from before.
type runStart struct {
	cp        savedCheckpoint
	safeUntil binlog.Location        // safe mode up to here; zero when not needed
	gset      mysql.GTIDSet          // the GTID set of cp.loc
	points    map[tableName]rowPoint // table points (tablepoint.go)
	// collations are the source's, with collation_compatible strict; nil
	// when loose.
	collations *collation.Catalog
}

// startPoint saves what the last run could not, then returns the saved
// checkpoint (or the subtask meta's location when there is none), how far
// safe mode must go and the start's GTID set.
func (s *Syncer) startPoint(ctx context.Context) (runStart, error) {
	if s.unsaved != nil {
		if err := s.saveCheckpoint(ctx, *s.unsaved); err != nil {
			return runStart{}, err
		}
	}
	cp, found, err := s.store.load(ctx)
	if err != nil {
		return runStart{}, err
	}
	if !found {
		if cp.loc, err = s.metaStart(); err != nil {
			return runStart{}, err
		}
	}
	safeUntil, err := s.store.maxSafePoint(ctx)
	if err != nil {
		return runStart{}, err
	}
	if !safeUntil.IsZero() && safeUntil.Compare(cp.loc) <= 0 {
		safeUntil = binlog.Location{}
	}
	points, err := s.store.tablePoints(ctx)
	if err != nil {
		return runStart{}, err
	}
	gset, err := mysql.ParseGTIDSet(s.flavor, cp.loc.GTID)
	if err != nil {
		return runStart{}, errs.New(CodeConfig, false, "sync: GTID set %q of the start location: %w", cp.loc.GTID, err)
	}
	return runStart{cp: cp, safeUntil: safeUntil, gset: gset, points: points}, nil
}

// metaStart is the location the subtask's meta names, for a first run.
func (s *Syncer) metaStart() (binlog.Location, error) {
	m := s.cfg.Meta
	if m.BinlogName == "" && m.BinlogGTID == "" {
		return binlog.Location{}, errs.New(CodeConfig, false,
			"sync: subtask %q has no checkpoint and its meta names no binlog-name or binlog-gtid to start from; set meta", s.cfg.Name)
	}
	loc := binlog.Location{Name: m.BinlogName, Pos: max(m.BinlogPos, config.MinBinlogPos), GTID: m.BinlogGTID}
	if m.BinlogName == "" {
		loc.Pos = 0
	}
	return loc, nil
}

// streamOpener is the relay reader while relay runs for the source, else a
// replication connection of the unit's own.
func (s *Syncer) streamOpener() binlog.StreamOpener {
	var opener binlog.StreamOpener
	if s.relay != nil {
		opener = s.relay()
	}
	if opener == nil {
		opener = upstream.NewOpener(s.src, s.source, s.flavor, s.serverID, s.sources)
	}
	return opener
}

// startWorkers prepares the configured number of apply workers on disp;
// each starts with its first job (dispatcher.launch). A worker that fails
// cancels ctx with its error; the caller waits for them all on the
// returned WaitGroup after cancelling ctx.
func (s *Syncer) startWorkers(ctx context.Context, cancel context.CancelCauseFunc, disp *dispatcher,
	safeUntil binlog.Location) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := 0; i < s.cfg.Syncer.WorkerCount; i++ {
		w := &applyWorker{id: i, db: s.target, escapes: s.escapes, store: s.store,
			batch: s.cfg.Syncer.Batch, stats: &s.stats, metrics: s.metrics, logger: s.logger, progress: disp.progress,
			floor: safeUntil, catchingUp: &disp.catchingUp, inflight: &disp.inflight}
		disp.workers = append(disp.workers, w)
	}
	disp.launch = func(w *applyWorker) {
		s.mu.Lock()
		w.in = make(chan job, workerQueue(s.cfg.Syncer.Batch))
		s.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.run(ctx); err != nil && ctx.Err() == nil {
				cancel(err)
			}
		}()
	}
	return &wg
}

// publishRunStart shows a starting run's dispatcher and start location in
// status.
func (s *Syncer) publishRunStart(disp *dispatcher, loc binlog.Location) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.disp = disp
	s.prog.checkpoint, s.prog.checkpointGTID = loc.String(), loc.GTID
	s.prog.binlog, s.prog.gtid = loc.String(), loc.GTID
	s.prog.read, s.prog.applied = loc, loc
}

// publishRunEnd clears what only a running run shows in status.
func (s *Syncer) publishRunEnd() {
	s.mu.Lock()
	s.disp = nil
	s.prog.eventTime = time.Time{}
	s.prog.shard, s.prog.shardSince = nil, time.Time{}
	s.mu.Unlock()
	s.metrics.setLag(0)
}

// newReader returns the read loop state of a run that starts at start and
// dispatches to disp.
func (s *Syncer) newReader(disp *dispatcher, start runStart) *reader {
	loc := start.cp.loc
	r := &reader{s: s, cfg: s.cfg, disp: disp, tables: newTableCache(s.target, s.router),
		tr: binlog.NewTracker(loc, start.gset), safeUntil: start.safeUntil, pendingDDL: start.cp.pendingDDL,
		points: start.points,
		saved:  loc, savedAt: time.Now(), applied: loc, marked: loc, markedAt: time.Now(),
		interval: time.Duration(s.cfg.Syncer.CheckpointFlushInterval) * time.Second}
	r.markGap = min(r.interval, markEvery)
	if s.rows != nil {
		r.exprs = s.newExprFilters()
	}
	r.ddl = s.newDDLApplier(r)
	r.ddl.collations = start.collations
	return r
}

// readError classifies a binlog read error: a TLS failure of the direct
// connection (dbconn.CodeTLS) stays as it is (not resumable), the source
// refusing the position (1236: purged or unknown binlog) is not resumable,
// anything else (lost connection, relay reader errors) is.
func readError(err error) error {
	if errs.Code(err) == dbconn.CodeTLS {
		return err // retrying cannot fix the TLS configuration
	}
	var myErr *mysql.MyError
	if errors.As(err, &myErr) && myErr.Code == 1236 {
		return errs.New(CodeReadBinlog, false, "sync: the source cannot send the binlog from the checkpoint: %w", err)
	}
	return errs.New(CodeReadBinlog, true, "sync: read binlog: %w", err)
}

// loop reads and handles events until ctx is done or an error occurs.
func (r *reader) loop(ctx context.Context, stream binlog.Streamer) error {
	return binlog.ReadLoopWake(ctx, stream, idleTick, r.silence, r.shard.wakeups(), func(ev *replication.BinlogEvent) error {
		if err := r.handle(ctx, ev); err != nil {
			return err
		}
		return r.afterEvent(ctx)
	}, func() error { return r.idle(ctx) }, readError)
}

// handle processes one event.
func (r *reader) handle(ctx context.Context, ev *replication.BinlogEvent) error {
	kind, err := r.tr.Track(ev)
	if err != nil {
		return errs.New(CodeReadBinlog, false, "sync: %w", err)
	}
	r.shard.afterTrack()
	switch kind {
	case binlog.EventHeartbeat:
		return nil
	case binlog.EventCommit:
		err = r.commit()
	case binlog.EventQuery:
		e := ev.Event.(*replication.QueryEvent)
		err = r.ddl.apply(ctx, ev, e, strings.TrimSpace(string(e.Query)))
	case binlog.EventRows:
		err = r.rows(ctx, ev, ev.Event.(*replication.RowsEvent))
	}
	if err != nil {
		return err
	}
	r.publish(ev.Header.Timestamp, false)
	return nil
}

// commit ends the current transaction: its GTID joins the set and its end
// becomes the latest boundary a checkpoint may name.
func (r *reader) commit() error {
	if err := r.tr.Commit(); err != nil {
		return errs.New(CodeReadBinlog, false, "sync: %w", err)
	}
	r.s.stats.transactions.Add(1)
	return nil
}

// endStatement ends a query event that runs nothing on the target. A
// statement of its own (DDL of a table that is not replicated, a trigger)
// is a transaction boundary; one inside a transaction (SAVEPOINT) is not:
// a boundary there would let a checkpoint, and with GTIDs the
// transaction's GTID, name half a transaction.
func (r *reader) endStatement() error {
	if r.tr.InTxn {
		return nil
	}
	return r.commit()
}

// rowsKind maps a rows event type to a change kind.
func rowsKind(t replication.EventType) (changeKind, bool) {
	switch k, _ := binlog.RowsEventKind(t); k {
	case binlog.RowsInsert:
		return kindInsert, true
	case binlog.RowsUpdate:
		return kindUpdate, true
	case binlog.RowsDelete:
		return kindDelete, true
	}
	return 0, false
}

// rows dispatches the row changes of one rows event.
func (r *reader) rows(ctx context.Context, ev *replication.BinlogEvent, e *replication.RowsEvent) error {
	kind, ok := rowsKind(ev.Header.EventType)
	if !ok || e.Table == nil {
		return nil
	}
	schema, table := string(e.Table.Schema), string(e.Table.Table)
	if !r.s.filter.TableAllowed(schema, table) || r.skipsOnlineRows(table) {
		return nil
	}
	src := tableName{Schema: schema, Table: table}
	if r.shard.skipRows(src) {
		return nil // held at a shard DDL, or applied before a re-sync
	}
	if skip, err := r.s.events.Skip(schema, table, kind.String(), ""); err != nil {
		return errs.New(CodeFilterError, false, "sync: %v at binlog %s; change the rule and resume the task",
			err, binlog.Location{Name: r.tr.Cur.Name, Pos: ev.Header.LogPos - ev.Header.EventSize})
	} else if skip {
		return nil
	}
	ti, err := r.tables.get(ctx, e.Table)
	if err != nil {
		return err
	}
	exprs, err := r.exprs.get(ctx, ti)
	if err != nil {
		return err
	}
	if exprs.Empty(kind.String()) {
		exprs = nil
	}
	if len(ti.Key) == 0 {
		r.s.warnNoKey(ti.Source)
	}
	if !r.safeUntil.IsZero() && r.tr.Cur.Compare(r.safeUntil) > 0 {
		r.s.logger.Info("sync unit leaves safe mode", zap.Stringer("at", r.tr.Cur), zap.Stringer("until", r.safeUntil))
		r.safeUntil = binlog.Location{}
	}
	safe := r.cfg.Syncer.SafeMode || !r.safeUntil.IsZero() || r.shard.resyncing(src)
	fkChecks := e.Flags&rowsNoForeignKeyChecks == 0
	loc := binlog.Location{Name: r.tr.Cur.Name, Pos: r.tr.Cur.Pos}
	step := 1
	if kind == kindUpdate {
		step = 2
	}
	// An ordered table's changes up to its table point are on the target,
	// the others are not: no safe mode for them (tablepoint.go).
	point, exact := rowPoint{}, false
	if ti.ordered() {
		if point, exact = r.points[ti.Source]; exact {
			safe = r.cfg.Syncer.SafeMode
		}
	}
	// One allocation for the event's changes; the rows event is the read
	// loop's alone, so its row images are converted in place. The changes
	// go to their workers as one job per worker, after the whole event
	// (dispatcher.add, flush); a big event is a bulk event.
	changes := make([]change, len(e.Rows)/step)
	bulk := len(changes) >= bulkEventRows
	r.disp.setEvent(len(changes))
	for i := 0; i+step <= len(e.Rows); i += step {
		if exact && !(rowPoint{loc: loc, row: i / step}).after(point) {
			continue
		}
		if exprs != nil {
			// Expression filters see the rows as the binlog holds them.
			var skip bool
			if kind == kindUpdate {
				skip, err = exprs.SkipUpdate(e.Rows[i], e.Rows[i+1])
			} else {
				skip, err = exprs.Skip(kind.String(), e.Rows[i], e.Rows[i])
			}
			if err != nil {
				return errs.New(CodeExprFilter, false, "sync: %w (binlog %s)", err,
					binlog.Location{Name: r.tr.Cur.Name, Pos: ev.Header.LogPos - ev.Header.EventSize})
			}
			if skip {
				r.s.stats.filtered[kind].Add(1)
				continue
			}
		}
		c := &changes[i/step]
		*c = change{kind: kind, table: ti, loc: loc, safe: safe, fkChecks: fkChecks, row: i / step}
		first, err := ti.ConvertRowInPlace(e.Rows[i])
		if err != nil {
			return err
		}
		switch kind {
		case kindInsert:
			c.after = first
		case kindDelete:
			c.before = first
		case kindUpdate:
			c.before = first
			if c.after, err = ti.ConvertRowInPlace(e.Rows[i+1]); err != nil {
				return err
			}
		}
		c.size = rowSize(c.before) + rowSize(c.after)
		if err := r.disp.add(ctx, c, bulk); err != nil {
			return err
		}
	}
	return r.disp.flush(ctx)
}

// warnNoKey adds a status warning, once per table, that a table without a
// primary or not-null unique key is matched on all columns.
func (s *Syncer) warnNoKey(t tableName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prog.warned == nil {
		s.prog.warned = map[tableName]bool{}
	}
	if s.prog.warned[t] {
		return
	}
	s.prog.warned[t] = true
	msg := fmt.Sprintf("table %s has no primary key or not-null unique key: rows are matched on all columns, "+
		"which is slow and cannot tell identical rows apart", t)
	s.prog.warnings = append(s.prog.warnings, msg)
	s.logger.Warn(msg)
}
