package syncer

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha/shardddl"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/binlog/upstream"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/unit"
)

// closeTimeout bounds the checkpoint flush of Close.
const closeTimeout = 10 * time.Second

// Syncer is the sync unit of one subtask.
type Syncer struct {
	src     *config.SourceConfig
	relay   func() binlog.StreamOpener
	logger  *zap.Logger
	metrics *unitMetrics
	stats   counters

	// Set by New and Update, read by runs; the subtask never calls Update
	// concurrently with Process/Resume.
	cfg      *config.SubTaskConfig
	filter   *filter.Tables
	events   *filter.EventFilter
	router   *filter.Router
	rows     *filter.RowFilter // expression filters; nil: none
	serverID uint32
	// shardCoord coordinates the shard DDL locks of a sharding task
	// (UseShardDDL, before Process).
	shardCoord *shardddl.Coordinator
	budget     *dbconn.Budget // target connections (UseConnBudget, before Init); nil: a pool of its own
	sources    *dbconn.Budget // source connections and facts (UseSourceBudget, before Init); nil: none

	// Set by Init; used by runs, Close and Kill (never concurrently).
	target *sql.DB
	// escapes is how the target's sessions read string literals
	// (targetEscapes), for the batches' text (literal.go).
	escapes escapeMode
	source  *dbconn.Endpoint // how the unit reaches the source (TLS included)
	store   *checkpointStore
	flavor  string
	// unsaved is a checkpoint a run reached (all its changes applied) but
	// could not save before it ended; the next run or Close saves it.
	unsaved *savedCheckpoint

	mu sync.Mutex
	// guarded by mu:
	prog   progress
	disp   *dispatcher // the running run's, for queue depth; nil between runs
	stuck  *stuckDDL
	handle *handleOp
}

var (
	_ unit.Unit             = (*Syncer)(nil)
	_ unit.ErrorHandler     = (*Syncer)(nil)
	_ unit.CheckpointHolder = (*Syncer)(nil)
)

// New creates the sync unit of a subtask. relay returns the relay reader
// while relay runs for the source, else nil (then the unit reads from the
// source itself). metrics may be nil.
func New(cfg *config.SubTaskConfig, src *config.SourceConfig, relay func() binlog.StreamOpener,
	metrics *Metrics, logger *zap.Logger) (*Syncer, error) {
	if cfg == nil || src == nil {
		return nil, errs.New(CodeConfig, false, "sync: subtask and source configs are required")
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	s := &Syncer{
		src:   src,
		relay: relay,
		// The subtask's logger already names the source, task and unit.
		logger:  logger,
		metrics: &unitMetrics{m: metrics, task: cfg.Name, source: cfg.SourceID},
	}
	if err := s.configure(cfg); err != nil {
		return nil, err
	}
	s.serverID = src.ServerID
	if s.serverID == 0 {
		s.serverID = upstream.ServerID(cfg.Name, cfg.SourceID)
	}
	return s, nil
}

// configure installs cfg and the filters built from it.
func (s *Syncer) configure(cfg *config.SubTaskConfig) error {
	c := *cfg
	if c.Syncer.WorkerCount < 1 {
		c.Syncer.WorkerCount = 1
	}
	if c.Syncer.Batch < 1 {
		c.Syncer.Batch = 1
	}
	if c.Syncer.CheckpointFlushInterval < 1 {
		c.Syncer.CheckpointFlushInterval = 1
	}
	if c.MetaSchema == "" {
		return errs.New(CodeConfig, false, "sync: subtask %q has no meta-schema for its checkpoints", c.Name)
	}
	sel, err := filter.NewSelection(&c, s.src)
	if err != nil {
		return errs.New(CodeConfig, false, "sync: %w", err)
	}
	s.cfg = &c
	s.filter, s.events, s.router, s.rows = sel.Tables, sel.Events, sel.Router, sel.Rows
	return nil
}

// Type is unit.TypeSync.
func (s *Syncer) Type() unit.Type { return unit.TypeSync }

// Init connects to the target, creates the checkpoint tables and learns the
// source's flavor.
func (s *Syncer) Init(ctx context.Context) error {
	if s.target != nil {
		if err := s.target.Close(); err != nil {
			s.logger.Warn("close target pool of a failed Init", zap.Error(err))
		}
		s.target = nil
	}
	source, err := dbconn.NewEndpoint(s.src.From, dbconn.SourceRef(s.src.SourceID))
	if err != nil {
		return errs.New(CodeConfig, false, "sync: %w", err)
	}
	target, err := dbconn.NewEndpoint(s.cfg.TargetDatabase, dbconn.TargetRef(s.cfg.Name))
	if err != nil {
		return errs.New(CodeConfig, false, "sync: %w", err)
	}
	for name, v := range s.cfg.TargetDatabase.Session {
		if strings.EqualFold(name, "time_zone") {
			s.logger.Warn("target-database.session.time_zone is overridden: the sync unit writes TIMESTAMP values in UTC",
				zap.String("time_zone", v))
		}
	}
	db, err := s.openTarget(target, s.cfg.Syncer.WorkerCount+4, "")
	if err != nil {
		return errs.New(CodeConfig, false, "sync: %w", err)
	}
	iso, err := readCommittedVar(ctx, db)
	if err != nil {
		return closeAfter(db, errs.Wrap(err, CodeConfig, "sync: read the target's binlog format"))
	}
	if iso != "" {
		_ = db.Close() // reopened with the isolation level in every session
		if db, err = s.openTarget(target, s.cfg.Syncer.WorkerCount+4, iso); err != nil {
			return errs.New(CodeConfig, false, "sync: %w", err)
		}
	} else {
		s.logger.Info("the target writes a statement binlog: the sync unit keeps its default isolation level")
	}
	escapes, err := targetEscapes(ctx, db)
	if err != nil {
		return closeAfter(db, errs.Wrap(err, CodeConfig, "sync: read the target session's sql_mode"))
	}
	store := &checkpointStore{db: db, schema: s.cfg.MetaSchema, task: s.cfg.Name, source: s.cfg.SourceID}
	if err := store.prepare(ctx); err != nil {
		return closeAfter(db, err)
	}
	flavor, err := s.sources.Flavor(ctx, source, s.src.Flavor)
	if err != nil {
		return closeAfter(db, errs.Wrap(err, CodeReadBinlog, "sync: source %s", s.cfg.SourceID))
	}
	s.target, s.store, s.flavor, s.source, s.escapes = db, store, flavor, source, escapes
	if err := s.publishShardGroups(ctx); err != nil {
		return err
	}
	return nil
}

func closeAfter(db *sql.DB, err error) error {
	_ = db.Close() // the error being returned matters more
	return err
}

// IsFreshTask reports whether no checkpoint was saved yet.
func (s *Syncer) IsFreshTask(ctx context.Context) (bool, error) {
	if s.store == nil {
		return false, errs.New(CodeConfig, false, "sync: IsFreshTask before Init")
	}
	ok, err := s.store.exists(ctx)
	return !ok, err
}

// Process replicates until ctx is cancelled or replication fails.
func (s *Syncer) Process(ctx context.Context) unit.Result { return s.result(ctx, s.run(ctx)) }

// Resume continues from the checkpoint; same contract as Process.
func (s *Syncer) Resume(ctx context.Context) unit.Result { return s.result(ctx, s.run(ctx)) }

func (s *Syncer) result(ctx context.Context, err error) unit.Result {
	return unit.Outcome(ctx, err, s.logger, "sync unit")
}

// Pause does nothing: a run releases its binlog stream and workers when it
// returns; the target pool is kept for Resume.
func (s *Syncer) Pause() {}

// Update applies new syncer tuning (worker-count, batch, safe-mode,
// checkpoint-flush-interval) in place; any other change returns
// unit.ErrUpdateUnsupported.
func (s *Syncer) Update(_ context.Context, cfg *config.SubTaskConfig) error {
	a, b := *s.cfg, *cfg
	a.Syncer, b.Syncer = config.SyncerConfig{}, config.SyncerConfig{}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil || !reflect.DeepEqual(ja, jb) {
		return fmt.Errorf("sync: only the syncer settings can change in place: %w", unit.ErrUpdateUnsupported)
	}
	return s.configure(cfg)
}

// Close saves the checkpoint the last run reached and closes connections.
func (s *Syncer) Close() {
	if s.unsaved != nil && s.store != nil {
		// Close has no caller context; bound the final flush instead.
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		if err := s.saveCheckpoint(ctx, *s.unsaved); err != nil {
			s.logger.Warn("flush checkpoint on close", zap.Error(err))
		}
		cancel()
	}
	s.Kill()
}

// Kill closes connections without saving anything.
func (s *Syncer) Kill() {
	if s.target != nil {
		if err := s.target.Close(); err != nil {
			s.logger.Warn("close target pool", zap.Error(err))
		}
		s.target = nil
	}
	s.metrics.forget()
}

// saveCheckpoint writes cp and shows it in status.
func (s *Syncer) saveCheckpoint(ctx context.Context, cp savedCheckpoint) error {
	if err := s.store.save(ctx, cp); err != nil {
		return err
	}
	s.mu.Lock()
	s.prog.checkpoint, s.prog.checkpointGTID = cp.loc.String(), cp.loc.GTID
	s.mu.Unlock()
	if s.unsaved != nil && s.unsaved.loc.Compare(cp.loc) <= 0 {
		s.unsaved = nil
	}
	return nil
}

// CheckpointLocation is the saved checkpoint, which a paused subtask
// resumes from (unit.CheckpointHolder).
func (s *Syncer) CheckpointLocation() (binlog.Location, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prog.checkpoint == "" {
		return binlog.Location{}, false
	}
	loc, err := binlog.ParseLocation(s.prog.checkpoint)
	if err != nil {
		return binlog.Location{}, false
	}
	loc.GTID = s.prog.checkpointGTID
	return loc, true
}

// Status returns a Status.
func (s *Syncer) Status() any {
	s.mu.Lock()
	st := Status{
		Binlog: s.prog.binlog, BinlogGTID: s.prog.gtid,
		Checkpoint: s.prog.checkpoint, CheckpointGTID: s.prog.checkpointGTID,
		SafeMode: s.prog.safeMode, Warnings: append([]string(nil), s.prog.warnings...),
		StuckOn: s.prog.stuckOn,
	}
	if w := s.shardWarningLocked(); w != "" {
		st.Warnings = append(st.Warnings, w)
	}
	if !s.prog.eventTime.IsZero() {
		st.LagSeconds = max(0, time.Since(s.prog.eventTime).Seconds())
	}
	if s.disp != nil {
		st.QueueDepth = s.disp.queueDepth()
	}
	s.mu.Unlock()
	st.Inserts = s.stats.rows[kindInsert].Load()
	st.Updates = s.stats.rows[kindUpdate].Load()
	st.Deletes = s.stats.rows[kindDelete].Load()
	st.FilteredInserts = s.stats.filtered[kindInsert].Load()
	st.FilteredUpdates = s.stats.filtered[kindUpdate].Load()
	st.FilteredDeletes = s.stats.filtered[kindDelete].Load()
	st.DDLs = s.stats.ddls.Load()
	st.SkippedDDLs = s.stats.skippedDDLs.Load()
	st.Transactions = s.stats.transactions.Load()
	st.Batches = s.stats.batches.Load()
	return st
}
