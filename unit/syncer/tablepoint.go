package syncer

import (
	"context"
	"errors"
	"fmt"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/unit/syncer/syncmeta"
)

// Table points. Safe mode makes replaying a change idempotent only where a
// key identifies its row: for a table without a key, a replayed INSERT (as
// REPLACE, which replaces nothing) adds the row once more. Workers commit
// batches inside a source transaction (a large one is never held whole),
// and a restart replays from the checkpoint, the transaction's start, so a
// key-less table would get every row already applied twice.
//
// Every change of a key-less target table goes to one worker, in binlog
// order (its only causality key is the table), and a worker commits its
// changes in order. So each batch records, in the same target transaction,
// the position of its last change of each key-less table (<meta-schema>.
// syncer_table_point): every change of that table up to the position is on
// the target, none after it. A restarted run skips exactly those changes.

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

// tablePoint is the last change of one key-less table a batch applies.
type tablePoint struct {
	table tableName
	at    rowPoint
}

// keylessPoints appends to out the last change of each key-less table in
// batch (usually none or one table, so a slice is searched).
func keylessPoints(out []tablePoint, batch []*change) []tablePoint {
	out = out[:0]
next:
	for i := len(batch) - 1; i >= 0; i-- {
		c := batch[i]
		if len(c.table.key) > 0 {
			continue
		}
		for _, p := range out {
			if p.table == c.table.target {
				continue next
			}
		}
		out = append(out, tablePoint{table: c.table.target, at: c.point()})
	}
	return out
}

// point is the position of c in the binlog.
func (c *change) point() rowPoint { return rowPoint{loc: c.loc, row: c.row} }

// tablePointStmt records, inside a worker's batch transaction, the last
// change of a key-less table the batch applies.
func (s *checkpointStore) tablePointStmt(p tablePoint) stmt {
	return stmt{sql: "REPLACE INTO " + s.table(tablePointTable) +
		" (task, source, db_name, tbl_name, binlog_name, binlog_pos, row_index) VALUES (?,?,?,?,?,?,?)",
		args: []any{s.task, s.source, p.table.Schema, p.table.Table, p.at.loc.Name, p.at.loc.Pos, p.at.row}}
}

// tablePoints returns the recorded table points of the task and source
// that lie after from (the others cannot be replayed).
func (s *checkpointStore) tablePoints(ctx context.Context, from binlog.Location) (map[tableName]rowPoint, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT db_name, tbl_name, binlog_name, binlog_pos, row_index FROM "+
		s.table(tablePointTable)+" WHERE task = ? AND source = ?", s.task, s.source)
	if err != nil {
		return nil, errs.Wrap(err, CodeCheckpoint, "sync: load table points of task %q source %q", s.task, s.source)
	}
	out := map[tableName]rowPoint{}
	for rows.Next() {
		var t tableName
		var p rowPoint
		if err := rows.Scan(&t.Schema, &t.Table, &p.loc.Name, &p.loc.Pos, &p.row); err != nil {
			return nil, errors.Join(fmt.Errorf("sync: scan table point: %w", err), rows.Close())
		}
		if p.loc.Compare(from) > 0 {
			out[t] = p
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, errs.Wrap(err, CodeCheckpoint, "sync: load table points of task %q source %q", s.task, s.source)
	}
	return out, nil
}

// replayed reports whether c is a change of a key-less table that a
// previous run already applied (at or before the table's point); once a
// table's changes pass its point, the point is forgotten.
func (r *reader) replayed(c *change) bool {
	if len(r.points) == 0 || len(c.table.key) > 0 {
		return false
	}
	p, ok := r.points[c.table.target]
	if !ok {
		return false
	}
	if c.point().after(p) {
		delete(r.points, c.table.target)
		return false
	}
	return true
}
