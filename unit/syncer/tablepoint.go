package syncer

import (
	"context"
	"errors"
	"strings"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/unit/syncer/syncmeta"
)

// Table points: exact replay for the tables safe mode cannot replay.
//
// Safe mode makes replaying a change idempotent only where REPLACE by key
// is harmless. Two kinds of tables break that:
//   - a table without a key: a replayed INSERT (as REPLACE, which replaces
//     nothing) adds the row once more, and workers commit batches inside a
//     source transaction (a large one is never held whole), so a restart
//     from the checkpoint, the transaction's start, would repeat rows;
//   - a table of a foreign key group (foreign_keys.go): REPLACE deletes the
//     old row first, which cascades to its children, and replaying a
//     parent's insert writes again a row that a later change moved or
//     removed.
//
// Every change of such an ordered table goes to one apply worker in binlog
// order: its only causality key is the table (no key) or its group. So each
// batch records, in the same target transaction, the position of its last
// change of each ordered source table (<meta-schema>.syncer_table_point):
// every change of that table up to the position is on the target, none
// after it. A restarted run skips exactly those changes and applies the
// rest as new ones, without safe mode (unless the task sets safe-mode). An
// ordered table without a point had none of its changes applied by the
// unit since the point table existed; it keeps the ordinary safe mode.

const tablePointTable = syncmeta.TablePointTable

// rowPoint is the position of one row change: the location after its rows
// event and its index among the event's changes.
type rowPoint struct {
	loc binlog.Location
	row int
}

// after reports whether p comes after q in the binlog.
func (p rowPoint) after(q rowPoint) bool {
	if c := p.loc.Compare(q.loc); c != 0 {
		return c > 0
	}
	return p.row > q.row
}

// point is the position of c in the binlog.
func (c *change) point() rowPoint { return rowPoint{loc: c.loc, row: c.row} }

// ordered reports whether every change of the table goes to one apply
// worker in binlog order and is replayed exactly through its table point.
func (ti *tableInfo) ordered() bool { return len(ti.Key) == 0 || ti.fkGroup != "" }

// tablePointStmt records, inside a worker's batch transaction, the last
// change of each ordered source table in batch; ok is false when the batch
// has none (a batch usually holds no or one such table, so a slice is
// searched).
func (s *checkpointStore) tablePointStmt(batch []*change) (_ stmt, ok bool) {
	var last []*change // one per ordered source table, in order of appearance
next:
	for _, c := range batch {
		if !c.table.ordered() {
			continue
		}
		for i, l := range last {
			if l.table.Source == c.table.Source {
				last[i] = c
				continue next
			}
		}
		last = append(last, c)
	}
	if len(last) == 0 {
		return stmt{}, false
	}
	var b strings.Builder
	b.WriteString("REPLACE INTO " + s.table(tablePointTable) +
		" (task, source, source_schema, source_table, binlog_name, binlog_pos, row_index) VALUES ")
	args := make([]any, 0, 7*len(last))
	for i, c := range last {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?)")
		args = append(args, s.task, s.source, c.table.Source.Schema, c.table.Source.Table, c.loc.Name, c.loc.Pos, c.row)
	}
	return stmt{sql: b.String(), args: args}, true
}

// tablePoints returns the recorded table points of the task and source.
func (s *checkpointStore) tablePoints(ctx context.Context) (_ map[tableName]rowPoint, err error) {
	rows, err := s.db.QueryContext(ctx, "SELECT source_schema, source_table, binlog_name, binlog_pos, row_index FROM "+
		s.table(tablePointTable)+" WHERE task = ? AND source = ?", s.task, s.source)
	if err != nil {
		return nil, errs.Wrap(err, CodeCheckpoint, "sync: load the table points of task %q source %q", s.task, s.source)
	}
	defer func() { err = errors.Join(err, rows.Close()) }()
	out := map[tableName]rowPoint{}
	for rows.Next() {
		var t tableName
		var p rowPoint
		if err := rows.Scan(&t.Schema, &t.Table, &p.loc.Name, &p.loc.Pos, &p.row); err != nil {
			return nil, errs.Wrap(err, CodeCheckpoint, "sync: read the table points of task %q source %q", s.task, s.source)
		}
		out[t] = p
	}
	if err := rows.Err(); err != nil {
		return nil, errs.Wrap(err, CodeCheckpoint, "sync: read the table points of task %q source %q", s.task, s.source)
	}
	return out, nil
}
