package syncer

import (
	"context"
	"fmt"
	"hash/maphash"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/fkeys"
	"github.com/dmworker/dm-worker/pkg/rowimage"
)

// Foreign keys. The source does not write the changes its cascades make
// (ON DELETE/UPDATE CASCADE, SET NULL) to the binlog, so the target must
// make them itself: tables that foreign keys of the target connect (a
// group, fkeys.Groups) are applied
//
//   - with the source session's foreign_key_checks: a rows event carries the
//     session's setting (flag rowsNoForeignKeyChecks), and a batch sets the
//     target session's to it around that table's statements, so a parent's
//     change cascades on the target as it did on the source, and a change
//     the source made with checks off (orphans) is made with checks off;
//   - in binlog order on one apply worker (every change of a group has the
//     group's one causality key), so a parent's change and its children's
//     are never reordered or split across workers, at any depth of keys and
//     for self-referencing tables;
//   - without compaction and without merging deletes into one statement
//     (both reorder rows, and with checks on a RESTRICT key or a cascade
//     sees the order);
//   - exactly once across a crash, as ordered tables: each batch records the
//     table's last applied change and a restarted run skips up to it and
//     applies the rest without safe mode (tablepoint.go);
//   - in safe mode (where no table point exists, or the task sets
//     safe-mode), with statements that never delete a row to rewrite it:
//     REPLACE deletes the old row first, which cascades to its children (or
//     fails on RESTRICT), so a row is written with INSERT IGNORE ... ON
//     DUPLICATE KEY UPDATE, an update that moves a key with UPDATE IGNORE
//     followed by that upsert (after dropping a row replay wrote again at
//     the old key when the new one is taken, dropReplayedStmt), a delete
//     with DELETE IGNORE. IGNORE turns a
//     foreign key refusal into a skipped row: in a replay it means the row's
//     parent (or child) was already changed by later events the target has
//     applied, whose own replay follows.
//
// Group tables' target sessions otherwise keep the pool's setting
// (foreign_key_checks=0 unless target-database.session sets it), which DDL,
// checkpoints and other tables use.

// rowsNoForeignKeyChecks is the rows event flag a session with
// foreign_key_checks=0 writes (NO_FOREIGN_KEY_CHECKS_F).
const rowsNoForeignKeyChecks = 0x0002

// setForeignKeyGroup sets ti's foreign key group from the target's keys,
// read once after each invalidation. A table in a group is not compacted.
func (c *tableCache) setForeignKeyGroup(ctx context.Context, ti *tableInfo) error {
	if c.groups == nil {
		keys, err := fkeys.Read(ctx, c.db, nil)
		if err != nil {
			return errs.Wrap(err, CodeTableInfo, "sync: read the target's foreign keys")
		}
		c.groups = fkeys.NewGroups(keys)
	}
	if g, ok := c.groups.Of(ti.Target); ok {
		ti.fkGroup = g
		ti.compact = false
	}
	return nil
}

// appendGroupKey appends the causality key of ti's foreign key group.
func appendGroupKey(keys []uint64, ti *tableInfo, seed maphash.Seed, buf []byte) ([]uint64, []byte) {
	buf = append(append(buf[:0], "\x00fk-group\x00"...), ti.fkGroup...)
	return append(keys, maphash.Bytes(seed, buf)), buf
}

// fkSession tracks, while one batch's statements are built, the target
// session's foreign_key_checks: the first group table's change saves the
// pool's setting in a user variable (fkSavedVar) and sets the change's,
// later ones set it when it differs, and restore puts the saved one back
// before COMMIT. A batch that fails on the way is rolled back by
// rollbackConn, which restores it too.
type fkSession struct {
	saved bool
	on    bool
}

const fkSavedVar = "@dm_saved_foreign_key_checks"

// fkRestoreAfterRollback puts back the setting a failed batch saved; on a
// connection no batch changed it leaves it as it is.
const fkRestoreAfterRollback = "SET foreign_key_checks=IFNULL(" + fkSavedVar + ", @@session.foreign_key_checks)"

func (f *fkSession) set(l *stmtList, on bool) {
	v := "0"
	if on {
		v = "1"
	}
	switch {
	case !f.saved:
		l.add(stmt{sql: "SET " + fkSavedVar + "=@@session.foreign_key_checks, foreign_key_checks=" + v})
	case f.on != on:
		l.add(stmt{sql: "SET foreign_key_checks=" + v})
	}
	f.saved, f.on = true, on
}

func (f *fkSession) restore(l *stmtList) {
	if f.saved {
		l.add(stmt{sql: "SET foreign_key_checks=" + fkSavedVar})
	}
}

// groupStatements writes changes[i] of a foreign key group's table, and
// the inserts into the same table right after it that can share its
// statement; it returns the index of the next change to write.
func groupStatements(l *stmtList, f *fkSession, changes []*change, i int) int {
	c := changes[i]
	ti := c.table
	f.set(l, c.fkChecks)
	j := i + 1
	switch {
	case !c.safe && c.kind == kindInsert:
		rows := [][]any{c.after}
		for j < len(changes) && changes[j].kind == kindInsert && changes[j].table == ti && !changes[j].safe &&
			changes[j].fkChecks == c.fkChecks {
			rows = append(rows, changes[j].after)
			j++
		}
		l.add(insertStmt(ti, rows, false))
	case !c.safe && c.kind == kindUpdate:
		l.add(updateStmt(ti, c.before, c.after))
	case c.kind == kindDelete && c.safe && c.fkChecks && len(ti.Key) > 0:
		s := deleteStmt(ti, c.before)
		s.sql = "DELETE IGNORE" + s.sql[len("DELETE"):]
		l.add(s)
	case c.kind == kindDelete:
		l.add(deleteStmt(ti, c.before))
	case !c.fkChecks || len(ti.Key) == 0:
		// Safe mode with checks off (no cascade happens) or without a key
		// to upsert by: the usual REPLACE forms.
		if c.kind == kindUpdate {
			l.add(deleteStmt(ti, c.before))
		}
		l.add(insertStmt(ti, [][]any{c.after}, true))
	default:
		if c.kind == kindUpdate && keyMoved(ti, c.before, c.after) {
			l.add(dropReplayedStmt(ti, c.before, c.after))
			s := updateStmt(ti, c.before, c.after)
			s.sql = "UPDATE IGNORE" + s.sql[len("UPDATE"):]
			l.add(s)
		}
		s := upsertStmt(ti, [][]any{c.after})
		s.sql = "INSERT IGNORE" + s.sql[len("INSERT"):]
		l.add(s)
	}
	return j
}

// dropReplayedStmt deletes, when the row an update moves to a new key
// already holds that key, the row holding the old key: the update was
// applied before the crash (no other row can have held the new key before
// it, the source would have refused it), so a row at the old key is one
// that replaying earlier events wrote again, and moving it onto the new key
// would collide, cascade included. Its children go with it, as they were
// written again too.
func dropReplayedStmt(ti *tableInfo, before, after []any) stmt {
	w, args := where(ti, before)
	wa, aargs := where(ti, after)
	return stmt{sql: "DELETE IGNORE FROM " + ti.Target.String() + " WHERE " + w +
		" AND EXISTS (SELECT 1 FROM (SELECT 1 FROM " + ti.Target.String() + " WHERE " + wa + " LIMIT 1) AS dm_moved)",
		args: append(args, aargs...)}
}

// keyMoved reports whether an update changes the row's key values.
func keyMoved(ti *tableInfo, before, after []any) bool {
	return string(rowimage.AppendValues(nil, before, ti.Key, false)) != string(rowimage.AppendValues(nil, after, ti.Key, false))
}

// fkCompareTimeout bounds warnForeignKeys, which a run does before it
// reads the binlog.
const fkCompareTimeout = 10 * time.Second

// warnForeignKeys compares the source's cascading foreign keys of the
// replicated tables with the target's and adds a status warning (once per
// key) for each the target does not reproduce. It only warns: an error
// reading either side is logged.
func (s *Syncer) warnForeignKeys(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, fkCompareTimeout)
	defer cancel()
	problems, err := s.foreignKeyProblems(ctx)
	if err != nil {
		s.logger.Warn("could not compare the source's foreign keys with the target's", zap.Error(err))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prog.fkWarned == nil {
		s.prog.fkWarned = map[string]bool{}
	}
	for _, p := range problems {
		msg := p.Message()
		if s.prog.fkWarned[msg] {
			continue
		}
		s.prog.fkWarned[msg] = true
		s.prog.warnings = append(s.prog.warnings, msg)
		s.logger.Warn(msg, zap.Stringer("table", p.Key.Child), zap.String("foreign-key", p.Key.Name))
	}
}

// foreignKeyProblems reads the source's keys of the selected schemas and
// the target's, and returns the cascading keys the target lacks.
func (s *Syncer) foreignKeyProblems(ctx context.Context) ([]fkeys.Problem, error) {
	// One connection from the worker's source budget, for the time of
	// the read.
	srcDB, err := s.sources.Open(s.source, s.source.DriverConfig(), s.cfg.Name, 1)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	defer func() {
		if cerr := srcDB.Close(); cerr != nil {
			s.logger.Warn("close source pool", zap.Error(cerr))
		}
	}()
	srcKeys, err := fkeys.Read(ctx, srcDB, nil)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if len(srcKeys) == 0 {
		return nil, nil
	}
	tgtKeys, err := fkeys.Read(ctx, s.target, nil)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	tables := map[tableName]bool{}
	for _, k := range srcKeys {
		if k.Cascades() {
			tables[s.router.Route(k.Child.Schema, k.Child.Table)] = false
		}
	}
	for t := range tables {
		tt, err := rowimage.ReadTarget(ctx, s.target, t)
		if err != nil {
			return nil, fmt.Errorf("target table %s: %w", t, err)
		}
		tables[t] = tt != nil && len(tt.Columns) > 0
	}
	sel := fkeys.Selection{
		Allowed: func(t tableName) bool { return s.filter.TableAllowed(t.Schema, t.Table) },
		Route:   func(t tableName) tableName { return s.router.Route(t.Schema, t.Table) },
	}
	return fkeys.Missing(srcKeys, sel, tgtKeys, func(t tableName) bool { return tables[t] }), nil
}
