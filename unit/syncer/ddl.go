package syncer

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/pingcap/failpoint"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/collation"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/ddlkind"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/unit"
)

// ddlApplier turns DDL query events into target statements and applies them
// as barriers. It belongs to one run's read loop, whose location, marks and
// checkpoint it moves; everything else it uses is given to it by
// newDDLApplier.
type ddlApplier struct {
	r          *reader
	translator *ddlTranslator
	target     *sql.DB       // runs the DDL
	disp       *dispatcher   // drained before each DDL
	tables     *tableCache   // invalidated after each DDL
	unit       ddlErrorState // where a failed DDL is recorded and handle-error taken from
	ddls       *atomic.Uint64
	skipped    *atomic.Uint64 // statements ddlkind skips
	// skippedKinds are the kinds of skipped statements logged at Info.
	skippedKinds map[ddlkind.Kind]bool
	// collations are the source's with collation_compatible strict (nil:
	// loose): each DDL gets its session's defaults written in.
	collations *collation.Catalog
	metrics    *unitMetrics
	logger     *zap.Logger
}

// ddlErrorState is the unit state a ddlApplier reports a failed DDL to and
// takes an operator's handle-error for it from (the Syncer).
type ddlErrorState interface {
	setStuck(st *stuckDDL)
	takeHandle(start, end binlog.Location) *handleOp
}

// newDDLApplier returns the DDL applier of read loop r, which applies DDL
// on s's target through r's dispatcher and table cache.
func (s *Syncer) newDDLApplier(r *reader) *ddlApplier {
	tr := newDDLTranslator(s.filter, s.events, s.router)
	tr.normalize = s.cfg.ShardMode != ""
	tr.logger = s.logger
	return &ddlApplier{
		r:            r,
		translator:   tr,
		target:       s.target,
		disp:         r.disp,
		tables:       r.tables,
		unit:         s,
		ddls:         &s.stats.ddls,
		skipped:      &s.stats.skippedDDLs,
		skippedKinds: map[ddlkind.Kind]bool{},
		metrics:      s.metrics,
		logger:       s.logger,
	}
}

// targetDDL is one statement for the target.
type targetDDL struct {
	sql string
	// event is the filter event of the statement (filter.EvAlterTable...);
	// source the upstream table it is about and target its routed table
	// (zero for a database statement); tables every upstream table it
	// names that is replicated (several for DROP TABLE).
	event          string
	source, target tableName
	tables         []tableName
	// schema to USE before running sql ("" for none).
	schema string
	// ensureSchemas must exist first (CREATE DATABASE IF NOT EXISTS).
	ensureSchemas []string
}

// apply handles one query event that is not BEGIN/COMMIT: DDL of selected
// tables is routed and applied after every earlier change; anything else
// only moves the transaction boundary.
func (d *ddlApplier) apply(ctx context.Context, ev *replication.BinlogEvent, e *replication.QueryEvent, query string) error {
	r := d.r
	end := binlog.Location{Name: r.tr.Cur.Name, Pos: ev.Header.LogPos}
	start := binlog.Location{Name: r.tr.Cur.Name, Pos: ev.Header.LogPos - ev.Header.EventSize}
	if kind, ok := ddlkind.Skipped(query); ok {
		// Stored programs, views, accounts...: never replayed (a trigger's
		// writes are already rows of the binlog), and never parsed (the
		// parser knows no CREATE TRIGGER).
		d.skipped.Add(1)
		log := d.logger.Debug
		if !d.skippedKinds[kind] {
			// Once per kind and run at Info: a tool's triggers come in dozens.
			d.skippedKinds[kind] = true
			log = d.logger.Info
		}
		log("sync unit skips a statement that is not replicated (further ones of this kind are logged at debug level)",
			zap.String("kind", string(kind)), zap.Stringer("binlog", start), zap.String("sql", clipSQL(query)))
		return r.endStatement()
	}
	// The statement is parsed in the quoting mode it was written in (DM
	// discovers ANSI_QUOTES so too).
	d.translator.ansiQuotes = binlog.ANSIQuotes(e.StatusVars)
	d.translator.collations = nil
	if d.collations != nil {
		// The session's collation_server and character set defaults, as
		// the event carries them (DM reads collation_server so too).
		sc := binlog.Collations(e.StatusVars)
		def := d.collations.Session(sc.Server, sc.UTF8MB4, sc.Defaults)
		d.translator.collations = &def
	}
	if handled, err := d.online(ctx, e, query, start, end); handled {
		return err
	}
	d.translator.oldTable = func(t tableName) *sqlschema.Table {
		tbl, err := sqlschema.ReadTable(ctx, d.target, t.Schema, t.Table)
		if err != nil {
			d.logger.Debug("no finer filter kind for MODIFY/CHANGE COLUMN: the target table cannot be read",
				zap.Stringer("table", t), zap.Error(err))
			return nil
		}
		return tbl
	}
	stmts, err := d.translator.translate(string(e.Schema), query)
	d.translator.oldTable = nil
	if err != nil {
		d.unit.setStuck(&stuckDDL{start: start, end: end})
		if h := d.unit.takeHandle(start, end); h != nil {
			return d.applyHandled(ctx, h, query, start, end)
		}
		var fe *filter.RuleError
		if errors.As(err, &fe) {
			return errs.New(CodeFilterError, false,
				"sync: %v at binlog %s (%s); the DDL was not applied: change the rule and resume, or skip it with handle-error", fe, start, clipSQL(query))
		}
		return errs.New(CodeDDLParse, false,
			"sync: cannot parse DDL at binlog %s (%s): %w; skip or replace it with handle-error", start, clipSQL(query), err)
	}
	return d.applyStmts(ctx, stmts, query, start, end)
}

// applyStmts applies the translated statements of the query event at
// start..end: through the shard DDL lock, or after every earlier change,
// with the checkpoint around them (a replay of the pending DDL tolerates
// changes already made).
func (d *ddlApplier) applyStmts(ctx context.Context, stmts []targetDDL, query string, start, end binlog.Location) error {
	r := d.r
	if len(stmts) == 0 {
		return r.endStatement()
	}
	if r.shard != nil {
		return r.shard.ddl(ctx, d, stmts, query, start, end)
	}
	if err := d.barrier(ctx, end); err != nil {
		return err
	}
	if h := d.unit.takeHandle(start, end); h != nil {
		return d.applyHandled(ctx, h, query, start, end)
	}
	replay := r.pendingDDL.Name == end.Name && r.pendingDDL.Pos == end.Pos
	for _, st := range stmts {
		if err := d.exec(ctx, st); err != nil {
			code := dbconn.ErrorNumber(err)
			if replay && ddlAlreadyDone[code] {
				d.logger.Info("replayed DDL had already run before a crash", zap.String("sql", st.sql), zap.Error(err))
				continue
			}
			return d.rejected(ctx, err, st, start, end)
		}
	}
	return d.finish(ctx, end)
}

// rejected is the error of a DDL the target did not run: resumable when a
// retry may cure it, else the DDL is stuck for handle-error.
func (d *ddlApplier) rejected(ctx context.Context, err error, st targetDDL, start, end binlog.Location) error {
	if errs.IsResumable(err) || ctx.Err() != nil {
		return errs.Wrap(err, CodeDDL, "sync: apply DDL at binlog %s", start)
	}
	d.unit.setStuck(&stuckDDL{start: start, end: end})
	return errs.New(CodeDDL, false,
		"sync: the target rejected DDL at binlog %s: %s: %w; fix the target or skip/replace the DDL with handle-error",
		start, clipSQL(st.sql), err)
}

// barrier waits for every earlier change, then saves a checkpoint before
// the DDL that names it as pending (unless a shard DDL lock holds the
// checkpoint back).
func (d *ddlApplier) barrier(ctx context.Context, end binlog.Location) error {
	r := d.r
	if err := d.disp.barrier(ctx); err != nil {
		return err
	}
	r.marks = r.marks[:0]
	r.marked, r.markedAt = r.tr.End(), time.Now()
	if r.shard.holding() {
		return nil
	}
	return r.save(ctx, savedCheckpoint{loc: r.marked, pendingDDL: end})
}

// finish ends the DDL: the failpoint between DDL and checkpoint, cache
// invalidation, the checkpoint after it.
func (d *ddlApplier) finish(ctx context.Context, end binlog.Location) error {
	r := d.r
	failpoint.Inject("SyncCrashAfterDDL", func() {
		d.logger.Warn("failpoint SyncCrashAfterDDL: exiting the process", zap.Stringer("binlog", end))
		os.Exit(crashExitCode)
	})
	d.tables.invalidate()
	d.unit.setStuck(nil)
	d.ddls.Add(1)
	d.metrics.ddl()
	if err := r.commit(); err != nil {
		return err
	}
	r.marked = r.tr.End()
	r.pendingDDL = binlog.Location{}
	if r.shard.holding() {
		return nil
	}
	return r.save(ctx, savedCheckpoint{loc: r.marked})
}

// applyHandled runs an operator's skip or replace for a stuck DDL.
func (d *ddlApplier) applyHandled(ctx context.Context, h *handleOp, query string, start, end binlog.Location) error {
	if err := d.barrier(ctx, end); err != nil {
		return err
	}
	d.logger.Info("handle-error on DDL", zap.String("op", h.op), zap.Stringer("binlog", start),
		zap.String("ddl", clipSQL(query)), zap.Strings("sqls", h.sqls))
	if h.op == unit.HandleErrorReplace {
		for _, q := range h.sqls {
			if err := d.exec(ctx, targetDDL{sql: q}); err != nil {
				d.unit.setStuck(&stuckDDL{start: start, end: end})
				return errs.Wrap(err, CodeDDL, "sync: replacement SQL for DDL at binlog %s: %s", start, clipSQL(q))
			}
		}
	}
	return d.finish(ctx, end)
}

// exec runs one target DDL on one connection.
func (d *ddlApplier) exec(ctx context.Context, st targetDDL) (err error) {
	conn, err := d.target.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, conn.Close()) }()
	for _, schema := range st.ensureSchemas {
		if _, err := conn.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+sqlschema.QuoteName(schema)); err != nil {
			return err
		}
	}
	if st.schema != "" {
		if _, err := conn.ExecContext(ctx, "USE "+sqlschema.QuoteName(st.schema)); err != nil {
			return err
		}
	}
	if _, err := conn.ExecContext(ctx, st.sql); err != nil {
		return err
	}
	return nil
}
