package load

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/collation"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/unit"
)

// extraConns are the target connections beyond loader.pool-size: schema
// creation and the meta records.
const extraConns = 2

// targetSQLMode keeps zero dates and explicit zeros in AUTO_INCREMENT
// columns and is not strict: the dumped values are the source's stored
// values, whatever the source's sql_mode allowed. No NO_BACKSLASH_ESCAPES:
// LOAD DATA's escapes depend on it.
const targetSQLMode = "'NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'"

// Loader is the load unit of one subtask.
type Loader struct {
	src     *config.SourceConfig
	dir     string
	logger  *zap.Logger
	metrics *unitMetrics
	prog    progress
	// method is methodLoadData until the target refuses it.
	method atomic.Int32
	// start is the snapshot location of the dump being loaded in task mode
	// all; nil otherwise or before the manifest is read.
	start atomic.Pointer[binlog.Location]

	// Set by New and Update, read by runs; the subtask never calls Update
	// concurrently with Process/Resume.
	cfg    *config.SubTaskConfig
	events *filter.EventFilter
	router *filter.Router

	// budget bounds the target connections (UseConnBudget, before Init);
	// nil: a pool of its own.
	budget *dbconn.Budget

	// Set by Init; used by runs, Close and Kill (never concurrently).
	db    *sql.DB
	store *metaStore
	// coll are the dumped source's default collations with
	// collation_compatible strict, nil when loose; set by each run.
	coll *collation.Defaults
}

var (
	_ unit.Unit             = (*Loader)(nil)
	_ unit.CheckpointHolder = (*Loader)(nil)
)

// CheckpointLocation is the snapshot's location of the dump being loaded,
// in task mode all (where the sync unit starts there): the relay keeps its
// files from there on while the load runs. Safe concurrently with Process.
func (l *Loader) CheckpointLocation() (binlog.Location, bool) {
	if loc := l.start.Load(); loc != nil {
		return *loc, true
	}
	return binlog.Location{}, false
}

// New creates the load unit of a subtask; dir is the dump directory the
// dump unit wrote (loader.dir). m may be nil.
func New(cfg *config.SubTaskConfig, src *config.SourceConfig, dir string, m *Metrics, logger *zap.Logger) (*Loader, error) {
	if cfg == nil || src == nil {
		return nil, errs.New(CodeLoadConfig, false, "load: subtask and source configs are required")
	}
	if dir == "" {
		return nil, errs.New(CodeLoadConfig, false, "load: subtask %q has no dump directory (loader.dir)", cfg.Name)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	l := &Loader{src: src, dir: dir, logger: logger,
		metrics: &unitMetrics{m: m, task: cfg.Name, source: cfg.SourceID}}
	if err := l.configure(cfg); err != nil {
		return nil, err
	}
	l.prog.reset(Status{Dir: dir}, nil, time.Now())
	return l, nil
}

// configure installs cfg and the filters built from it.
func (l *Loader) configure(cfg *config.SubTaskConfig) error {
	c := *cfg
	if c.Loader.PoolSize < 1 {
		c.Loader.PoolSize = config.DefaultLoaderPoolSize
	}
	if c.MetaSchema == "" {
		return errs.New(CodeLoadConfig, false, "load: subtask %q has no meta-schema for its load records", c.Name)
	}
	// As in the sync unit: case-sensitive when the subtask or its source
	// says so, and the source's filters apply after the subtask's.
	cs := c.CaseSensitive || l.src.CaseSensitive
	events, err := filter.NewEventFilter(config.WithSourceFilters(c.FilterRules, l.src.Filters, cs), cs)
	if err != nil {
		return errs.New(CodeLoadConfig, false, "load: subtask %q: %w", c.Name, err)
	}
	l.cfg, l.events, l.router = &c, events, filter.NewRouter(c.RouteRules, c.SourceID, cs)
	return nil
}

// UseConnBudget makes the unit's target pool take its connections from b,
// the worker's budget of connections to each target. Every load worker
// holds one transaction at a time and the meta records use one connection
// each, so a budget smaller than the pool cannot deadlock it.
func (l *Loader) UseConnBudget(b *dbconn.Budget) { l.budget = b }

// Type is unit.TypeLoad.
func (l *Loader) Type() unit.Type { return unit.TypeLoad }

// Init opens the target pool and creates the load tables in the meta
// schema (and the sync unit's, for task mode all).
func (l *Loader) Init(ctx context.Context) error {
	l.closePool()
	ep, err := dbconn.NewEndpoint(l.cfg.TargetDatabase, dbconn.TargetRef(l.cfg.Name))
	if err != nil {
		return errs.New(CodeLoadConfig, false, "load: %w", err)
	}
	dc := ep.DriverConfig()
	dc.InterpolateParams = true
	dc.ParseTime = false
	dc.ClientFoundRows = true
	for name, v := range l.cfg.TargetDatabase.Session {
		if n := strings.ToLower(name); n == "time_zone" || n == "sql_mode" {
			l.logger.Warn("target-database.session setting is overridden while loading: TIMESTAMP values are loaded in UTC "+
				"under a permissive sql_mode", zap.String("variable", n), zap.String("value", v))
		}
	}
	dbconn.SetDefaultParam(dc, "foreign_key_checks", "0")
	dc.Params["time_zone"] = "'+00:00'"
	dc.Params["sql_mode"] = targetSQLMode
	db, err := l.budget.Open(ep, dc, l.cfg.Name, l.cfg.Loader.PoolSize+extraConns)
	if err != nil {
		return errs.New(CodeLoadConfig, false, "load: target: %w", err)
	}
	store := &metaStore{schema: l.cfg.MetaSchema, task: l.cfg.Name, source: l.cfg.SourceID}
	if err := store.prepare(ctx, db); err != nil {
		_ = db.Close() // the error being returned matters more
		return err
	}
	l.db, l.store = db, store
	return nil
}

// IsFreshTask reports whether the target records nothing of this task and
// source (no status row, no loaded chunk).
func (l *Loader) IsFreshTask(ctx context.Context) (bool, error) {
	if l.db == nil {
		return false, errs.New(CodeLoadConfig, false, "load: IsFreshTask before Init")
	}
	ok, err := l.store.exists(ctx, l.db)
	return !ok, err
}

// Process loads the chunks not yet recorded, then hands over; see the
// package doc.
func (l *Loader) Process(ctx context.Context) unit.Result { return l.result(ctx, l.run(ctx)) }

// Resume continues with the chunks not yet recorded; same contract as
// Process.
func (l *Loader) Resume(ctx context.Context) unit.Result { return l.result(ctx, l.run(ctx)) }

func (l *Loader) result(ctx context.Context, err error) unit.Result {
	return unit.Outcome(ctx, err, l.logger, "load unit")
}

// Pause does nothing: a run's transactions end with it; the pool is kept
// for Resume.
func (l *Loader) Pause() {}

// loadShape is the part of a subtask config that decides what is loaded
// and where; it cannot change in place.
type loadShape struct {
	Name, SourceID, TaskMode, MetaSchema, Dir string
	Target                                    config.DBConfig
	CaseSensitive                             bool
	BAList                                    config.BAList
	Routes                                    []config.RouteRule
	Filters                                   []config.FilterRule
}

func shapeOf(c *config.SubTaskConfig) loadShape {
	return loadShape{Name: c.Name, SourceID: c.SourceID, TaskMode: c.TaskMode, MetaSchema: c.MetaSchema, Dir: c.Loader.Dir,
		Target: c.TargetDatabase, CaseSensitive: c.CaseSensitive, BAList: c.BAList, Routes: c.RouteRules, Filters: c.FilterRules}
}

// Update applies a new config while paused: loader.pool-size and
// loader.cleanup-dump-file (and the settings of other units) change in
// place; a change of what is loaded or where (target, meta schema, block-allow
// list, routes, filters, task mode, loader.dir) returns
// unit.ErrUpdateUnsupported.
func (l *Loader) Update(_ context.Context, cfg *config.SubTaskConfig) error {
	a, err1 := json.Marshal(shapeOf(l.cfg))
	b, err2 := json.Marshal(shapeOf(cfg))
	if err1 != nil || err2 != nil || !reflect.DeepEqual(a, b) {
		return fmt.Errorf("load: only loader.pool-size and loader.cleanup-dump-file can change in place: %w", unit.ErrUpdateUnsupported)
	}
	if err := l.configure(cfg); err != nil {
		return err
	}
	if l.db != nil {
		l.budget.Resize(l.db, l.cfg.Loader.PoolSize+extraConns)
	}
	return nil
}

// Close closes the pool: every chunk is committed with its record, so
// there is nothing to flush.
func (l *Loader) Close() { l.Kill() }

// Kill closes the pool; transactions in flight roll back.
func (l *Loader) Kill() {
	l.closePool()
	l.metrics.forget()
}

func (l *Loader) closePool() {
	if l.db != nil {
		if err := l.db.Close(); err != nil {
			l.logger.Warn("close target pool", zap.Error(err))
		}
		l.db = nil
	}
}

// Status returns a Status.
func (l *Loader) Status() any { return l.prog.snapshot() }
