package stream

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/backoff"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/binlog/upstream"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/onlineddl"
)

// Error codes of a stream task's run (stable; shown in status).
const (
	// CodeTaskConfig: the stream config, source config or start location
	// cannot be used; not resumable.
	CodeTaskConfig = "stream-task-config"
	// CodeReadBinlog: reading the source's binlog failed.
	CodeReadBinlog = "stream-read-binlog"
	// CodeSchema: a table's columns could not be read from the source.
	CodeSchema = "stream-schema"
	// CodeEncode: a row or DDL could not be turned into an event; not
	// resumable.
	CodeEncode = "stream-encode"
	// CodeSink: the sink did not acknowledge a batch.
	CodeSink = "stream-sink"
	// CodeSinkNotReady: the sink's readiness probe fails; the stream stays
	// in checking and probes again with backoff.
	CodeSinkNotReady = "stream-sink-not-ready"
	// CodeCheckpoint: the checkpoint could not be saved.
	CodeCheckpoint = "stream-checkpoint"
	// CodeFillHistory: the fill-history snapshot failed.
	CodeFillHistory = "stream-fill-history"
)

// Batch limits of a task: one sink Write carries at most this many events
// and bytes (about: eventSize), also inside a transaction, so a stream
// holds at most three batches (one being read, one waiting, one being
// written), ~12 MiB at the defaults, whatever the size of a transaction.
// A BufferedSink may ask for more events per batch (the file sink: 4,096,
// the same bytes); the batches its syncer waits to see fsynced hold no
// events (the page cache holds what was written).
const (
	DefaultBatchEvents = 1000
	DefaultBatchBytes  = 4 << 20
)

// Delivery pacing of a task.
const (
	// maxBatch is the most events one fill-history sink Write carries.
	maxBatch = DefaultBatchEvents
	// batchDelay is how long events wait for more before they are written.
	batchDelay = 100 * time.Millisecond
	// saveEvery bounds how often the checkpoint is saved while it moves.
	saveEvery = time.Second
	// localSaveBatches: between Saves, SaveLocal runs once this many
	// batches' worth of events (8,000 at the defaults, 32,768 with the
	// file sink's limits) were acknowledged.
	localSaveBatches = 8
	// probeMin and probeMax pace the sink readiness probe of state checking.
	probeMin, probeMax = time.Second, 30 * time.Second
	// stopSaveTimeout bounds the checkpoint save after ctx is done.
	stopSaveTimeout = 10 * time.Second
)

// TaskConfig is what one run of a stream task needs.
type TaskConfig struct {
	Stream *config.StreamConfig
	// Source is the bound source's config, its password resolved.
	Source *config.SourceConfig
	// Opener returns the relay reader while relay runs for the source, else
	// nil; with a nil Opener (or one that returns nil) the task reads the
	// source over a replication connection of its own
	// (upstream.NewOpener, server id upstream.ServerID("stream/"+name,
	// source)).
	Opener func() binlog.StreamOpener
	// Shared, when set, gives the task its binlog reader through the
	// source's shared reader (a fanout.Hub of the reading mode: relay
	// true for the relay): own builds a private reader of the task's (as
	// without Shared), hub a reader of the same kind for the shared one
	// (over the relay, or a replication connection announcing server id
	// upstream.ServerID("stream-hub", source)). See pkg/binlog/fanout.
	Shared func(relay bool, own, hub func() (binlog.StreamOpener, error)) binlog.StreamOpener
	// DB is a connection pool to the source for table schemas, the
	// fill-history snapshot and the current position.
	DB *sql.DB
	// Sources is the worker's budget of source connections: the task
	// learns the source's flavor there (once per source) and counts its
	// own binlog dump there; nil: it asks the source itself and counts
	// nothing.
	Sources *dbconn.Budget
	// Sink takes the events. The task owns it: Run closes it.
	Sink Sink
	// Save persists a checkpoint (meta store and etcd mirror). It is called
	// after acknowledged batches at most once a second, at the end of each
	// acknowledged fill-history chunk, and when Run returns.
	Save func(ctx context.Context, cp Checkpoint) error
	// SaveLocal, when set, persists a checkpoint to the local meta store
	// only. Between two Saves it is called once localSaveBatches batches'
	// worth of events were acknowledged since the last save, so that a
	// kill -9 in a fast stream (a big transaction) replays at most that
	// many events rather than a second's worth, while the etcd mirror is
	// still written at most once a second.
	SaveLocal func(ctx context.Context, cp Checkpoint) error
	// Start is where to resume. A Location with neither file nor GTID set
	// means the config's start,
	// or the source's current position when that is empty too (or, with
	// snapshot: true, the location of the fill-history snapshot).
	Start  Checkpoint
	Logger *zap.Logger
	// SnapshotChunk is the number of rows fill-history reads per query and
	// acknowledges per progress save (0: DefaultSnapshotChunk).
	SnapshotChunk int
	// BatchEvents and BatchBytes bound one streaming batch (sink Write),
	// inside a transaction too (0: DefaultBatchEvents, DefaultBatchBytes).
	BatchEvents, BatchBytes int
}

// FillStatus is the fill-history progress shown in status.
type FillStatus struct {
	Tables     int   `json:"tables"`
	TablesDone int   `json:"tables-done"`
	Rows       int64 `json:"rows"`
}

// TaskStatus is a task's state as shown in status.
type TaskStatus struct {
	// State is StateChecking, StateFillHistory or StateStreaming while Run
	// runs, StateStopped once it returned.
	State string
	// Checkpoint is the location whose events the sink acknowledged.
	Checkpoint binlog.Location
	// Events counts the events the sink acknowledged in this run.
	Events int64
	// SkippedDDLs counts the statements of the binlog this run skipped as
	// never replicated (triggers, procedures, views...: pkg/ddlkind).
	SkippedDDLs int64
	// LagSeconds is how far the last acknowledged event is behind the
	// source's clock (0 when caught up).
	LagSeconds float64
	// FillHistory is the snapshot's progress, nil without fill-history.
	FillHistory *FillStatus
	// Err is the problem the task is retrying (the last failed sink probe
	// while checking), nil when there is none.
	Err error
}

// Task is one run of one stream task: it checks the sink, runs
// fill-history when asked and not yet done, then streams the source's
// binlog to the sink, saving a checkpoint after the sink acknowledged.
// Create it with NewTask, call Run once; Status may be called from any
// goroutine.
type Task struct {
	cfg     TaskConfig
	name    string
	tables  *filter.Tables
	enc     *Encoder
	schemas *SchemaCache
	// rules name the shadow and trash tables of online schema changes;
	// nil with online-ddl off.
	rules *onlineddl.Rules
	// rows are the expression filters of the stream's filters (nil: none).
	rows   *filter.RowFilter
	logger *zap.Logger

	mu     sync.Mutex
	status TaskStatus // guarded by mu
}

// NewTask checks cfg and builds the task; it connects to nothing.
func NewTask(cfg TaskConfig) (*Task, error) {
	if cfg.Stream == nil || cfg.Source == nil || cfg.DB == nil || cfg.Sink == nil || cfg.Save == nil {
		return nil, errs.New(CodeTaskConfig, false, "stream: a task needs its stream and source configs, a source connection, a sink and a save function")
	}
	enc, err := NewEncoder(cfg.Source.SourceID, cfg.Stream.EventFormat)
	if err != nil {
		return nil, errs.New(CodeTaskConfig, false, "stream %q: %w", cfg.Stream.Name, err)
	}
	rules, err := cfg.Stream.OnlineDDLRules()
	if err != nil {
		return nil, errs.New(CodeTaskConfig, false, "stream %q: online-ddl: %w", cfg.Stream.Name, err)
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	caseSensitive := cfg.Source.CaseSensitive
	return &Task{
		cfg:     cfg,
		name:    cfg.Stream.Name,
		tables:  filter.NewTables(cfg.Stream.BAList, caseSensitive),
		enc:     enc,
		rules:   rules,
		rows:    filter.NewRowFilter(cfg.Stream.StreamExprFilters(), caseSensitive),
		schemas: NewSchemaCache(cfg.DB),
		logger:  cfg.Logger,
		status:  TaskStatus{State: StateChecking, Checkpoint: cfg.Start.Location},
	}, nil
}

// batchEvents is the event limit of a streaming batch: the config's, else
// the sink's (BufferedSink.BatchLimits), else DefaultBatchEvents.
func (t *Task) batchEvents() int {
	if n := t.cfg.BatchEvents; n > 0 {
		return n
	}
	if s, ok := t.cfg.Sink.(BufferedSink); ok {
		if n, _ := s.BatchLimits(); n > 0 {
			return n
		}
	}
	return DefaultBatchEvents
}

// batchBytes is the byte limit of a streaming batch: the config's, else
// the sink's (BufferedSink.BatchLimits), else DefaultBatchBytes.
func (t *Task) batchBytes() int {
	if n := t.cfg.BatchBytes; n > 0 {
		return n
	}
	if s, ok := t.cfg.Sink.(BufferedSink); ok {
		if _, n := s.BatchLimits(); n > 0 {
			return n
		}
	}
	return DefaultBatchBytes
}

// Status returns the task's current status.
func (t *Task) Status() TaskStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.status
	if st.FillHistory != nil {
		fs := *st.FillHistory
		st.FillHistory = &fs
	}
	return st
}

// update changes the status under the lock.
func (t *Task) update(f func(st *TaskStatus)) {
	t.mu.Lock()
	f(&t.status)
	t.mu.Unlock()
}

// setState moves the status to state and logs the transition.
func (t *Task) setState(state, reason string) {
	t.update(func(st *TaskStatus) { st.State = state })
	t.logger.Info("stream task state", zap.String("state", state), zap.String("reason", reason))
}

// Run runs the task until ctx is done or it fails. It passes through
// StateChecking (the sink is probed, with backoff, until it is ready; the
// last probe error shows in Status), StateFillHistory (when the stream
// asks for a snapshot and Start.SnapshotDone is false) and StateStreaming.
// When ctx is done it saves the checkpoint of everything acknowledged and
// returns nil (or the save's error). A failure is returned as an
// errs.Coded error: resumable for connection and sink errors, not
// resumable for a bad config or a change it cannot encode. Run closes the
// sink before it returns.
func (t *Task) Run(ctx context.Context) (err error) {
	defer func() {
		if cerr := t.cfg.Sink.Close(); cerr != nil {
			t.logger.Warn("close the stream's sink", zap.Error(cerr))
		}
		t.update(func(st *TaskStatus) { st.State, st.LagSeconds = StateStopped, 0 })
		if err != nil {
			t.logger.Warn("stream task stopped with an error", zap.Error(err))
		}
	}()
	if err := t.check(ctx); err != nil {
		return stopErr(ctx, err)
	}
	flavor, err := t.flavor(ctx)
	if err != nil {
		return stopErr(ctx, err)
	}
	cp := t.cfg.Start
	if !t.cfg.Stream.Snapshot {
		cp.SnapshotDone = true
	}
	if !cp.SnapshotDone {
		t.setState(StateFillHistory, "snapshot: true and fill-history not done")
		if cp, err = t.fillHistory(ctx, cp); err != nil {
			return stopErr(ctx, err)
		}
	}
	if noLocation(cp.Location) {
		if cp.Location, err = t.startLocation(ctx); err != nil {
			return stopErr(ctx, err)
		}
		// Saved at once: a restart must not start at a later "current".
		if err := t.save(ctx, cp); err != nil {
			return stopErr(ctx, err)
		}
	}
	t.warnShadowTables(ctx, cp)
	t.setState(StateStreaming, "streaming from "+cp.Location.String())
	return t.stream(ctx, cp, flavor)
}

// noLocation reports whether l names no place to start: neither a file
// nor a GTID set (a GTID set alone is a start with enable-gtid).
func noLocation(l binlog.Location) bool { return l.Name == "" && l.GTID == "" }

// stopErr is what Run returns for err: nil when ctx is done (the
// checkpoint is saved by then), else err.
func stopErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// check probes the sink until it is ready or ctx is done, with backoff;
// each failure shows in Status as the current problem.
func (t *Task) check(ctx context.Context) error {
	t.setState(StateChecking, "probing the sink")
	b := backoff.New(probeMin, probeMax)
	for {
		err := t.cfg.Sink.Probe(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !errors.As(err, new(*errs.Coded)) {
			err = errs.Wrap(err, CodeSinkNotReady, "stream %q: the sink is not ready", t.name)
		}
		t.update(func(st *TaskStatus) { st.Err = err })
		if err == nil {
			return nil
		}
		d, ok := b.Wait(ctx)
		t.logger.Warn("stream sink is not ready; probing again", zap.Duration("in", d), zap.Error(err))
		if !ok {
			return ctx.Err()
		}
	}
}

// flavor is the source's flavor, from its config or asked from the source.
func (t *Task) flavor(ctx context.Context) (string, error) {
	if f := t.cfg.Source.Flavor; f != "" {
		return f, nil
	}
	var f string
	ep, err := dbconn.NewEndpoint(t.cfg.Source.From, dbconn.SourceRef(t.cfg.Source.SourceID))
	if err == nil {
		if t.cfg.Sources == nil {
			f, err = dbconn.DetectFlavor(ctx, t.cfg.DB)
		} else {
			f, err = t.cfg.Sources.Flavor(ctx, ep, "")
		}
	}
	if err != nil {
		return "", errs.Wrap(err, CodeReadBinlog, "stream %q: detect the flavor of source %q", t.name, t.cfg.Source.SourceID)
	}
	return f, nil
}

// startLocation is where a stream without a checkpoint starts: the
// config's start, else the source's current position.
func (t *Task) startLocation(ctx context.Context) (binlog.Location, error) {
	s := t.cfg.Stream.Start
	if s.BinlogName != "" || s.BinlogGTID != "" {
		loc := binlog.Location{Name: s.BinlogName, Pos: max(s.BinlogPos, config.MinBinlogPos), GTID: s.BinlogGTID}
		if s.BinlogName == "" {
			loc.Pos = 0
		}
		return loc, nil
	}
	loc, err := CurrentLocation(ctx, t.cfg.DB)
	if err != nil {
		return binlog.Location{}, errs.Wrap(err, CodeReadBinlog, "stream %q: find where to start", t.name)
	}
	t.logger.Info("stream starts at the source's current position", zap.Stringer("at", loc), zap.String("gtid", loc.GTID))
	return loc, nil
}

// opener is the relay reader while relay runs, else a replication
// connection of the task's own; with Shared, the source's shared reader
// of that kind.
func (t *Task) opener(flavor string) (binlog.StreamOpener, error) {
	relay := t.relayOpener()
	if t.cfg.Shared == nil {
		if relay != nil {
			return relay, nil
		}
		return t.directOpener(flavor, "stream/"+t.name)
	}
	kind := func(name string) func() (binlog.StreamOpener, error) {
		if relay == nil {
			return func() (binlog.StreamOpener, error) { return t.directOpener(flavor, name) }
		}
		return func() (binlog.StreamOpener, error) {
			if o := t.relayOpener(); o != nil {
				return o, nil
			}
			return nil, errs.New(CodeReadBinlog, true, "stream %q: the relay of source %q stopped; the stream reads the source when it resumes",
				t.name, t.cfg.Source.SourceID)
		}
	}
	return t.cfg.Shared(relay != nil, kind("stream/"+t.name), kind("stream-hub")), nil
}

// relayOpener is the relay reader while relay runs, else nil.
func (t *Task) relayOpener() binlog.StreamOpener {
	if t.cfg.Opener != nil {
		return t.cfg.Opener()
	}
	return nil
}

// directOpener is a replication connection to the source announcing the
// server id of name.
func (t *Task) directOpener(flavor, name string) (binlog.StreamOpener, error) {
	src := t.cfg.Source
	ep, err := dbconn.NewEndpoint(src.From, dbconn.SourceRef(src.SourceID))
	if err != nil {
		return nil, errs.Wrap(err, CodeTaskConfig, "stream %q", t.name)
	}
	// Not the source's server-id: a sync unit may dump with that one, and
	// the source drops a dump when another replica takes its id.
	return upstream.NewOpener(src, ep, flavor, upstream.ServerID(name, src.SourceID), t.cfg.Sources), nil
}

// save persists cp through the task's Save and shows it in status.
func (t *Task) save(ctx context.Context, cp Checkpoint) error {
	return t.saveWith(ctx, cp, t.cfg.Save)
}

// saveWith persists cp through save (Save or SaveLocal) and shows it in
// status.
func (t *Task) saveWith(ctx context.Context, cp Checkpoint, save func(context.Context, Checkpoint) error) error {
	cp.Time = time.Now()
	if err := save(ctx, cp); err != nil {
		if errs.Code(err) != errs.CodeInternal {
			return err
		}
		return errs.New(CodeCheckpoint, true, "stream %q: save checkpoint %s: %w", t.name, cp.Location, err)
	}
	t.update(func(st *TaskStatus) { st.Checkpoint = cp.Location })
	return nil
}

// saveOnStop saves cp after ctx is done: with ctx's values, not its
// cancellation, and a bound of its own.
func (t *Task) saveOnStop(ctx context.Context, cp Checkpoint) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopSaveTimeout)
	defer cancel()
	return t.save(sctx, cp)
}

// writeEvents writes events to the sink and counts them once it
// acknowledged them.
func (t *Task) writeEvents(ctx context.Context, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	wctx := withRetryReport(ctx, func(err error) { t.update(func(st *TaskStatus) { st.Err = err }) })
	if err := t.cfg.Sink.Write(wctx, events); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return t.sinkError(err, len(events))
	}
	t.update(func(st *TaskStatus) { st.Events += int64(len(events)) })
	return nil
}

// writeBuffered writes events to a buffered sink (not yet durable: the
// writer's syncer counts them once they are) and returns their mark.
func (t *Task) writeBuffered(ctx context.Context, bs BufferedSink, events []Event) (int64, error) {
	wctx := withRetryReport(ctx, func(err error) { t.update(func(st *TaskStatus) { st.Err = err }) })
	mark, err := bs.WriteBuffered(wctx, events)
	if err != nil {
		if ctx.Err() != nil {
			return 0, context.Cause(ctx)
		}
		return 0, t.sinkError(err, len(events))
	}
	return mark, nil
}

// sinkError classifies a failed Write: a Coded error keeps its flag,
// anything else is resumable (the sink retried inside Write already).
func (t *Task) sinkError(err error, n int) error {
	var c *errs.Coded
	if errors.As(err, &c) {
		return err
	}
	return errs.New(CodeSink, true, "stream %q: the sink did not acknowledge %d events: %w", t.name, n, err)
}

// CurrentLocation returns the source's current binlog position (SHOW
// MASTER STATUS) with the GTID position of exactly that point
// (BINLOG_GTID_POS on MariaDB; @@gtid_executed, read just after, on MySQL;
// empty without GTIDs), e.g. for ignore-untreated. Binlog must be on.
func CurrentLocation(ctx context.Context, db *sql.DB) (binlog.Location, error) {
	loc, err := upstream.MasterStatus(ctx, db)
	if err != nil {
		return binlog.Location{}, fmt.Errorf("stream: read the source's binlog position: %w", err)
	}
	var gtid sql.NullString
	err = db.QueryRowContext(ctx, "SELECT BINLOG_GTID_POS(?, ?)", loc.Name, loc.Pos).Scan(&gtid)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == erNoSuchFunction {
		err = db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_executed").Scan(&gtid) // MySQL
	}
	if err != nil {
		return binlog.Location{}, fmt.Errorf("stream: read the GTID position of the source's %s: %w", loc, err)
	}
	loc.GTID = gtid.String
	return loc, nil
}

// erNoSuchFunction is ER_SP_DOES_NOT_EXIST: MySQL has no BINLOG_GTID_POS.
const erNoSuchFunction = 1305
