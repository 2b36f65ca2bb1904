package syncer

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/ha/shardddl"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/shardschema"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/unit"
)

// Optimistic shard DDL (shard-mode: optimistic; docs/design.md "Optimistic
// mode" for the protocol, "Shard DDL in the sync unit" for this side).
//
// DML keeps flowing. A member table's DDL (ALTER, CREATE / DROP INDEX) is
// applied after every earlier change, then reported with the table's
// schema before and after it (shard_schema.go); the lock decides what the
// merged table needs for it, in etcd, and the table's state says what to
// do:
//
//   - resolved: go on (the target needed nothing, or has it already);
//   - owner: run the decided statements on the target (Begin before, Done
//     after), then go on; owner-pending after a restart between the two:
//     run only what the target does not show yet;
//   - waiting: another member's target change is outstanding; the table is
//     held as in pessimistic mode and re-synced from its DDL once its
//     change is decided and run;
//   - conflict: nothing is applied; the subtask pauses with the
//     non-resumable shard-ddl-conflict error naming the tables and
//     statements, until handle-error replaces or skips the DDL (the DDL is
//     reported again, its replacement's schema computed the same way) or
//     shard-ddl-lock unlock --force-remove drops it. Outside strict mode
//     the lock keeps the conflict open for convergence: once every member
//     made the same change, `task resume` goes on.
//
// A watcher per group learns of a target change that another member's step
// made this source's table own (a table left the group, conflicts
// converged); the read loop runs it at the next transaction boundary.

// CodeShardDDLConflict is the error of an optimistic DDL that conflicts
// with the other members' schemas.
const CodeShardDDLConflict = "shard-ddl-conflict"

// optLockState is the pessimistic-shaped view of an optimistic state that
// status and the hold machinery use.
func optLockState(st shardddl.OptState) shardddl.LockState {
	return shardddl.LockState{ID: st.ID, Role: st.Role, Seq: st.Seq, DDLs: st.DDLs, Owner: st.Owner, Resolved: st.Resolved,
		Conflict: st.Conflict, WaitingFor: st.WaitingFor, Location: st.Location}
}

// optFingerprint is what an optimistic watcher compares.
func optFingerprint(st shardddl.OptState) string {
	var b strings.Builder
	b.WriteString(string(st.Role) + "|" + strconv.FormatInt(st.Seq, 10) + "|" + strconv.FormatInt(st.Version, 10))
	for _, m := range st.WaitingFor {
		b.WriteString("|" + m.String())
	}
	return b.String()
}

// optStart loads the member tables' schemas as of the run's start,
// publishes the shares and starts a watcher per group.
func (sr *shardRun) optStart(ctx context.Context, groups map[tableName][]tableName) error {
	ss, err := sr.r.s.loadShardSchemas(ctx)
	if err != nil {
		return err
	}
	ss.rewindTo(sr.r.tr.Cur)
	sr.schemas = ss
	for target, tables := range groups {
		if err := sr.putShare(ctx, target, tables); err != nil {
			return err
		}
	}
	for target := range sr.shares {
		sr.watch(target)
	}
	return nil
}

// optShare publishes target's share with the tables' schemas and runs a
// target change it made one of them own.
func (sr *shardRun) optShare(ctx context.Context, target tableName, tables []tableName) error {
	if err := sr.schemas.first(ctx, tables); err != nil {
		return err
	}
	states, err := sr.c.ShareOptimistic(ctx, lockTable(target), sr.schemas.models(tables))
	if err != nil {
		return sr.coordError(err, "publish the tables of source %s in the optimistic sharding group of %s", sr.r.s.cfg.SourceID, target)
	}
	return sr.runOwned(ctx, target, states)
}

// runOwned runs the target changes that states make a table of this source
// own, except for a held table (its DDL's turn comes) and one whose DDL
// the read loop has not reached (a replay after a restart: the rows before
// that DDL go first).
func (sr *shardRun) runOwned(ctx context.Context, target tableName, states map[shardddl.Table]shardddl.OptState) error {
	tables := make([]shardddl.Table, 0, len(states))
	for t := range states {
		tables = append(tables, t)
	}
	slices.SortFunc(tables, func(a, b shardddl.Table) int { return strings.Compare(a.String(), b.String()) })
	for _, lt := range tables {
		st := states[lt]
		if st.Role != shardddl.RoleOwner && st.Role != shardddl.RoleOwnerPending {
			continue
		}
		t := tableName{Schema: lt.Schema, Table: lt.Name}
		if _, held := sr.held[t]; held || sr.releasedTable(t) != nil {
			continue
		}
		if loc := st.Location; loc.Name != "" && !(shardddl.Location{Name: loc.Name, Pos: loc.Pos}).Before(
			shardddl.Location{Name: sr.r.tr.Cur.Name, Pos: sr.r.tr.Cur.Pos}) {
			sr.deferred[lt] = optFingerprint(st) // the watcher does not wake the loop for it again
			continue
		}
		if err := sr.r.disp.barrier(ctx); err != nil {
			return err
		}
		if err := sr.runOptChange(ctx, target, t, st); err != nil {
			return err
		}
	}
	return nil
}

// runOptChange runs the target change st makes table t own, and records it.
func (sr *shardRun) runOptChange(ctx context.Context, target, t tableName, st shardddl.OptState) error {
	d := sr.r.ddl
	lt, ltarget := lockTable(t), lockTable(target)
	run := st.Run
	if st.Role == shardddl.RoleOwner {
		if _, err := sr.c.BeginOptimistic(ctx, ltarget, lt, st.Version); err != nil {
			return sr.coordError(err, "begin the change of lock %s", st.ID)
		}
	} else {
		actual, err := sqlschema.ReadTable(ctx, sr.r.s.target, target.Schema, target.Table)
		if err != nil {
			return errs.Wrap(err, CodeShardDDL, "sync: read merged table %s to finish the change of lock %s", target, st.ID)
		}
		if run, err = shardschema.Remaining(st.From, st.To, actual, target.Schema, target.Table); err != nil {
			return errs.New(CodeShardDDL, false, "sync: the change of lock %s to version %d: %w; see `dmctl shard-ddl-lock`",
				st.ID, st.Version, err)
		}
		sr.logger.Info("optimistic shard DDL: a restarted owner runs what the target lacks of its change", zap.String("lock", st.ID),
			zap.Strings("decided", st.Run), zap.Strings("remaining", run))
	}
	for _, q := range run {
		err := d.exec(ctx, targetDDL{sql: q, event: filter.EvAlterTable, source: t, target: target})
		if err == nil {
			continue
		}
		if ddlAlreadyDone[dbconn.ErrorNumber(err)] {
			sr.logger.Info("optimistic shard DDL had already run on the target", zap.String("lock", st.ID), zap.String("sql", q), zap.Error(err))
			continue
		}
		if errs.IsResumable(err) || ctx.Err() != nil {
			return errs.Wrap(err, CodeDDL, "sync: run the change of lock %s on %s", st.ID, target)
		}
		return errs.New(CodeDDL, false, "sync: the target rejected %q, the change of shard DDL lock %s to version %d: %w; "+
			"fix the merged table and resume (the change runs again, only what is missing), or remove the change with "+
			"`dmctl shard-ddl-lock unlock --force-remove`", q, st.ID, st.Version, err)
	}
	if _, err := sr.c.DoneOptimistic(ctx, ltarget, lt, st.Version); err != nil {
		return sr.coordError(err, "record the run of the change of lock %s", st.ID)
	}
	d.ddls.Add(uint64(len(run)))
	d.metrics.ddl()
	d.tables.invalidate()
	sr.logger.Info("optimistic shard DDL: ran the change of the merged table as its owner", zap.String("lock", st.ID),
		zap.Stringer("table", t), zap.Int64("version", st.Version), zap.Strings("ddls", run))
	return nil
}

// optCreated gives a member table created in the binlog its first schema,
// from the CREATE TABLE statement as translated.
func (sr *shardRun) optCreated(ctx context.Context, st targetDDL, start binlog.Location) error {
	if sr.schemas == nil {
		return nil
	}
	if row, ok := sr.schemas.rowAt(st.source, start); ok {
		sr.schemas.cur[st.source] = row.after
		return nil
	}
	v, err := sr.schemas.shadow(ctx, st.source, "", []targetDDL{st})
	if err != nil {
		return err
	}
	return sr.schemas.put(ctx, st.source, schemaRow{at: start, ddls: []string{st.sql}, after: v}, sr.r.saved)
}

// optDDL handles the DDL of held-candidate h in optimistic mode: it
// computes the table's schema after it (or finds it stored, on a replay),
// reports it and acts on the state; done is false when the table is held.
func (sr *shardRun) optDDL(ctx context.Context, d *ddlApplier, h *heldTable, op *handleOp) (done bool, err error) {
	ss := sr.schemas
	row, stored := ss.rowAt(h.source, h.start)
	if !stored || op != nil {
		before, ok := ss.cur[h.source]
		if stored {
			before = row.before
		} else if !ok {
			if err := ss.first(ctx, []tableName{h.source}); err != nil {
				return false, err
			}
			before = ss.cur[h.source]
			sr.logger.Warn("optimistic shard mode: a table reached a DDL before the unit knew its schema; its schema before the DDL "+
				"is taken from the source now", zap.Stringer("table", h.source), zap.Stringer("binlog", h.start))
		}
		ddls := h.ddls
		if op != nil && op.op == unit.HandleErrorReplace {
			if ddls, err = sr.replacement(d, h, op); err != nil {
				return false, err
			}
		}
		after := before
		if op == nil || op.op == unit.HandleErrorReplace {
			if after, err = ss.shadow(ctx, h.source, before.create, ddls); err != nil {
				d.unit.setStuck(&stuckDDL{start: h.start, end: h.end})
				return false, err
			}
		}
		row = schemaRow{at: h.start, before: before, after: after}
		for _, st := range ddls {
			row.ddls = append(row.ddls, st.sql)
		}
		if op != nil {
			sr.logger.Info("handle-error on an optimistic shard DDL: reported again", zap.String("op", op.op),
				zap.Stringer("table", h.source), zap.Strings("ddls", row.ddls), zap.Stringer("binlog", h.start))
		}
		if err := ss.put(ctx, h.source, row, sr.r.saved); err != nil {
			return false, err
		}
	}
	ss.cur[h.source] = row.after
	h.reported = row.ddls
	target, table := lockTable(h.target), lockTable(h.source)
	loc := shardddl.Location{Name: h.start.Name, Pos: h.start.Pos, GTID: h.from.GTID}
	// A replay from a checkpoint before this DDL of a table whose later
	// DDL is reported: this one was decided and run before.
	prev, err := sr.c.StateOptimistic(ctx, target, table)
	if err != nil && !errors.Is(err, shardddl.ErrNotMember) {
		return false, sr.coordError(err, "read the optimistic lock of %s", h.target)
	}
	if loc.Before(prev.Location) {
		d.tables.invalidate()
		return true, nil
	}
	// A change another step gave this table (a table left, conflicts
	// converged) runs before the table's next DDL is reported: the lock
	// refuses a report from the owner of an unfinished change.
	if (prev.Role == shardddl.RoleOwner || prev.Role == shardddl.RoleOwnerPending) && prev.Location != loc {
		if err := sr.runOptChange(ctx, h.target, h.source, prev); err != nil {
			return false, err
		}
	}
	rep := shardddl.OptReport{Target: target, Table: table, DDLs: row.ddls, Before: row.before.model, After: row.after.model,
		Location: loc, Strict: sr.r.s.cfg.StrictOptimisticShardMode}
	st, err := sr.c.ReportOptimistic(ctx, rep)
	if errors.Is(err, shardddl.ErrNotMember) {
		if err := sr.changeShare(ctx, h.source, true); err != nil {
			return false, err
		}
		st, err = sr.c.ReportOptimistic(ctx, rep)
	}
	if err != nil {
		return false, sr.coordError(err, "report the DDL of %s to its optimistic lock", h.source)
	}
	done, err = sr.optAct(ctx, d, h, st)
	if err == nil {
		sr.clearConflict(st.ID)
	}
	return done, err
}

// clearConflict forgets the conflict of lock id shown since a run paused
// at it, once a run passed (or holds) the DDL.
func (sr *shardRun) clearConflict(id string) {
	s := sr.r.s
	s.mu.Lock()
	if c := s.prog.shardConflict; c != nil && c.Lock == id {
		s.prog.shardConflict = nil
	}
	s.mu.Unlock()
}

// optAct does what st asks of table h at its DDL; done is true when the
// table goes on past it.
func (sr *shardRun) optAct(ctx context.Context, d *ddlApplier, h *heldTable, st shardddl.OptState) (bool, error) {
	for range 8 {
		h.state = optLockState(st)
		switch st.Role {
		case shardddl.RoleOwner, shardddl.RoleOwnerPending:
			sr.setState(h, "executing")
			if err := sr.runOptChange(ctx, h.target, h.source, st); err != nil {
				return false, err
			}
			nst, err := sr.c.StateOptimistic(ctx, lockTable(h.target), lockTable(h.source))
			if err != nil {
				return false, sr.coordError(err, "read the lock of %s", h.target)
			}
			st = nst
			continue
		case shardddl.RoleResolved:
			d.tables.invalidate()
			if st.Resolved != "" && st.Resolved != shardddl.OptExecuted {
				sr.logger.Info("optimistic shard DDL: the merged table needs nothing more for it", zap.String("lock", st.ID),
					zap.Stringer("table", h.source), zap.String("state", st.Resolved), zap.Strings("ddls", h.reported))
			}
			return true, nil
		case shardddl.RoleWaiting:
			h.optPrint = optFingerprint(st)
			return false, nil
		case shardddl.RoleConflict:
			d.unit.setStuck(&stuckDDL{start: h.start, end: h.end})
			s := sr.r.s
			s.mu.Lock()
			s.prog.shardConflict = &unit.ShardDDLStatus{Lock: st.ID, State: "conflict", DDLs: slices.Clone(h.reported),
				WaitingFor: []unit.ShardMember{}, Conflict: st.Conflict}
			s.mu.Unlock()
			return false, errs.New(CodeShardDDLConflict, false, "sync: shard DDL of %s at binlog %s conflicts in lock %s: %s",
				h.source, h.start, st.ID, st.Conflict)
		default:
			return false, errs.New(CodeShardDDL, true, "sync: the optimistic lock %s has no report of the DDL of %s", st.ID, h.source)
		}
	}
	return false, errs.New(CodeShardDDL, true, "sync: the optimistic lock %s keeps giving %s target changes to run", st.ID, h.source)
}

// watchOpt starts the watcher of target's optimistic group unless it runs:
// it wakes the read loop when a held table's state moved or a table of
// this source owns a target change.
func (sr *shardRun) watchOpt(target tableName) {
	if _, ok := sr.watchers[target]; ok {
		return
	}
	want := map[shardddl.Table]string{}
	for _, h := range sr.held {
		if h.target == target {
			want[lockTable(h.source)] = h.optPrint
		}
	}
	deferred := maps.Clone(sr.deferred)
	ctx, cancel := context.WithCancel(sr.watchCtx)
	sr.watchers[target] = cancel
	sr.wg.Add(1)
	go func() {
		defer sr.wg.Done()
		_, err := sr.c.WaitOptimistic(ctx, lockTable(target), func(states map[shardddl.Table]shardddl.OptState) bool {
			for t, st := range states {
				if _, isHeld := want[t]; !isHeld && (st.Role == shardddl.RoleOwner || st.Role == shardddl.RoleOwnerPending) &&
					deferred[t] != optFingerprint(st) {
					return true
				}
			}
			for t, fp := range want {
				if optFingerprint(states[t]) != fp {
					return true
				}
			}
			return false
		})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			sr.logger.Warn("watch of an optimistic shard DDL lock failed; the read loop asks again", zap.Stringer("target", target), zap.Error(err))
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		sr.markDirty(target)
	}()
}

// pollOpt handles target's optimistic group after its watcher fired: held
// tables whose change was decided and run go on (re-synced), target
// changes this source owns run.
func (sr *shardRun) pollOpt(ctx context.Context, d *ddlApplier, target tableName) error {
	states, err := sr.c.StatesOptimistic(ctx, lockTable(target))
	if err != nil {
		return sr.coordError(err, "read the optimistic lock of %s", target)
	}
	for _, h := range sr.heldOf(target) {
		done, err := sr.optAct(ctx, d, h, states[lockTable(h.source)])
		if err != nil {
			return err
		}
		if done {
			delete(sr.held, h.source)
			sr.released = append(sr.released, h)
		}
	}
	return sr.runOwned(ctx, target, states)
}
