package syncer

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha/shardddl"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/syncer/syncmeta"
)

// Pessimistic shard DDL (DESIGN.md §5, docs/design.md "Shard DDL in the
// sync unit").
//
// Every upstream table the task selects belongs to the sharding group of
// the target table it routes to. When a table reaches an ALTER (or CREATE
// / DROP INDEX), the read loop waits for every earlier change to be
// applied, reports the DDL to the group's lock (ha/shardddl) and, unless
// the lock resolves at once, holds the table: its later row changes and
// DDLs are not applied, other tables keep replicating. A watcher per
// group tells the read loop when the lock moved; at the next transaction
// boundary it runs the DDL on the target if this table owns the lock, or
// acknowledges the owner's run, and releases the table. Released tables
// are re-synced: the read loop waits for everything read so far to be
// applied, opens the binlog again at the earliest released table's DDL
// and, up to where it had read, applies only the released tables' changes
// (in safe mode), then goes on as before.
//
// While any table is held, the checkpoint is not saved past the boundary
// before the earliest held DDL, so a restart replays from there: every
// table's changes again in safe mode, the held DDLs reported again (the
// same DDLs at the same location change nothing in etcd), the resolved
// ones recognised and passed. That replay is the crash-safe form of the
// re-sync.

// CodeShardDDL is the error code of shard DDL coordination failures.
const CodeShardDDL = "shard-ddl"

// resyncSafePointWorker is the worker number of the safe point a re-sync
// records: everything up to where the read loop had read before it opened
// the binlog again may be on the target, so a restart from an earlier
// checkpoint runs in safe mode up to there.
const resyncSafePointWorker = 1 << 20

// lockWaitWarnAfter is how long a table waits for its lock before status
// says so among the subtask's warnings.
const lockWaitWarnAfter = time.Minute

// UseShardDDL gives the unit the coordinator of its task and source;
// required before Process for a task with shard-mode pessimistic.
func (s *Syncer) UseShardDDL(c *shardddl.Coordinator) { s.shardCoord = c }

// ShardDDL is the "shard-ddl" object of the subtask's status while a lock
// involves the unit (unit.ShardDDLReporter).
func (s *Syncer) ShardDDL() *unit.ShardDDLStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.prog.shard
	if cur == nil {
		cur = s.prog.shardConflict
	}
	if cur == nil {
		return nil
	}
	st := *cur
	st.DDLs = slices.Clone(st.DDLs)
	st.WaitingFor = slices.Clone(st.WaitingFor)
	return &st
}

var _ unit.ShardDDLReporter = (*Syncer)(nil)

// heldTable is an upstream table whose DML waits for its lock.
type heldTable struct {
	source, target tableName
	ddls           []targetDDL // what runs on the target if the table owns the lock
	reported       []string    // what was reported: the statements' SQL
	// from is the transaction boundary before the DDL (GTID set
	// included): the re-sync starts there.
	from       binlog.Location
	start, end binlog.Location // the DDL event
	state      shardddl.LockState
	since      time.Time
	// optPrint is the optimistic state's fingerprint the table was held at.
	optPrint string
}

// lockTable is the coordinator's name of t.
func lockTable(t tableName) shardddl.Table { return shardddl.Table{Schema: t.Schema, Name: t.Table} }

// resyncWindow is the part of the binlog read again for released tables:
// up to until (where the read loop had read), only their changes apply.
type resyncWindow struct {
	until binlog.Location
	// tables maps each released table to the start of the DDL event it
	// was held at, which the window passes as resolved.
	tables map[tableName]binlog.Location
}

// errRewind asks run to open the binlog again at from.
type errRewind struct{ from binlog.Location }

func (e *errRewind) Error() string { return "sync: re-sync from " + e.from.String() }

// shardRun is the shard DDL state of one run's read loop; only that
// goroutine uses it, except dirty/notify, which watchers set.
type shardRun struct {
	r      *reader
	c      *shardddl.Coordinator
	logger *zap.Logger
	// opt: shard-mode optimistic (shard_opt.go), with the member tables'
	// schemas.
	opt     bool
	schemas *shardSchemas
	// deferred are owned target changes whose DDL the read loop has yet
	// to reach (replayed after a restart), by their state's fingerprint.
	deferred map[shardddl.Table]string

	held     map[tableName]*heldTable
	released []*heldTable // resolved while a window was open: re-synced after it
	window   *resyncWindow
	// shares are the upstream tables of this source published per target.
	shares map[tableName][]tableName

	watchCtx context.Context
	watchers map[tableName]context.CancelFunc
	wg       sync.WaitGroup

	mu     sync.Mutex
	dirty  map[tableName]bool // groups whose lock moved (guarded by mu)
	notify chan struct{}      // one pending look at the dirty groups
	// wake ends the read loop's wait for an event, so that a lock that
	// moved while the binlog is quiet is handled now, not at the next
	// idle tick (binlog.ReadLoopWake).
	wake chan struct{}
}

// newShardRun returns the shard state of r, or nil for a task without
// shard DDL coordination.
func (s *Syncer) newShardRun(ctx context.Context, r *reader) (*shardRun, error) {
	if s.cfg.ShardMode == "" {
		return nil, nil
	}
	if s.cfg.ShardMode != config.ShardPessimistic && s.cfg.ShardMode != config.ShardOptimistic {
		return nil, errs.New(CodeConfig, false, "sync: task %q: shard-mode %q is not supported; use pessimistic or optimistic",
			s.cfg.Name, s.cfg.ShardMode)
	}
	if s.shardCoord == nil {
		return nil, errs.New(CodeConfig, false,
			"sync: task %q has shard-mode %s but the unit has no etcd client to coordinate shard DDL with", s.cfg.Name, s.cfg.ShardMode)
	}
	return &shardRun{r: r, c: s.shardCoord, logger: s.logger, opt: s.cfg.ShardMode == config.ShardOptimistic,
		deferred: map[shardddl.Table]string{}, held: map[tableName]*heldTable{},
		shares: map[tableName][]tableName{}, watchCtx: ctx, watchers: map[tableName]context.CancelFunc{},
		dirty: map[tableName]bool{}, notify: make(chan struct{}, 1), wake: make(chan struct{}, 1)}, nil
}

// stop ends every watcher.
func (sr *shardRun) stop() {
	if sr == nil {
		return
	}
	for _, cancel := range sr.watchers {
		cancel()
	}
	sr.wg.Wait()
}

// holding reports whether a table's DML is held (the checkpoint may not
// pass the earliest held DDL).
func (sr *shardRun) holding() bool { return sr != nil && (len(sr.held) > 0 || len(sr.released) > 0) }

// capAt is the boundary before the earliest held DDL; ok is false when no
// table is held.
func (sr *shardRun) capAt() (binlog.Location, bool) {
	if !sr.holding() {
		return binlog.Location{}, false
	}
	var first binlog.Location
	for _, h := range sr.held {
		if first.IsZero() || h.from.Compare(first) < 0 {
			first = h.from
		}
	}
	for _, h := range sr.released {
		if first.IsZero() || h.from.Compare(first) < 0 {
			first = h.from
		}
	}
	return first, true
}

// publishShares publishes, for every target table, this source's upstream
// tables routed to it, read from the source now.
func (sr *shardRun) publishShares(ctx context.Context) error {
	groups, err := sr.r.s.shardGroups(ctx)
	if err != nil {
		return err
	}
	if sr.opt {
		return sr.optStart(ctx, groups)
	}
	for target, tables := range groups {
		if err := sr.putShare(ctx, target, tables); err != nil {
			return err
		}
	}
	return nil
}

// shardGroups lists the source's selected tables by the target table they
// route to.
func (s *Syncer) shardGroups(ctx context.Context) (map[tableName][]tableName, error) {
	db, err := s.sources.Open(s.source, s.source.DriverConfig(), s.cfg.Name, 1)
	if err != nil {
		return nil, errs.Wrap(err, CodeShardDDL, "sync: list the source's tables for the sharding groups")
	}
	defer func() {
		if cerr := db.Close(); cerr != nil {
			s.logger.Warn("close source pool", zap.Error(cerr))
		}
	}()
	rows, err := db.QueryContext(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "+
		"WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN "+sqlschema.SystemSchemaList())
	if err != nil {
		return nil, errs.Wrap(err, CodeShardDDL, "sync: list the source's tables for the sharding groups")
	}
	groups := map[tableName][]tableName{}
	online, err := s.cfg.OnlineDDLRules()
	if err != nil {
		return nil, errors.Join(errs.New(CodeConfig, false, "sync: task %q: %w", s.cfg.Name, err), rows.Close())
	}
	for rows.Next() {
		var t tableName
		if err := rows.Scan(&t.Schema, &t.Table); err != nil {
			return nil, errors.Join(errs.Wrap(err, CodeShardDDL, "sync: list the source's tables"), rows.Close())
		}
		if !s.filter.TableAllowed(t.Schema, t.Table) || online.Online(t.Table) {
			continue // an online schema change's shadow or trash table is no shard
		}
		target := s.router.Route(t.Schema, t.Table)
		groups[target] = append(groups[target], t)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, errs.Wrap(err, CodeShardDDL, "sync: list the source's tables for the sharding groups")
	}
	return groups, nil
}

// publishShardGroups publishes the source's sharding groups when the unit
// is initialised, before the subtask dumps and loads, so that a lock one
// source's shards reach early already waits for this source's tables.
func (s *Syncer) publishShardGroups(ctx context.Context) error {
	if s.cfg.ShardMode == "" || s.shardCoord == nil {
		return nil
	}
	groups, err := s.shardGroups(ctx)
	if err != nil {
		return err
	}
	if s.cfg.ShardMode == config.ShardOptimistic {
		return s.publishOptShares(ctx, groups)
	}
	for target, tables := range groups {
		if err := s.putShare(ctx, target, tables); err != nil {
			return err
		}
	}
	return nil
}

// publishOptShares publishes the optimistic shares with the newest schemas
// the unit stored (the first, read from the source, for tables it never
// saw). The states are acted on when the unit runs.
func (s *Syncer) publishOptShares(ctx context.Context, groups map[tableName][]tableName) error {
	ss, err := s.loadShardSchemas(ctx)
	if err != nil {
		return err
	}
	ss.latest()
	var all []tableName
	for _, tables := range groups {
		all = append(all, tables...)
	}
	if err := ss.first(ctx, all); err != nil { // one source connection for every group
		return err
	}
	for target, tables := range groups {
		if _, err := s.shardCoord.ShareOptimistic(ctx, lockTable(target), ss.models(tables)); err != nil {
			return errs.Wrap(err, CodeShardDDL, "sync: publish the tables of source %s in the optimistic sharding group of %s",
				s.cfg.SourceID, target)
		}
	}
	return nil
}

// putShare publishes the upstream tables of this source in target's group.
func (s *Syncer) putShare(ctx context.Context, target tableName, tables []tableName) error {
	lt := make([]shardddl.Table, len(tables))
	for i, t := range tables {
		lt[i] = lockTable(t)
	}
	if err := s.shardCoord.PutShare(ctx, lockTable(target), lt); err != nil {
		return errs.Wrap(err, CodeShardDDL, "sync: publish the tables of source %s in the sharding group of %s", s.cfg.SourceID, target)
	}
	return nil
}

// putShare publishes target's share and remembers it for changeShare.
func (sr *shardRun) putShare(ctx context.Context, target tableName, tables []tableName) error {
	put := sr.r.s.putShare
	if sr.opt {
		put = sr.optShare
	}
	if err := put(ctx, target, tables); err != nil {
		return err
	}
	sr.shares[target] = slices.Clone(tables)
	return nil
}

// changeShare adds (or removes) an upstream table to (from) its group.
func (sr *shardRun) changeShare(ctx context.Context, t tableName, add bool) error {
	target := sr.r.s.router.Route(t.Schema, t.Table)
	cur := sr.shares[target]
	has := slices.Contains(cur, t)
	switch {
	case add && !has:
		cur = append(slices.Clone(cur), t)
	case !add && has:
		cur = slices.DeleteFunc(slices.Clone(cur), func(x tableName) bool { return x == t })
	default:
		return nil
	}
	if !add {
		delete(sr.held, t)
	}
	return sr.putShare(ctx, target, cur)
}

// skipRows reports whether the row changes of upstream table t at the
// read location are not applied now: the table is held, or a re-sync
// window is open and t is not one of its tables.
func (sr *shardRun) skipRows(t tableName) bool {
	if sr == nil {
		return false
	}
	if _, ok := sr.held[t]; ok {
		return true
	}
	if h := sr.releasedTable(t); h != nil {
		return true
	}
	if sr.window == nil {
		return false
	}
	// A released table's changes before its own DDL were applied by the
	// first pass (the window may start earlier, at another released
	// table's DDL): replaying them would repeat the rows of a table
	// without a key.
	at, in := sr.window.tables[t]
	return !in || sr.r.tr.Cur.Compare(at) <= 0
}

// resyncing reports whether t's changes are re-synced now (safe mode).
func (sr *shardRun) resyncing(t tableName) bool {
	if sr == nil || sr.window == nil {
		return false
	}
	_, in := sr.window.tables[t]
	return in
}

func (sr *shardRun) releasedTable(t tableName) *heldTable {
	for _, h := range sr.released {
		if h.source == t {
			return h
		}
	}
	return nil
}

// afterTrack closes the re-sync window once the read location reached
// where the loop had read before it.
func (sr *shardRun) afterTrack() {
	if sr == nil || sr.window == nil || sr.r.tr.Cur.Compare(sr.window.until) < 0 {
		return
	}
	sr.logger.Info("shard DDL re-sync caught up", zap.Stringer("at", sr.r.tr.Cur), zap.Int("tables", len(sr.window.tables)))
	sr.window = nil
	sr.publish()
}

// lockable reports whether a statement goes through the lock.
func lockable(st targetDDL) bool {
	switch st.event {
	case filter.EvAlterTable, filter.EvCreateIndex, filter.EvDropIndex:
		return true
	}
	return false
}

// ddl handles the translated statements of one query event of a sharding
// task; see the package comment above.
func (sr *shardRun) ddl(ctx context.Context, d *ddlApplier, stmts []targetDDL, query string, start, end binlog.Location) error {
	r := sr.r
	var direct []targetDDL
	locked := map[tableName][]targetDDL{}
	var order []tableName
	for _, st := range stmts {
		if st.source != (tableName{}) {
			if _, held := sr.held[st.source]; held || sr.releasedTable(st.source) != nil {
				continue // seen again when the table is re-synced
			}
			if sr.window != nil {
				if at, in := sr.window.tables[st.source]; !in || at == start {
					continue // the first pass handled it, or it is the resolved DDL
				}
			}
		} else if sr.window != nil {
			continue // a database statement the first pass handled
		}
		switch {
		case lockable(st):
			if _, ok := locked[st.source]; !ok {
				order = append(order, st.source)
			}
			locked[st.source] = append(locked[st.source], st)
		case st.event == filter.EvCreateTable:
			direct = append(direct, st)
		case st.event == filter.EvDropTable:
			for _, t := range st.tables {
				d.logger.Info("shard mode: a dropped upstream table leaves its sharding group; the merged table stays",
					zap.Stringer("table", t), zap.Stringer("binlog", start))
				if err := sr.changeShare(ctx, t, false); err != nil {
					return err
				}
			}
		case st.event == filter.EvTruncateTable:
			d.logger.Warn("shard mode: TRUNCATE of one shard is not applied to the merged table",
				zap.Stringer("table", st.source), zap.Stringer("binlog", start))
		case st.event == filter.EvRenameTable:
			d.unit.setStuck(&stuckDDL{start: start, end: end})
			if h := d.unit.takeHandle(start, end); h != nil {
				return d.applyHandled(ctx, h, query, start, end)
			}
			return errs.New(CodeShardDDL, false,
				"sync: RENAME TABLE of sharded table %s at binlog %s cannot be coordinated across the shards; "+
					"skip it with handle-error, or replace it with the statements the merged table needs", st.source, start)
		case st.event == filter.EvDropDatabase:
			d.logger.Warn("shard mode: DROP DATABASE is not applied to the target", zap.Stringer("binlog", start), zap.String("sql", clipSQL(query)))
		default:
			direct = append(direct, st)
		}
	}
	if len(direct) == 0 && len(order) == 0 {
		return r.endStatement()
	}
	if err := d.barrier(ctx, end); err != nil {
		return err
	}
	for _, st := range direct {
		if err := d.exec(ctx, st); err != nil && !ddlAlreadyDone[dbconn.ErrorNumber(err)] {
			return d.rejected(ctx, err, st, start, end)
		}
		if st.event == filter.EvCreateTable {
			if err := sr.optCreated(ctx, st, start); err != nil {
				return err
			}
			if err := sr.changeShare(ctx, st.source, true); err != nil {
				return err
			}
		}
	}
	from := r.tr.End()
	holds := false
	for _, t := range order {
		h := &heldTable{source: t, target: locked[t][0].target, ddls: locked[t], from: from, start: start, end: end, since: time.Now()}
		if sr.opt {
			done, err := sr.optDDL(ctx, d, h, d.unit.takeHandle(start, end))
			if err != nil {
				return err
			}
			if !done {
				sr.hold(h)
				holds = true
			}
			continue
		}
		if op := d.unit.takeHandle(start, end); op != nil {
			if op.op == unit.HandleErrorSkip {
				d.logger.Info("handle-error skips a shard DDL: it is not reported to the lock", zap.Stringer("table", t), zap.Stringer("binlog", start))
				continue
			}
			ddls, err := sr.replacement(d, h, op)
			if err != nil {
				return err
			}
			h.ddls = ddls
		}
		for _, st := range h.ddls {
			h.reported = append(h.reported, st.sql)
		}
		st, err := sr.report(ctx, h)
		if err != nil {
			return err
		}
		done, err := sr.act(ctx, d, h, st)
		if err != nil {
			return err
		}
		if !done {
			sr.hold(h)
			holds = true
		}
	}
	sr.publish()
	if holds {
		return r.endStatement()
	}
	return d.finish(ctx, end)
}

// hold holds table h at its DDL until its lock moves.
func (sr *shardRun) hold(h *heldTable) {
	sr.held[h.source] = h
	sr.logger.Info("shard DDL: table held until its lock resolves", zap.String("lock", h.state.ID), zap.Stringer("table", h.source),
		zap.String("role", string(h.state.Role)), zap.Strings("ddls", h.reported), zap.Stringer("binlog", h.start))
	if sr.opt {
		if cancel, ok := sr.watchers[h.target]; ok {
			cancel() // started before the table was held: it does not watch it
			delete(sr.watchers, h.target)
		}
	}
	sr.watch(h.target)
}

// replacement is the target DDLs of an operator's handle-error replace of
// h's DDL, normalized as translated DDLs are.
func (sr *shardRun) replacement(d *ddlApplier, h *heldTable, op *handleOp) ([]targetDDL, error) {
	var out []targetDDL
	for _, q := range op.sqls {
		// DM's form names the upstream table: routed like the binlog's
		// DDL. A statement about the merged table (which the block-allow
		// list does not select) is taken as written, normalized.
		if routed, err := d.translator.translate(h.source.Schema, q); err == nil && len(routed) == 1 && lockable(routed[0]) &&
			routed[0].source != h.target {
			if routed[0].source != h.source {
				return nil, errs.New(CodeHandleError, false, "sync: handle-error replace of the DDL of %s at binlog %s: %q is about %s; "+
					"name %s or the merged table %s", h.source, h.start, q, routed[0].source, h.source, h.target)
			}
			out = append(out, targetDDL{sql: routed[0].sql, source: h.source, target: h.target, event: routed[0].event})
			continue
		}
		n, err := d.translator.normalizeSQL(q)
		if err != nil {
			return nil, errs.New(CodeHandleError, false, "sync: handle-error replace of the DDL of %s at binlog %s: %q: %w; "+
				"give one statement for the target table per --sql", h.source, h.start, q, err)
		}
		out = append(out, targetDDL{sql: n, source: h.source, target: h.target, event: filter.EvAlterTable})
	}
	return out, nil
}

// report reports h's DDLs to its lock.
func (sr *shardRun) report(ctx context.Context, h *heldTable) (shardddl.LockState, error) {
	rep := shardddl.Report{Target: lockTable(h.target), Table: lockTable(h.source), DDLs: h.reported,
		Location: shardddl.Location{Name: h.start.Name, Pos: h.start.Pos, GTID: h.from.GTID}}
	st, err := sr.c.Report(ctx, rep)
	if errors.Is(err, shardddl.ErrNotMember) {
		// Created while the unit did not see its CREATE TABLE (before the
		// start's table list, after the checkpoint): it joins now.
		if err := sr.changeShare(ctx, h.source, true); err != nil {
			return st, err
		}
		st, err = sr.c.Report(ctx, rep)
	}
	if err != nil {
		return st, sr.coordError(err, "report the DDL of %s to its lock", h.source)
	}
	if rep.Location.Before(st.Location) {
		// A replay from a checkpoint before this DDL: the table went past
		// it (its info is a later DDL), so it was resolved.
		st = shardddl.LockState{ID: st.ID, Role: shardddl.RoleResolved, Resolved: "replayed"}
	}
	h.state = st
	return st, nil
}

// coordError wraps a coordinator error: resumable unless retrying cannot
// cure it (a malformed key, a wrong role).
func (sr *shardRun) coordError(err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if errors.Is(err, shardddl.ErrMalformed) || errors.Is(err, shardddl.ErrBadKey) || errors.Is(err, shardddl.ErrWrongRole) ||
		errors.Is(err, shardddl.ErrNotMember) {
		return errs.New(CodeShardDDL, false, "sync: %s: %w; see `dmctl shard-ddl-lock` and resolve the lock with `dmctl shard-ddl-lock unlock`", msg, err)
	}
	return errs.New(CodeShardDDL, true, "sync: %s: %w", msg, err)
}

// act does what st asks of held table h; done is true when the table's DDL
// is resolved (the table is no longer held).
func (sr *shardRun) act(ctx context.Context, d *ddlApplier, h *heldTable, st shardddl.LockState) (done bool, err error) {
	h.state = st
	target, table := lockTable(h.target), lockTable(h.source)
	switch st.Role {
	case shardddl.RoleWaiting, shardddl.RoleConflict:
		if st.Role == shardddl.RoleConflict {
			// handle-error without a position names this DDL when it is
			// one that differs from the first member's.
			if st.Differs {
				d.unit.setStuck(&stuckDDL{start: h.start, end: h.end})
			}
			if op := d.unit.takeHandle(h.start, h.end); op != nil && op.op == unit.HandleErrorReplace {
				ddls, err := sr.replacement(d, h, op)
				if err != nil {
					return false, err
				}
				h.ddls, h.reported = ddls, nil
				for _, st := range ddls {
					h.reported = append(h.reported, st.sql)
				}
				sr.logger.Info("handle-error replaces a conflicting shard DDL", zap.Stringer("table", h.source), zap.Strings("ddls", h.reported))
				d.unit.setStuck(nil)
				nst, err := sr.report(ctx, h)
				if err != nil {
					return false, err
				}
				return sr.act(ctx, d, h, nst)
			}
		}
		return false, nil
	case shardddl.RoleOwner, shardddl.RoleOwnerPending:
		pending := st.Role == shardddl.RoleOwnerPending
		if !pending {
			if _, err := sr.c.Begin(ctx, target, table); err != nil {
				return false, sr.coordError(err, "begin the DDL of lock %s", st.ID)
			}
		}
		sr.setState(h, "executing")
		first := 0
		if pending {
			n, err := sr.ranUpTo(ctx, h, st.Seq)
			if err != nil {
				return false, err
			}
			if n > 0 {
				sr.logger.Info("shard DDL: the restarted owner finds statements of its lock already on the target",
					zap.String("lock", st.ID), zap.Int("ran", n), zap.Int("of", len(h.ddls)))
			}
			first = n
		}
		for i, ddl := range h.ddls {
			if i < first {
				continue
			}
			if err := sr.recordRun(ctx, h, st.Seq, i); err != nil {
				return false, err
			}
			if err := d.exec(ctx, ddl); err != nil {
				// After Begin a replay may find the change made: a restart
				// between the DDL and Done.
				if ddlAlreadyDone[dbconn.ErrorNumber(err)] {
					sr.logger.Info("shard DDL had already run on the target", zap.String("lock", st.ID), zap.String("sql", ddl.sql), zap.Error(err))
					continue
				}
				return false, d.rejected(ctx, err, ddl, h.start, h.end)
			}
		}
		if _, err := sr.c.Done(ctx, target, table); err != nil {
			return false, sr.coordError(err, "record the run of lock %s", st.ID)
		}
		d.ddls.Add(uint64(len(h.ddls)))
		d.metrics.ddl()
		d.tables.invalidate()
		sr.logger.Info("shard DDL lock: ran the DDL on the target as its owner", zap.String("lock", st.ID),
			zap.Strings("ddls", h.reported), zap.Duration("waited", time.Since(h.since).Round(time.Millisecond)))
		return true, nil
	case shardddl.RoleSkip:
		if _, err := sr.c.Ack(ctx, target, table); err != nil {
			return false, sr.coordError(err, "acknowledge lock %s", st.ID)
		}
		d.tables.invalidate()
		sr.setState(h, "skipped")
		sr.logger.Info("shard DDL lock: the owner ran the DDL; this shard skips it", zap.String("lock", st.ID),
			zap.Stringer("table", h.source))
		return true, nil
	case shardddl.RoleResolved:
		d.tables.invalidate()
		return true, nil
	default: // RoleNone: the info is gone (the task's keys were removed): report again
		nst, err := sr.report(ctx, h)
		if err != nil {
			return false, err
		}
		if nst.Role == shardddl.RoleNone {
			return false, errs.New(CodeShardDDL, true, "sync: lock of %s lost the report of its DDL", h.source)
		}
		return sr.act(ctx, d, h, nst)
	}
}

// watch starts the watcher of target's group unless it runs: it marks the
// group dirty and wakes the read loop when the state of a held table of
// this source changed.
func (sr *shardRun) watch(target tableName) {
	if sr.opt {
		sr.watchOpt(target)
		return
	}
	if _, ok := sr.watchers[target]; ok {
		return
	}
	want := map[shardddl.Table]string{}
	for _, h := range sr.held {
		if h.target == target {
			want[lockTable(h.source)] = fingerprint(h.state)
		}
	}
	ctx, cancel := context.WithCancel(sr.watchCtx)
	sr.watchers[target] = cancel
	sr.wg.Add(1)
	go func() {
		defer sr.wg.Done()
		_, err := sr.c.WaitSource(ctx, lockTable(target), func(states map[shardddl.Table]shardddl.LockState) bool {
			for t, fp := range want {
				if fingerprint(states[t]) != fp {
					return true
				}
			}
			return false
		})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			sr.logger.Warn("watch of a shard DDL lock failed; the read loop asks again", zap.Stringer("target", target), zap.Error(err))
		}
		sr.markDirty(target)
	}()
}

// markDirty tells the read loop that target's lock moved: it looks at the
// next transaction boundary, woken if it waits for an event.
func (sr *shardRun) markDirty(target tableName) {
	sr.mu.Lock()
	sr.dirty[target] = true
	sr.mu.Unlock()
	select {
	case sr.notify <- struct{}{}:
	default:
	}
	select {
	case sr.wake <- struct{}{}:
	default:
	}
}

// fingerprint is what a watcher compares: the role and the members waited
// for, so status follows members as they arrive.
func fingerprint(st shardddl.LockState) string {
	var b strings.Builder
	b.WriteString(string(st.Role))
	for _, m := range st.WaitingFor {
		b.WriteString("|" + m.String())
	}
	return b.String()
}

// poll handles the groups whose lock moved, at a transaction boundary. It
// returns an errRewind when released tables are to be re-synced now.
func (sr *shardRun) poll(ctx context.Context) error {
	if sr == nil || sr.r.tr.InTxn {
		return nil
	}
	// An operator's handle-error for a held conflicting DDL.
	var handled []tableName
	if sr.r.s.handlePending() {
		for _, h := range sr.held {
			if h.state.Role == shardddl.RoleConflict && sr.r.s.handlePendingAt(h.start, h.end) {
				handled = append(handled, h.target)
			}
		}
	}
	select {
	case <-sr.notify:
	default:
		if len(handled) == 0 && (len(sr.released) == 0 || sr.window != nil) {
			return nil
		}
	}
	sr.mu.Lock()
	dirty := sr.dirty
	sr.dirty = map[tableName]bool{}
	sr.mu.Unlock()
	for _, t := range handled {
		dirty[t] = true
	}
	d := sr.r.ddl
	for target := range dirty {
		if cancel, ok := sr.watchers[target]; ok {
			cancel()
			delete(sr.watchers, target)
		}
		if sr.opt {
			if err := sr.pollOpt(ctx, d, target); err != nil {
				return err
			}
			sr.watch(target)
			continue
		}
		states, err := sr.c.States(ctx, lockTable(target))
		if err != nil {
			return sr.coordError(err, "read the lock of %s", target)
		}
		again := false
		for _, h := range sr.heldOf(target) {
			done, err := sr.act(ctx, d, h, states[lockTable(h.source)])
			if err != nil {
				return err
			}
			if !done {
				again = true
				continue
			}
			delete(sr.held, h.source)
			sr.released = append(sr.released, h)
		}
		if again {
			sr.watch(target)
		}
	}
	sr.publish()
	if len(sr.released) == 0 || sr.window != nil {
		return nil
	}
	return sr.rewind(ctx)
}

// heldOf lists the held tables of target's group, in name order.
func (sr *shardRun) heldOf(target tableName) []*heldTable {
	var out []*heldTable
	for _, h := range sr.held {
		if h.target == target {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b *heldTable) int { return strings.Compare(a.source.String(), b.source.String()) })
	return out
}

// rewind prepares the re-sync of the released tables: every change read
// so far applied, the safe point of the re-sync recorded, the window
// opened; run then opens the binlog at the earliest released DDL.
func (sr *shardRun) rewind(ctx context.Context) error {
	r := sr.r
	if err := r.disp.barrier(ctx); err != nil {
		return err
	}
	until := r.tr.End()
	if err := execTx(ctx, r.s.target, []stmt{r.s.store.safePointStmt(resyncSafePointWorker, until)}, r.s.escapes); err != nil {
		return errs.Wrap(err, CodeCheckpoint, "sync: record the safe point of a shard DDL re-sync")
	}
	w := &resyncWindow{until: until, tables: map[tableName]binlog.Location{}}
	from := sr.released[0].from
	for _, h := range sr.released {
		w.tables[h.source] = h.start
		if h.from.Compare(from) < 0 {
			from = h.from
		}
	}
	sr.released = nil
	sr.window = w
	sr.logger.Info("shard DDL re-sync of released tables", zap.Stringer("from", from), zap.Stringer("until", until),
		zap.Int("tables", len(w.tables)))
	sr.publish()
	return &errRewind{from: from}
}

// setState shows state for h in status now.
func (sr *shardRun) setState(h *heldTable, state string) {
	s := sr.r.s
	s.mu.Lock()
	s.prog.shard = &unit.ShardDDLStatus{Lock: h.state.ID, State: state, DDLs: slices.Clone(h.reported), WaitingFor: []unit.ShardMember{}}
	s.prog.shardSince = h.since
	s.mu.Unlock()
}

// publish shows the oldest held table's lock in status (re-syncing while
// a window is open), or nothing.
func (sr *shardRun) publish() {
	s := sr.r.s
	var oldest *heldTable
	for _, h := range sr.held {
		if oldest == nil || h.since.Before(oldest.since) {
			oldest = h
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case oldest != nil:
		st := &unit.ShardDDLStatus{Lock: oldest.state.ID, State: "waiting", DDLs: slices.Clone(oldest.reported),
			WaitingFor: []unit.ShardMember{}, Conflict: oldest.state.Conflict}
		if oldest.state.Role == shardddl.RoleConflict {
			st.State = "conflict"
		}
		for _, m := range oldest.state.WaitingFor {
			st.WaitingFor = append(st.WaitingFor, unit.ShardMember{Source: m.Source, Table: m.Table.String()})
		}
		s.prog.shard, s.prog.shardSince = st, oldest.since
	case sr.window != nil:
		s.prog.shard = &unit.ShardDDLStatus{Lock: "", State: "re-syncing", DDLs: []string{}, WaitingFor: []unit.ShardMember{}}
		for t := range sr.window.tables {
			target := s.router.Route(t.Schema, t.Table)
			s.prog.shard.Lock = shardddl.LockID(s.cfg.Name, lockTable(target))
			break
		}
		s.prog.shardSince = time.Time{}
	default:
		s.prog.shard, s.prog.shardSince = nil, time.Time{}
	}
}

// shardWarning is the status warning of a lock waited on for long.
func (s *Syncer) shardWarningLocked() string {
	st := s.prog.shard
	if st == nil || s.prog.shardSince.IsZero() || time.Since(s.prog.shardSince) < lockWaitWarnAfter {
		return ""
	}
	waited := time.Since(s.prog.shardSince).Round(time.Second)
	if st.State == "conflict" {
		return fmt.Sprintf("shard DDL lock %s has a conflict for %s: %s; resolve it with `dmctl task handle-error` "+
			"(replace the DDL on one shard) or `dmctl shard-ddl-lock unlock`", st.Lock, waited, st.Conflict)
	}
	members := make([]string, len(st.WaitingFor))
	for i, m := range st.WaitingFor {
		members[i] = m.Source + " " + m.Table
	}
	return fmt.Sprintf("waiting %s for shard DDL lock %s (%s): waiting for %s", waited, st.Lock,
		strings.Join(st.DDLs, "; "), strings.Join(members, ", "))
}

// wakeups is the channel that ends the read loop's wait when a lock moved
// (nil without shard DDL coordination).
func (sr *shardRun) wakeups() <-chan struct{} {
	if sr == nil {
		return nil
	}
	return sr.wake
}

// targetHash is a hash of SHOW CREATE TABLE of h's target table.
func (sr *shardRun) targetHash(ctx context.Context, h *heldTable) (string, error) {
	var name, create string
	q := "SHOW CREATE TABLE " + sqlschema.QuoteTable(h.target.Schema, h.target.Table)
	if err := sr.r.s.target.QueryRowContext(ctx, q).Scan(&name, &create); err != nil {
		return "", errs.Wrap(err, CodeShardDDL, "sync: read the merged table %s before its shard DDL", h.target)
	}
	sum := sha256.Sum256([]byte(create))
	return hex.EncodeToString(sum[:]), nil
}

// recordRun records, before the owner runs statement stmt of its lock at
// seq, what the target table looked like: a restarted owner compares.
func (sr *shardRun) recordRun(ctx context.Context, h *heldTable, seq int64, stmt int) error {
	hash, err := sr.targetHash(ctx, h)
	if err != nil {
		return err
	}
	st := sr.r.s.store
	_, err = st.db.ExecContext(ctx, "REPLACE INTO "+st.table(syncmeta.ShardDDLTable)+
		" (task, source, target_schema, target_table, owner_table, seq, stmt, before_hash) VALUES (?,?,?,?,?,?,?,?)",
		st.task, st.source, h.target.Schema, h.target.Table, h.source.String(), seq, stmt, hash)
	if err != nil {
		return errs.Wrap(err, CodeCheckpoint, "sync: record the shard DDL about to run on %s", h.target)
	}
	return nil
}

// ranUpTo is how many statements of the lock at seq a previous run of
// this owner ran on the target: the record names the statement it was
// about to run and the table before it; a table that changed since means
// that statement ran. A statement that changes nothing SHOW CREATE TABLE
// shows (ENGINE=InnoDB on an InnoDB table) counts as not run and runs
// again, which such statements bear.
func (sr *shardRun) ranUpTo(ctx context.Context, h *heldTable, seq int64) (int, error) {
	st := sr.r.s.store
	var recSeq int64
	var stmt int
	var owner, before string
	err := st.db.QueryRowContext(ctx, "SELECT owner_table, seq, stmt, before_hash FROM "+st.table(syncmeta.ShardDDLTable)+
		" WHERE task = ? AND source = ? AND target_schema = ? AND target_table = ?",
		st.task, st.source, h.target.Schema, h.target.Table).Scan(&owner, &recSeq, &stmt, &before)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, errs.Wrap(err, CodeCheckpoint, "sync: read the record of the shard DDL on %s", h.target)
	case recSeq != seq || owner != h.source.String():
		return 0, nil // recorded for another lock: none of this one's ran
	}
	now, err := sr.targetHash(ctx, h)
	if err != nil {
		return 0, err
	}
	if now == before {
		return stmt, nil
	}
	return stmt + 1, nil
}
