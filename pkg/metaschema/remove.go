package metaschema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Removed is what RemoveTask deleted from one table.
type Removed struct {
	// Table is `schema`.`table`.
	Table string `json:"table"`
	// Rows is the number of rows of the task deleted.
	Rows int64 `json:"rows"`
	// Sources are the sources whose rows were deleted, sorted.
	Sources []string `json:"sources"`
}

// RemoveTaskRows deletes every row of task (all sources) from the given
// tables of schema (each keyed by task and source) on the target db, in
// one transaction, and returns what it deleted from each table that held
// rows of the task. Missing tables are skipped; rows of other tasks stay.
func RemoveTaskRows(ctx context.Context, db *sql.DB, schema, task string, tables []string) (_ []Removed, err error) {
	present, err := ExistingTables(ctx, db, schema, tables)
	if err != nil {
		return nil, err
	}
	if len(present) == 0 {
		return nil, nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("remove rows of task %s in meta schema %s: begin: %w", task, sqlschema.QuoteName(schema), err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	var out []Removed
	for _, t := range present {
		name := sqlschema.QuoteName(schema) + "." + sqlschema.QuoteName(t)
		sources, err := taskSources(ctx, tx, name, task)
		if err != nil {
			return nil, err
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM "+name+" WHERE task = ?", task)
		if err != nil {
			return nil, fmt.Errorf("delete rows of task %s from %s: %w", task, name, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, fmt.Errorf("delete rows of task %s from %s: %w", task, name, err)
		}
		if n > 0 {
			out = append(out, Removed{Table: name, Rows: n, Sources: sources})
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("remove rows of task %s in meta schema %s: commit: %w", task, sqlschema.QuoteName(schema), err)
	}
	return out, nil
}

// ExistingTables returns those of tables present in schema, in the order
// of tables.
func ExistingTables(ctx context.Context, db *sql.DB, schema string, tables []string) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", schema)
	if err != nil {
		return nil, fmt.Errorf("look for the tables %s in meta schema %s: %w", strings.Join(tables, ", "), sqlschema.QuoteName(schema), err)
	}
	found := make(map[string]bool)
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, errors.Join(fmt.Errorf("look for the tables of meta schema %s: %w", sqlschema.QuoteName(schema), err), rows.Close())
		}
		found[n] = true
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("look for the tables %s in meta schema %s: %w", strings.Join(tables, ", "), sqlschema.QuoteName(schema), err)
	}
	var out []string
	for _, t := range tables {
		if found[t] {
			out = append(out, t)
		}
	}
	return out, nil
}

// taskSources returns the sources with rows of task in table.
func taskSources(ctx context.Context, tx *sql.Tx, table, task string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, "SELECT DISTINCT source FROM "+table+" WHERE task = ? ORDER BY source", task)
	if err != nil {
		return nil, fmt.Errorf("read rows of task %s in %s: %w", task, table, err)
	}
	return ScanSources(rows, task, table)
}

// ScanSources reads and closes a result of one source column.
func ScanSources(rows *sql.Rows, task, table string) ([]string, error) {
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, errors.Join(fmt.Errorf("read rows of task %s in %s: %w", task, table, err), rows.Close())
		}
		out = append(out, s)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("read rows of task %s in %s: %w", task, table, err)
	}
	return out, nil
}

// ignoreDone drops sql.ErrTxDone from a rollback after a failed commit.
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
