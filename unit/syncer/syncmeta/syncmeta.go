// Package syncmeta names the tables the sync unit keeps in the meta schema
// on the target (checkpoints, safe points and table points, keyed by task
// and source) and removes one task's rows from them,
// for `dmctl task start --remove-meta`. It imports nothing of the sync unit, so dmctl can use it
// without linking the unit; the sync unit takes its table names from here.
// It never touches a row of another task.
package syncmeta

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dmworker/dm-worker/pkg/binlog"
)

// The sync unit's tables in the meta schema; all are keyed by (task,
// source, ...). TablePointTable holds, per source table the sync unit
// replays exactly (no key, or a foreign key group), the last row change
// applied of it (binlog location and row in its event).
const (
	CheckpointTable = "syncer_checkpoint"
	SafePointTable  = "syncer_safe_point"
	TablePointTable = "syncer_table_point"
)

// Tables lists every table of the sync unit in the meta schema.
var Tables = []string{CheckpointTable, SafePointTable, TablePointTable}

// CreateStatements returns the statements that create schema and the sync
// unit's tables in it when missing; the sync unit runs them before it reads
// or writes a checkpoint.
func CreateStatements(schema string) []string {
	table := func(name string) string { return QuoteName(schema) + "." + QuoteName(name) }
	return []string{
		"CREATE DATABASE IF NOT EXISTS " + QuoteName(schema),
		"CREATE TABLE IF NOT EXISTS " + table(CheckpointTable) + ` (
  task VARCHAR(128) NOT NULL, source VARCHAR(128) NOT NULL,
  binlog_name VARCHAR(255) NOT NULL, binlog_pos INT UNSIGNED NOT NULL, binlog_gtid TEXT NOT NULL,
  pending_ddl_name VARCHAR(255) NOT NULL DEFAULT '', pending_ddl_pos INT UNSIGNED NOT NULL DEFAULT 0,
  updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (task, source))`,
		"CREATE TABLE IF NOT EXISTS " + table(SafePointTable) + ` (
  task VARCHAR(128) NOT NULL, source VARCHAR(128) NOT NULL, worker INT NOT NULL,
  binlog_name VARCHAR(255) NOT NULL, binlog_pos INT UNSIGNED NOT NULL,
  PRIMARY KEY (task, source, worker))`,
		"CREATE TABLE IF NOT EXISTS " + table(TablePointTable) + ` (
  task VARCHAR(128) NOT NULL, source VARCHAR(128) NOT NULL,
  source_schema VARCHAR(64) NOT NULL, source_table VARCHAR(64) NOT NULL,
  binlog_name VARCHAR(255) NOT NULL, binlog_pos INT UNSIGNED NOT NULL, row_index INT UNSIGNED NOT NULL,
  PRIMARY KEY (task, source, source_schema, source_table))`,
	}
}

// Removed is what RemoveTask deleted from one table.
type Removed struct {
	// Table is `schema`.`table`.
	Table string `json:"table"`
	// Rows is the number of rows of the task deleted.
	Rows int64 `json:"rows"`
	// Sources are the sources whose rows were deleted, sorted.
	Sources []string `json:"sources"`
}

// QuoteName quotes an identifier with backticks.
func QuoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// RemoveTask deletes every row of task (all sources) from the sync unit's
// tables in schema on the target db, in one transaction, and returns what
// it deleted from each table that held rows of the task. Missing tables
// are skipped; rows of other tasks stay.
func RemoveTask(ctx context.Context, db *sql.DB, schema, task string) ([]Removed, error) {
	return RemoveTaskRows(ctx, db, schema, task, Tables)
}

// RemoveTaskRows is RemoveTask for the given tables of schema (each keyed
// by task and source), for the units whose tables live in the meta schema
// too (loadmeta).
func RemoveTaskRows(ctx context.Context, db *sql.DB, schema, task string, tables []string) (_ []Removed, err error) {
	present, err := existingTables(ctx, db, schema, tables)
	if err != nil {
		return nil, err
	}
	if len(present) == 0 {
		return nil, nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("remove rows of task %s in meta schema %s: begin: %w", task, QuoteName(schema), err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	var out []Removed
	for _, t := range present {
		name := QuoteName(schema) + "." + QuoteName(t)
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
		return nil, fmt.Errorf("remove rows of task %s in meta schema %s: commit: %w", task, QuoteName(schema), err)
	}
	return out, nil
}

// TaskSources returns the sources that have a checkpoint of task in
// schema, sorted; none when the table is missing.
func TaskSources(ctx context.Context, db *sql.DB, schema, task string) ([]string, error) {
	present, err := existingTables(ctx, db, schema, Tables)
	if err != nil || !slices.Contains(present, CheckpointTable) {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT source FROM "+QuoteName(schema)+"."+QuoteName(CheckpointTable)+
		" WHERE task = ? ORDER BY source", task)
	if err != nil {
		return nil, fmt.Errorf("read checkpoints of task %s: %w", task, err)
	}
	return scanSources(rows, task, CheckpointTable)
}

// existingTables returns those of tables present in schema, in the order
// of tables.
func existingTables(ctx context.Context, db *sql.DB, schema string, tables []string) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", schema)
	if err != nil {
		return nil, fmt.Errorf("look for the tables %s in meta schema %s: %w", strings.Join(tables, ", "), QuoteName(schema), err)
	}
	found := make(map[string]bool)
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, errors.Join(fmt.Errorf("look for the tables of meta schema %s: %w", QuoteName(schema), err), rows.Close())
		}
		found[n] = true
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("look for the tables %s in meta schema %s: %w", strings.Join(tables, ", "), QuoteName(schema), err)
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
	return scanSources(rows, task, table)
}

// scanSources reads and closes a result of one source column.
func scanSources(rows *sql.Rows, task, table string) ([]string, error) {
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

// Statement is one SQL statement and its arguments.
type Statement struct {
	SQL  string
	Args []any
}

// HandOffWorker is the safe-point row the load unit writes for the sync
// unit; apply workers are numbered from 0, so it never collides with one.
const HandOffWorker = -1

// HandOff returns the statements with which the load unit, in the
// transaction that marks its work finished, hands a task's source over to
// the sync unit (task mode all): the sync checkpoint at the snapshot's
// location start, and a safe point at safeUntil, so the sync unit starts at
// start and runs in safe mode until it has passed safeUntil. Run
// CreateStatements first.
func HandOff(schema, task, source string, start, safeUntil Location) []Statement {
	table := func(name string) string { return QuoteName(schema) + "." + QuoteName(name) }
	return []Statement{
		{SQL: "REPLACE INTO " + table(CheckpointTable) +
			" (task, source, binlog_name, binlog_pos, binlog_gtid, pending_ddl_name, pending_ddl_pos) VALUES (?,?,?,?,?,'',0)",
			Args: []any{task, source, start.Name, start.Pos, start.GTID}},
		{SQL: "REPLACE INTO " + table(SafePointTable) + " (task, source, worker, binlog_name, binlog_pos) VALUES (?,?,?,?,?)",
			Args: []any{task, source, HandOffWorker, safeUntil.Name, safeUntil.Pos}},
	}
}

// Location is a binlog location (file, position, GTID set).
type Location = binlog.Location
