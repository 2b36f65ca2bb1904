package validate

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/validate/validmeta"
)

// The operator's side of the store (store.go): listing, counting and
// handling the validation errors.

// errorColumns are the columns list reads, in scanRecord's order; the time
// is read as Unix milliseconds, whatever the pool's parseTime and time zone.
const errorColumns = "id, src_table, target_table, kind, row_key, source_row, target_row, state, binlog_name, binlog_pos, " +
	"CAST(FLOOR(UNIX_TIMESTAMP(updated_at) * 1000) AS SIGNED)"

// list returns the task and source's errors in state (new, ignored,
// resolved, or all; "" is all), ordered by id.
func (s *store) list(ctx context.Context, state string) (_ []ErrorRecord, err error) {
	q := "SELECT " + errorColumns + " FROM " + s.table(validmeta.ErrorTable) + " WHERE task = ? AND source = ?"
	args := []any{s.task, s.source}
	switch state {
	case "", StateAll:
	case StateNew, StateIgnored, StateResolved:
		q += " AND state = ?"
		args = append(args, state)
	default:
		return nil, errs.New(CodeBadOp, false, "validate: list validation errors: state %q: use %s, %s, %s or %s",
			state, StateNew, StateIgnored, StateResolved, StateAll)
	}
	rows, err := s.db.QueryContext(ctx, q+" ORDER BY id", args...)
	if err != nil {
		return nil, s.storeErr(err, "list validation errors")
	}
	defer func() { err = errors.Join(err, rows.Close()) }()
	out := []ErrorRecord{}
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return nil, s.storeErr(err, "list validation errors")
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, s.storeErr(err, "list validation errors")
	}
	return out, nil
}

// scanRecord reads one row of errorColumns.
func scanRecord(rows *sql.Rows) (ErrorRecord, error) {
	var (
		rec      ErrorRecord
		key      string
		src, dst sql.NullString
		loc      binlog.Location
		ms       int64
	)
	err := rows.Scan(&rec.ID, &rec.Table, &rec.TargetTable, &rec.Kind, &key, &src, &dst, &rec.State, &loc.Name, &loc.Pos, &ms)
	if err != nil {
		return rec, err
	}
	rec.Key = json.RawMessage(key)
	if src.Valid {
		rec.SourceRow = json.RawMessage(src.String)
	}
	if dst.Valid {
		rec.TargetRow = json.RawMessage(dst.String)
	}
	rec.Binlog = loc.String()
	rec.Time = time.UnixMilli(ms).UTC()
	return rec, nil
}

// operate applies op to the error id of the task and source, or to all of
// them when all is true: ignore and resolve set the state (the time stays
// when the error was reported; with all, of the errors in state new),
// clear deletes. It returns how many errors changed (0 when the error
// already was in that state).
func (s *store) operate(ctx context.Context, op string, id int64, all bool) (int64, error) {
	var q string
	var args []any
	switch op {
	case OpIgnore, OpResolve:
		state := StateIgnored
		if op == OpResolve {
			state = StateResolved
		}
		q = "UPDATE " + s.table(validmeta.ErrorTable) + " SET state = ?, updated_at = updated_at"
		args = append(args, state)
	case OpClear:
		q = "DELETE FROM " + s.table(validmeta.ErrorTable)
	default:
		return 0, errs.New(CodeBadOp, false, "validate: validation error operation %q: use %s, %s or %s", op, OpIgnore, OpResolve, OpClear)
	}
	q += " WHERE task = ? AND source = ?"
	args = append(args, s.task, s.source)
	switch {
	case all && id != 0:
		return 0, errs.New(CodeBadOp, false, "validate: %s validation errors: give an error id or all, not both", op)
	case !all && id <= 0:
		return 0, errs.New(CodeBadOp, false, "validate: %s validation errors: give the id of an error (see `dmctl validation errors TASK`) or all", op)
	case !all:
		q += " AND id = ?"
		args = append(args, id)
	case op != OpClear:
		// "all" settles the errors still to handle; clear removes every one.
		q += " AND state = ?"
		args = append(args, StateNew)
	}
	what := fmt.Sprintf("%s validation errors", op)
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, s.storeErr(err, what)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, s.storeErr(err, what)
	}
	if n == 0 && !all {
		return 0, s.checkExists(ctx, id)
	}
	return n, nil
}

// checkExists returns a CodeErrorNotFound error when the task and source
// have no error id.
func (s *store) checkExists(ctx context.Context, id int64) error {
	var n int
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.table(validmeta.ErrorTable)+
		" WHERE task = ? AND source = ? AND id = ?", s.task, s.source, id).Scan(&n)
	if err != nil {
		return s.storeErr(err, fmt.Sprintf("look for validation error %d", id))
	}
	if n == 0 {
		return errs.New(CodeErrorNotFound, false, "validation error %d not found for task %q on source %q; list them with `dmctl validation errors %s --state all`",
			id, s.task, s.source, s.task)
	}
	return nil
}

// counts counts the task and source's errors by state.
func (s *store) counts(ctx context.Context) (_ unit.ValidationErrorCounts, err error) {
	var c unit.ValidationErrorCounts
	rows, err := s.db.QueryContext(ctx, "SELECT state, COUNT(*) FROM "+s.table(validmeta.ErrorTable)+
		" WHERE task = ? AND source = ? GROUP BY state", s.task, s.source)
	if err != nil {
		return c, s.storeErr(err, "count validation errors")
	}
	defer func() { err = errors.Join(err, rows.Close()) }()
	for rows.Next() {
		var state string
		var n int64
		if err := rows.Scan(&state, &n); err != nil {
			return c, s.storeErr(err, "count validation errors")
		}
		switch state {
		case StateNew:
			c.New = n
		case StateIgnored:
			c.Ignored = n
		case StateResolved:
			c.Resolved = n
		}
	}
	if err := rows.Err(); err != nil {
		return c, s.storeErr(err, "count validation errors")
	}
	return c, nil
}
