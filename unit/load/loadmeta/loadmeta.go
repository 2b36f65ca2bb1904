// Package loadmeta names the tables the load unit keeps in the meta schema
// on the target (one row per loaded chunk, one status row per task and
// source) and removes one task's rows from them, for `dmctl task start
// --remove-meta`. It imports nothing of the load unit, so dmctl can use it
// without linking the unit; the load unit takes its table names and
// statements from here. It never touches a row of another task.
package loadmeta

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dmworker/dm-worker/unit/syncer/syncmeta"
)

// The load unit's tables in the meta schema.
const (
	// CheckpointTable has one row per chunk file loaded, written in the
	// transaction that loaded the chunk's rows; keyed by (task, source,
	// chunk_file).
	CheckpointTable = "load_checkpoint"
	// StatusTable has one row per task and source: the dump being loaded
	// and whether the load finished.
	StatusTable = "load_status"
)

// Tables lists every table of the load unit in the meta schema.
var Tables = []string{CheckpointTable, StatusTable}

// Removed is what RemoveTask deleted from one table.
type Removed = syncmeta.Removed

// CreateStatements returns the statements that create schema and the load
// unit's tables in it when missing; the load unit runs them in Init.
func CreateStatements(schema string) []string {
	table := func(name string) string { return syncmeta.QuoteName(schema) + "." + syncmeta.QuoteName(name) }
	return []string{
		"CREATE DATABASE IF NOT EXISTS " + syncmeta.QuoteName(schema),
		"CREATE TABLE IF NOT EXISTS " + table(CheckpointTable) + ` (
  task VARCHAR(128) NOT NULL, source VARCHAR(128) NOT NULL, dump_id VARCHAR(64) NOT NULL,
  chunk_file VARCHAR(255) NOT NULL, table_schema VARCHAR(64) NOT NULL, table_name VARCHAR(64) NOT NULL,
  row_count BIGINT NOT NULL, byte_count BIGINT NOT NULL,
  loaded_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (task, source, chunk_file)) DEFAULT CHARSET=utf8mb4`,
		"CREATE TABLE IF NOT EXISTS " + table(StatusTable) + ` (
  task VARCHAR(128) NOT NULL, source VARCHAR(128) NOT NULL, dump_id VARCHAR(64) NOT NULL,
  finished TINYINT NOT NULL DEFAULT 0, row_count BIGINT NOT NULL DEFAULT 0,
  updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (task, source)) DEFAULT CHARSET=utf8mb4`,
	}
}

// RemoveTask deletes every row of task (all sources) from the load unit's
// tables in schema on the target db, in one transaction, and returns what
// it deleted from each table that held rows of the task. Missing tables
// are skipped; rows of other tasks stay. The loaded rows of the task's
// tables are not touched: clean those before loading again.
func RemoveTask(ctx context.Context, db *sql.DB, schema, task string) (_ []Removed, err error) {
	present, err := existingTables(ctx, db, schema)
	if err != nil || len(present) == 0 {
		return nil, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("remove load records of task %s in %s: begin: %w", task, syncmeta.QuoteName(schema), err)
	}
	defer func() {
		if err != nil {
			if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
				err = errors.Join(err, rerr)
			}
		}
	}()
	var out []Removed
	for _, t := range present {
		name := syncmeta.QuoteName(schema) + "." + syncmeta.QuoteName(t)
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
		return nil, fmt.Errorf("remove load records of task %s in %s: commit: %w", task, syncmeta.QuoteName(schema), err)
	}
	return out, nil
}

// existingTables returns the load unit's tables present in schema, in the
// order of Tables.
func existingTables(ctx context.Context, db *sql.DB, schema string) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN (?, ?)",
		schema, CheckpointTable, StatusTable)
	if err != nil {
		return nil, fmt.Errorf("look for the load tables in meta schema %s: %w", syncmeta.QuoteName(schema), err)
	}
	found := make(map[string]bool)
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, errors.Join(fmt.Errorf("look for the load tables: %w", err), rows.Close())
		}
		found[n] = true
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("look for the load tables in meta schema %s: %w", syncmeta.QuoteName(schema), err)
	}
	var out []string
	for _, t := range Tables {
		if found[t] {
			out = append(out, t)
		}
	}
	return out, nil
}

// taskSources returns the sources with rows of task in table, sorted.
func taskSources(ctx context.Context, tx *sql.Tx, table, task string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, "SELECT DISTINCT source FROM "+table+" WHERE task = ? ORDER BY source", task)
	if err != nil {
		return nil, fmt.Errorf("read rows of task %s in %s: %w", task, table, err)
	}
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
