package stream

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	tmysql "github.com/pingcap/tidb/pkg/parser/mysql"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions for the parser
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/binlog/upstream"
	"github.com/dmworker/dm-worker/pkg/ddlkind"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/onlineddl"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// batch is what the reader hands the writer: events to write in order and
// the checkpoint they complete. A batch holds at most the task's batch
// limits of events and bytes (DefaultBatchEvents, DefaultBatchBytes) and is
// cut at those limits inside a transaction too, so no part of the stream
// path holds a whole transaction.
type batch struct {
	events []Event
	// end is the end of the last complete transaction read before the
	// batch was cut (its events are in this batch or earlier ones): the
	// checkpoint once the batch is acknowledged. nil when it did not move.
	end *binlog.Location
	// txn is the progress into the open transaction (the one that starts
	// at the checkpoint) once the batch is acknowledged: its last event
	// in this batch or an earlier one. nil when no event of an open
	// transaction was read.
	txn *TxnProgress
	// osc is the online-DDL records at end (when end is set).
	osc []OnlineDDLRecord
	// ts is the header timestamp of the newest event read (0: none yet).
	ts uint32
	// caughtUp: the batch was cut because no event came for a while.
	caughtUp bool
	// chunks are the reader's arena chunks that only events of this
	// batch use: recycled once the sink wrote them (recycler).
	chunks [][]byte
}

// stream reads the binlog from cp.Location and delivers its changes until
// ctx is done or something fails. A reader goroutine (this one) decodes,
// filters, encodes and cuts batches; a writer goroutine writes them to the
// sink and moves the checkpoint. One batch waits between them at most, so
// memory stays bounded while reading overlaps writing.
func (t *Task) stream(ctx context.Context, cp Checkpoint, flavor string) error {
	gset, err := mysql.ParseGTIDSet(flavor, cp.Location.GTID)
	if err != nil {
		return errs.New(CodeTaskConfig, false, "stream %q: GTID set %q of the start location: %w", t.name, cp.Location.GTID, err)
	}
	osc, err := t.newOSCTracker(ctx, cp)
	if err != nil {
		return err
	}
	opener, err := t.opener(flavor)
	if err != nil {
		return err
	}
	defer opener.Close()
	st, err := opener.Open(ctx, cp.Location)
	if err != nil {
		return stopErr(ctx, t.readError(err, cp.Location))
	}
	t.logger.Info("stream reads binlog", zap.Stringer("from", cp.Location), zap.String("gtid", cp.Location.GTID))

	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ch := make(chan batch, 1)
	w := &writer{t: t, acked: cp, saved: cp, savedAt: time.Now()}
	var werr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if werr = w.run(ctx, ch); werr != nil {
			cancel(werr)
		}
	}()
	r := t.newReader(cp, gset, ch)
	r.osc = osc
	if _, ok := t.cfg.Sink.(BufferedSink); ok {
		// What a buffered sink wrote is in the file (the page cache):
		// the events' memory can be used again at once.
		r.recycle = newRecycler()
		r.arena.free = r.recycle.chunks
		w.recycle = r.recycle
	}
	if m, ok := st.(memoSource); ok {
		r.memos = m
	}
	if _, direct := opener.(*upstream.Opener); direct {
		r.silence = upstream.SilenceLimit
	}
	rerr := r.loop(rctx, st)
	close(ch)
	<-done

	var saveErr error
	if !sameAck(w.acked, w.saved) {
		saveErr = t.saveOnStop(ctx, w.acked)
	}
	switch {
	case ctx.Err() != nil:
		return saveErr
	case werr != nil:
		return werr
	case rerr != nil:
		return rerr
	}
	return saveErr
}

// readError classifies a binlog read error: coded errors (TLS, relay
// reader) keep their flag; the source refusing the position (1236: purged
// or unknown binlog) is not resumable; anything else (a lost connection)
// is.
func (t *Task) readError(err error, at binlog.Location) error {
	var c *errs.Coded
	if errors.As(err, &c) {
		return err
	}
	var myErr *mysql.MyError
	if errors.As(err, &myErr) && myErr.Code == 1236 && strings.Contains(myErr.Message, "which is not in the master's binlog") {
		// The source has not got this GTID set yet: after a failover to a
		// replica that is behind the stream, it will once it catches up.
		return errs.New(CodeReadBinlog, true,
			"stream %q: the source has not reached the stream's GTID set %q yet (a replica behind the stream after a failover?): %w; retried until it has",
			t.name, at.GTID, err)
	}
	if errors.As(err, &myErr) && myErr.Code == 1236 {
		return errs.New(CodeReadBinlog, false,
			"stream %q: the source cannot send the binlog from %s (gtid %q): %w; resume with ignore-untreated to start at the current position",
			t.name, at, at.GTID, err)
	}
	return errs.New(CodeReadBinlog, true, "stream %q: read binlog after %s: %w", t.name, at, err)
}

// writer writes batches to the sink and moves the checkpoint; only its
// goroutine uses it until run returns.
type writer struct {
	t       *Task
	acked   Checkpoint // everything up to acked (Location, then acked.Txn inside the next transaction) is acknowledged
	saved   Checkpoint // the last checkpoint saved (Save)
	savedAt time.Time
	// unsaved counts the events acknowledged since the last Save or
	// SaveLocal.
	unsaved int
	// recycle takes back what a buffered sink wrote (nil: nothing is
	// recycled).
	recycle *recycler
}

// sameAck reports whether a and b name the same acknowledged point.
func sameAck(a, b Checkpoint) bool {
	if a.Location != b.Location || (a.Txn == nil) != (b.Txn == nil) {
		return false
	}
	return a.Txn == nil || *a.Txn == *b.Txn
}

// BufferedSink is a Sink whose Write splits into writing and making
// durable (the file sink: write(2), then fsync). A stream task then writes
// each batch as it comes and a syncer goroutine makes what was written
// durable, one SyncTo at a time, each covering every batch written before
// it began (group commit), and acknowledges those batches: the stream does
// not wait for an fsync between two batches, and a checkpoint still never
// names an event that is not durable. A wrapper of a sink (the worker's
// metrics) implements it when the sink it wraps does.
type BufferedSink interface {
	Sink
	// WriteBuffered writes batch, retrying with backoff as Write does, and
	// returns its mark; it does not make it durable. It keeps nothing of
	// batch once it returned: the task reuses the events' memory.
	WriteBuffered(ctx context.Context, batch []Event) (mark int64, err error)
	// SyncTo returns once the batch of mark and every earlier one are
	// durable. It may run while WriteBuffered runs; an error means the
	// batches after the last durable mark may be lost: the task stops with
	// a resumable error and restarts from its checkpoint.
	SyncTo(mark int64) error
	// BatchLimits are the events and bytes of the largest streaming batch
	// the sink wants (0: DefaultBatchEvents, DefaultBatchBytes): larger
	// than the defaults where a sync costs the same whatever its size.
	BatchLimits() (events, bytes int)
}

// syncQueue bounds the batches a buffered sink's writer has written and
// not yet seen made durable (the page cache holds them, not the task).
const syncQueue = 16

// written is a batch a buffered sink wrote, waiting for its fsync: the
// batch without its events (the memory is free once they are written).
type written struct {
	b    batch
	n    int
	mark int64
}

// run writes every batch from in until in is closed or a write or save
// fails.
func (w *writer) run(ctx context.Context, in <-chan batch) error {
	if bs, ok := w.t.cfg.Sink.(BufferedSink); ok {
		return w.runBuffered(ctx, in, bs)
	}
	for b := range in {
		if err := w.t.writeEvents(ctx, b.events); err != nil {
			return err
		}
		if err := w.ack(ctx, b, len(b.events)); err != nil {
			return err
		}
	}
	return nil
}

// runBuffered is run for a BufferedSink: this goroutine writes, a syncer
// goroutine (syncLoop) fsyncs and acknowledges. It returns once both
// ended, with the first error of either.
func (w *writer) runBuffered(ctx context.Context, in <-chan batch, bs BufferedSink) error {
	queue := make(chan written, syncQueue)
	synced := make(chan error, 1)
	go func() { synced <- w.syncLoop(ctx, bs, queue) }()
	var (
		err  error
		mark int64 // of the last batch with events
	)
	syncErr, syncDone := error(nil), false
loop:
	for b := range in {
		select {
		case syncErr = <-synced: // the syncer failed: write no more
			syncDone = true
			break loop
		default:
		}
		// A batch without events (it only moves the checkpoint) waits for
		// the mark of the last one with events.
		if len(b.events) > 0 {
			if mark, err = w.t.writeBuffered(ctx, bs, b.events); err != nil {
				break
			}
			w.recycle.put(b)
		}
		select {
		case queue <- written{b: batch{end: b.end, txn: b.txn, osc: b.osc, ts: b.ts, caughtUp: b.caughtUp}, n: len(b.events), mark: mark}:
		case syncErr = <-synced:
			syncDone = true
			break loop
		}
	}
	close(queue)
	if !syncDone {
		syncErr = <-synced
	}
	if syncErr != nil {
		return syncErr
	}
	return err
}

// syncLoop makes the batches of queue durable and acknowledges them: one
// SyncTo for every batch waiting (the last one's mark), then each batch's
// ack in order.
func (w *writer) syncLoop(ctx context.Context, bs BufferedSink, queue <-chan written) error {
	var group []written
	for first := range queue {
		group = append(group[:0], first)
	drain:
		for {
			select {
			case more, ok := <-queue:
				if !ok {
					break drain
				}
				group = append(group, more)
			default:
				break drain
			}
		}
		if err := bs.SyncTo(group[len(group)-1].mark); err != nil {
			n := 0
			for _, g := range group {
				n += g.n
			}
			return w.t.sinkError(err, n)
		}
		for _, g := range group {
			w.t.update(func(st *TaskStatus) { st.Events += int64(g.n) })
			if err := w.ack(ctx, g.b, g.n); err != nil {
				return err
			}
		}
	}
	return nil
}

// ack moves the checkpoint past b, whose n events the sink acknowledged,
// and saves it when that is due. Once ctx is done it only moves it: the
// task saves it on its way out (saveOnStop).
func (w *writer) ack(ctx context.Context, b batch, n int) error {
	if b.end != nil {
		w.acked.Location, w.acked.OnlineDDL = *b.end, b.osc
	}
	w.acked.Txn = b.txn
	lag := 0.0
	if !b.caughtUp && b.ts > 0 {
		lag = max(0, time.Since(time.Unix(int64(b.ts), 0)).Seconds())
	}
	w.t.update(func(st *TaskStatus) {
		st.LagSeconds = lag
		st.Checkpoint = w.acked.Location
	})
	w.unsaved += n
	if sameAck(w.acked, w.saved) || ctx.Err() != nil {
		return nil
	}
	switch {
	case time.Since(w.savedAt) >= saveEvery:
		if err := w.t.save(ctx, w.acked); err != nil {
			return err
		}
		w.saved, w.savedAt, w.unsaved = w.acked, time.Now(), 0
	case w.t.cfg.SaveLocal != nil && w.unsaved >= localSaveBatches*w.t.batchEvents():
		if err := w.t.saveWith(ctx, w.acked, w.t.cfg.SaveLocal); err != nil {
			return err
		}
		w.unsaved = 0
	}
	return nil
}

// reader is the state of one run's read loop; only that goroutine uses it.
type reader struct {
	t      *Task
	out    chan<- batch
	parser *parser.Parser

	// tr follows the read location and the end of the last complete
	// transaction; sent is the end last handed to the writer.
	tr     *binlog.Tracker
	sent   binlog.Location
	lastTS uint32

	events []Event
	// arena holds the buffers of the events' keys and values; with a
	// buffered sink its chunks and the batches' event slices are
	// recycled once the sink wrote them (recycler). sharedArena holds
	// those of the events encoded for other streams too (sharedRows),
	// which are never recycled.
	arena, sharedArena arena
	recycle            *recycler
	bytes              int       // the size of events (eventSize)
	since              time.Time // when what the next batch holds began to wait
	// maxEvents and maxBytes cut a batch (inside a transaction too).
	maxEvents, maxBytes int

	// The open transaction: txnEvents counts its events (dropped ones
	// included), prog is the last of them (valid when hasProg), match
	// says whether it is the transaction skip names (0: not known yet,
	// 1: it is, -1: it is not).
	txnEvents int64
	prog      TxnProgress
	hasProg   bool
	match     int8
	// skip is the last acknowledged event of the transaction the run
	// resumes inside (Checkpoint.Txn), nil once that transaction ended or
	// when the run started at a boundary.
	skip *TxnProgress

	// osc follows online schema changes (nil with online-ddl off);
	// oscEnd are its records at the end of the last complete transaction
	// (tr.End()), oscDirty says whether it changed since.
	osc      *onlineddl.Tracker
	oscEnd   []OnlineDDLRecord
	oscDirty bool

	// memos, with a shared binlog reader, gives the memo of the event
	// read last: rows events are encoded once for every stream whose
	// encoding of them is the same (sharedRows). schemaKeys caches the
	// fingerprints of the schemas read (schemaKey).
	memos      memoSource
	schemaKeys map[*sqlschema.Table]string

	// silence: with a stream from the source (which sends heartbeats),
	// this long without any event means the connection is dead; 0 for
	// the relay, silent while the source is.
	silence time.Duration

	// exprs are the bound expression filters by table (exprfilter.go).
	exprs map[schemaTableName]exprBinding
}

// newReader is the reader of a run from cp (whose GTID set is gset) that
// hands its batches to out. From a checkpoint inside a transaction, the
// acknowledged point is the progress until the transaction's events come:
// a batch cut before them (an idle tick) keeps it.
func (t *Task) newReader(cp Checkpoint, gset mysql.GTIDSet, out chan<- batch) *reader {
	r := &reader{t: t, out: out, tr: binlog.NewTracker(cp.Location, gset), sent: cp.Location,
		parser: parser.New(), maxEvents: t.batchEvents(), maxBytes: t.batchBytes(), oscEnd: cp.OnlineDDL}
	r.events = make([]Event, 0, r.maxEvents)
	if cp.Txn != nil {
		skip := *cp.Txn
		r.skip, r.prog, r.hasProg = &skip, skip, true
		t.logger.Info("stream resumes inside a transaction: its events up to the last acknowledged one are dropped",
			zap.Stringer("txn-start", cp.Location), zap.String("txn-gtid", skip.GTID), zap.Stringer("last-acked", &skip))
	}
	return r
}

// loop reads and handles events until ctx is done or something fails;
// when no event comes for a tick, everything read goes to the writer
// (which also saves the checkpoint when it is due).
func (r *reader) loop(ctx context.Context, st binlog.Streamer) error {
	return binlog.ReadLoop(ctx, st, batchDelay, r.silence, func(ev *replication.BinlogEvent) error {
		if err := r.handle(ctx, ev); err != nil {
			return err
		}
		return r.maybeCut(ctx)
	}, func() error { return r.cut(ctx, true) }, func(err error) error { return r.t.readError(err, r.tr.End()) })
}

// maybeCut cuts a batch when it is full, when its events waited long
// enough, or when only the checkpoint moved (changes of tables the stream
// does not select) for a while.
func (r *reader) maybeCut(ctx context.Context) error {
	n := len(r.events)
	if n == 0 && r.tr.EndIs(r.sent) {
		return nil
	}
	r.waiting()
	switch {
	case n >= r.maxEvents || r.bytes >= r.maxBytes:
	case n > 0 && time.Since(r.since) >= batchDelay:
	case n == 0 && time.Since(r.since) >= saveEvery:
	default:
		return nil
	}
	return r.cut(ctx, false)
}

// cut hands the events read so far and the checkpoint they complete to
// the writer, waiting while it still has the previous batch.
func (r *reader) cut(ctx context.Context, idle bool) error {
	b := batch{events: r.events, ts: r.lastTS, caughtUp: idle}
	if !r.tr.EndIs(r.sent) {
		end := r.tr.End()
		b.end, r.sent, b.osc = &end, end, r.oscEnd
	}
	if r.hasProg {
		p := r.prog
		b.txn = &p
	}
	if len(b.events) > 0 {
		if r.recycle != nil {
			b.chunks = r.arena.seal()
			r.events = r.recycle.events(r.maxEvents)
		} else {
			r.events = make([]Event, 0, r.maxEvents)
		}
		r.bytes = 0
	}
	r.since = time.Time{}
	select {
	case r.out <- b:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if r.arena.held {
		r.arena.hold(r.t.enc) // the rest of a rows event is encoded after the wait
	}
	return nil
}

// waiting notes that the next batch has something from now on.
func (r *reader) waiting() {
	if r.since.IsZero() {
		r.since = time.Now()
	}
}

// handle processes one event.
func (r *reader) handle(ctx context.Context, ev *replication.BinlogEvent) error {
	kind, err := r.tr.Track(ev)
	if err != nil {
		return errs.New(CodeReadBinlog, false, "stream %q: at binlog %s: %w", r.t.name, r.tr.Cur, err)
	}
	if kind == binlog.EventHeartbeat {
		return nil
	}
	if ts := ev.Header.Timestamp; ts > 0 {
		r.lastTS = ts
	}
	switch kind {
	case binlog.EventCommit:
		return r.commit()
	case binlog.EventQuery:
		e := ev.Event.(*replication.QueryEvent)
		if err := r.ddl(ctx, ev, e, strings.TrimSpace(string(e.Query))); err != nil {
			return err
		}
		if !r.tr.InTxn {
			return r.commit()
		}
	case binlog.EventRows:
		return r.rows(ctx, ev, ev.Event.(*replication.RowsEvent))
	}
	return nil
}

// commit ends the current transaction: its end becomes the checkpoint once
// everything before it is acknowledged. The transaction a resume started
// inside ends here too: later ones are delivered whole.
func (r *reader) commit() error {
	if r.skip != nil && (r.skip.GTID == "" || r.skip.GTID == r.tr.GTID) {
		if r.match != 1 {
			r.t.logger.Warn("stream resumed inside a transaction but read none of its events before its end",
				zap.Stringer("at", r.tr.Cur), zap.String("gtid", r.tr.GTID), zap.Stringer("last-acked", r.skip))
		}
		r.skip = nil
	}
	r.txnEvents, r.hasProg, r.match = 0, false, 0
	if err := r.tr.Commit(); err != nil {
		return errs.New(CodeReadBinlog, false, "stream %q: %w", r.t.name, err)
	}
	if r.osc != nil {
		r.commitOSC()
	}
	return nil
}

// position is the Position of row i of the event ev.
func (r *reader) position(ev *replication.BinlogEvent, i int) Position {
	h := ev.Header
	return Position{File: r.tr.Cur.Name, Pos: h.LogPos, Row: i, GTID: r.tr.GTID, ServerID: h.ServerID, TsMs: int64(h.Timestamp) * 1000}
}

// filterEvents maps a rows event kind to its filter event.
var filterEvents = map[binlog.RowsKind]string{binlog.RowsInsert: filter.EvInsert, binlog.RowsUpdate: filter.EvUpdate, binlog.RowsDelete: filter.EvDelete}

// rowOps maps a rows event kind to the event op.
var rowOps = map[binlog.RowsKind]string{binlog.RowsInsert: "c", binlog.RowsUpdate: "u", binlog.RowsDelete: "d"}

// rows turns the rows of one rows event of a selected table into events.
//
// The event, its RowsEvent and the row images in e.Rows are read only:
// another stream task of the same source may read the same decoded event
// (a shared binlog reader fans one decode out to many streams), so
// nothing here or in the encoder changes them in place; every value that
// needs changing (BINARY padding, charset conversion) is copied into the
// event's own buffers.
func (r *reader) rows(ctx context.Context, ev *replication.BinlogEvent, e *replication.RowsEvent) error {
	kind, ok := binlog.RowsEventKind(ev.Header.EventType)
	if !ok || e.Table == nil {
		return nil
	}
	db, table := string(e.Table.Schema), string(e.Table.Table)
	if !r.t.allowedTable(db, table) {
		return nil
	}
	cached, err := r.t.schemas.Table(ctx, db, table)
	if err != nil {
		if errors.Is(err, ErrTableNotFound) {
			return errs.New(CodeSchema, false, "stream %q: rows of %s.%s at binlog %s: %w; resume with ignore-untreated to skip past them",
				r.t.name, db, table, r.tr.Cur, err)
		}
		return errs.Wrap(err, CodeSchema, "stream %q: rows of %s.%s at binlog %s", r.t.name, db, table, r.tr.Cur)
	}
	exprs, err := r.exprRows(db, table, cached, e.Table)
	if err != nil {
		return errs.New(CodeExprFilter, false, "%w at binlog %s; fix the rule and resume, or resume with ignore-untreated", err, r.tr.Cur)
	}
	if exprs.Empty(filterEvents[kind]) {
		exprs = nil
	}
	s, err := fitSchema(cached, e.Table)
	if err != nil {
		return errs.New(CodeSchema, false, "stream %q: rows at binlog %s: %w", r.t.name, r.tr.Cur, err)
	}
	op := rowOps[kind]
	step := 1
	if kind == binlog.RowsUpdate {
		step = 2
	}
	r.decideMatch()
	// A stream whose expression filters judge these rows encodes them
	// itself: a shared encoding holds every row of the event.
	if r.memos != nil && exprs == nil && (r.match != 1 || r.skip == nil) {
		if done, err := r.sharedRows(ctx, ev, e, cached, s, kind, op, step); done || err != nil {
			return err
		}
	}
	r.arena.hold(r.t.enc)
	defer r.arena.release()
	for i := 0; i+step <= len(e.Rows); i += step {
		if r.acknowledgedRow(ev.Header.LogPos, i/step) {
			continue // not even encoded: a resume inside a big transaction skips fast
		}
		if exprs != nil {
			// Rows the stream's filters match give no event.
			var skip bool
			if kind == binlog.RowsUpdate {
				skip, err = exprs.SkipUpdate(e.Rows[i], e.Rows[i+1])
			} else {
				skip, err = exprs.Skip(filterEvents[kind], e.Rows[i], e.Rows[i])
			}
			if err != nil {
				return errs.New(CodeExprFilter, false, "stream %q: row %d of the rows event at binlog %s: %w; fix the rule "+
					"and resume, or resume with ignore-untreated", r.t.name, i/step, r.tr.Cur, err)
			}
			if skip {
				continue
			}
		}
		first, second, two, err := r.encodeRow(&r.arena, s, kind, op, e.Rows, i, r.position(ev, i/step))
		if err != nil {
			return errs.New(CodeEncode, false, "stream %q: row %d of the rows event at binlog %s: %w", r.t.name, i/step, r.tr.Cur, err)
		}
		m := mark{file: r.tr.Cur.Name, pos: ev.Header.LogPos, row: i / step, del: two}
		if err := r.add(ctx, first, m); err != nil {
			return err
		}
		if two {
			m.del = false
			if err := r.add(ctx, second, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// encodeRow encodes row i of a rows event of kind: one event, or two
// (second set, two true) for an update that changes the key
// (Encoder.Update).
func (r *reader) encodeRow(a *arena, s *sqlschema.Table, kind binlog.RowsKind, op string, rows [][]any, i int, pos Position) (first, second Event, two bool, err error) {
	switch kind {
	case binlog.RowsUpdate:
		return r.t.enc.update(a, s, rows[i], rows[i+1], pos)
	case binlog.RowsDelete:
		first, err = r.t.enc.row(a, s, op, rows[i], nil, pos)
	default:
		first, err = r.t.enc.row(a, s, op, nil, rows[i], pos)
	}
	return first, Event{}, false, err
}

// mark is an event's place in its transaction: the binlog coordinates of
// its identity, del for the delete half of a key-changing update (which
// comes before the create half of the same row).
type mark struct {
	file string
	pos  uint32
	row  int
	del  bool
}

// notAfter reports whether m is p's event or comes before it in p's
// transaction (same file).
func (m mark) notAfter(p *TxnProgress) bool {
	switch {
	case m.pos != p.Pos:
		return m.pos < p.Pos
	case m.row != p.Row:
		return m.row < p.Row
	}
	return m.del || !p.Delete
}

// add appends an event of the open transaction (or of a statement outside
// one) to the next batch, cutting the batch at the event or byte limit
// (also in the middle of a transaction: the checkpoint then names the
// transaction's start and this event). An event the sink acknowledged
// before a resume (skip) is dropped.
func (r *reader) add(ctx context.Context, ev Event, m mark) error {
	r.txnEvents++
	r.decideMatch()
	if r.match == 1 && r.skip != nil {
		drop := r.txnEvents <= r.skip.Events
		if m.file == r.skip.File {
			drop = m.notAfter(r.skip)
			if m.pos == r.skip.Pos && m.row == r.skip.Row && m.del == r.skip.Delete {
				// The rows before it were not counted (acknowledgedRow).
				r.txnEvents = r.skip.Events
			}
		}
		if drop {
			return nil
		}
	}
	r.prog = TxnProgress{File: m.file, Pos: m.pos, Row: m.row, Delete: m.del, GTID: r.tr.GTID, Events: r.txnEvents}
	r.hasProg = true
	r.events = append(r.events, ev)
	r.bytes += eventSize(ev)
	r.waiting()
	if len(r.events) >= r.maxEvents || r.bytes >= r.maxBytes {
		return r.cut(ctx, false)
	}
	return nil
}

// decideMatch decides, at the open transaction's first event (or rows of
// a selected table), whether it is the transaction skip names: the one
// with skip's GTID, or without GTIDs the first one read.
func (r *reader) decideMatch() {
	if r.match != 0 {
		return
	}
	r.match = -1
	if r.skip != nil && (r.skip.GTID == "" || r.skip.GTID == r.tr.GTID) {
		r.match, r.prog, r.hasProg = 1, *r.skip, true
	}
}

// acknowledgedRow reports whether the row row of the rows event ending at
// pos comes before the row of skip's event in the transaction a resume
// started inside: all its events were acknowledged, so it needs no
// encoding. The count of the transaction's events resumes from skip's at
// skip's event.
func (r *reader) acknowledgedRow(pos uint32, row int) bool {
	if r.match != 1 || r.skip == nil || r.tr.Cur.Name != r.skip.File {
		return false
	}
	return pos < r.skip.Pos || pos == r.skip.Pos && row < r.skip.Row
}

// eventSize is about how many bytes ev holds.
func eventSize(ev Event) int {
	const overhead = 128 // the Event struct and slice headers
	return len(ev.ID) + len(ev.Key) + len(ev.Value) + len(ev.DB) + len(ev.Table) + len(ev.Op) + overhead
}

// ddl turns a query event that is not BEGIN/COMMIT into a DDL event when
// it is DDL of a selected table or database, and forgets the cached
// schemas of the tables it names.
func (r *reader) ddl(ctx context.Context, ev *replication.BinlogEvent, e *replication.QueryEvent, query string) error {
	schema := string(e.Schema)
	if kind, ok := ddlkind.Skipped(query); ok {
		// Triggers, procedures, views...: not a change of any table's rows
		// or columns (a trigger's writes are rows of the binlog), and the
		// parser does not know their syntax.
		r.t.logger.Info("stream skips a statement that is not replicated", zap.String("kind", string(kind)),
			zap.Stringer("at", r.tr.Cur), zap.String("query", clip(query)))
		r.t.update(func(st *TaskStatus) { st.SkippedDDLs++ })
		return nil
	}
	// Parsed in the quoting mode the statement was written in.
	var pmode tmysql.SQLMode
	if binlog.ANSIQuotes(e.StatusVars) {
		pmode = tmysql.ModeANSIQuotes
	}
	r.parser.SetSQLMode(pmode)
	nodes, targets, isDDL, err := ddlTargets(r.parser, schema, query)
	if err != nil {
		if schema == "" || !ddlVerb(query) {
			r.t.logger.Debug("stream skips a statement of the binlog it cannot parse", zap.Stringer("at", r.tr.Cur),
				zap.String("query", clip(query)), zap.Error(err))
			return nil
		}
		// DDL in MariaDB syntax the parser does not know: attributed to
		// the default schema, whose cached tables are all forgotten.
		r.t.logger.Warn("stream cannot parse a DDL statement of the binlog; it is delivered as a DDL of its default schema",
			zap.Stringer("at", r.tr.Cur), zap.String("schema", schema), zap.String("query", clip(query)), zap.Error(err))
		targets, isDDL = []ddlTarget{{db: schema}}, true
	}
	if !isDDL {
		return nil
	}
	for _, tg := range targets {
		r.t.schemas.Invalidate(tg.db, tg.table)
	}
	if r.osc != nil && nodes != nil {
		if handled, err := r.onlineDDL(ctx, ev, schema, nodes, targets, query); handled || err != nil {
			return err
		}
	}
	var first *ddlTarget
	for i, tg := range targets {
		allowed := r.t.tables.SchemaAllowed(tg.db)
		if tg.table != "" {
			allowed = r.t.allowedTable(tg.db, tg.table)
		}
		if allowed && first == nil {
			first = &targets[i]
		}
	}
	if first == nil {
		return nil
	}
	event, err := r.t.enc.DDL(first.db, first.table, query, r.position(ev, 0))
	if err != nil {
		return errs.New(CodeEncode, false, "stream %q: DDL at binlog %s (%s): %w", r.t.name, r.tr.Cur, clip(query), err)
	}
	return r.add(ctx, event, mark{file: r.tr.Cur.Name, pos: ev.Header.LogPos})
}

// ddlVerb reports whether a statement starts like DDL (CREATE, ALTER,
// DROP, RENAME, TRUNCATE).
func ddlVerb(query string) bool {
	words := strings.Fields(strings.TrimLeft(query, " \t\r\n("))
	if len(words) == 0 {
		return false
	}
	switch strings.ToUpper(words[0]) {
	case "CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE":
		return true
	}
	return false
}

// ddlTarget is a database (table "") or table a DDL statement names.
type ddlTarget struct{ db, table string }

// ddlTargets parses a query event's statement(s) and returns them and the
// databases and tables they name, in order; isDDL is false for statements
// that are not DDL (grants, SAVEPOINT, ...). Unqualified tables are in
// schema.
func ddlTargets(p *parser.Parser, schema, query string) (nodes []ast.StmtNode, targets []ddlTarget, isDDL bool, err error) {
	nodes, _, err = p.Parse(query, "", "")
	if err != nil {
		return nil, nil, false, err
	}
	for _, n := range nodes {
		switch n := n.(type) {
		case *ast.CreateDatabaseStmt:
			targets = append(targets, ddlTarget{db: n.Name.O})
		case *ast.DropDatabaseStmt:
			targets = append(targets, ddlTarget{db: n.Name.O})
		case *ast.AlterDatabaseStmt:
			db := n.Name.O
			if n.AlterDefaultDatabase {
				db = schema
			}
			targets = append(targets, ddlTarget{db: db})
		case ast.DDLNode:
			v := &tableCollector{schema: schema}
			n.Accept(v)
			targets = append(targets, v.tables...)
		default:
			continue
		}
		isDDL = true
	}
	return nodes, targets, isDDL, nil
}

// tableCollector collects the tables an AST names, qualified.
type tableCollector struct {
	schema string
	tables []ddlTarget
}

// Enter records table names.
func (v *tableCollector) Enter(n ast.Node) (ast.Node, bool) {
	if t, ok := n.(*ast.TableName); ok {
		db := t.Schema.O
		if db == "" {
			db = v.schema
		}
		v.tables = append(v.tables, ddlTarget{db: db, table: t.Name.O})
	}
	return n, false
}

// Leave continues the walk.
func (v *tableCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// clip shortens a statement for logs and errors.
func clip(q string) string {
	const limit = 200
	if len(q) <= limit {
		return q
	}
	return q[:limit] + "…"
}
