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
	"fmt"
	"slices"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/metaschema"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// The sync unit's tables in the meta schema; all are keyed by (task,
// source, ...). TablePointTable holds, per source table the sync unit
// replays exactly (no key, or a foreign key group), the last row change
// applied of it (binlog location and row in its event).
const (
	CheckpointTable = "syncer_checkpoint"
	SafePointTable  = "syncer_safe_point"
	TablePointTable = "syncer_table_point"
	// ShardDDLTable holds, per target table of a sharding group whose lock
	// this source owns, the statement the owner was about to run and a
	// hash of SHOW CREATE TABLE just before it: a restarted owner tells
	// from it whether the statement ran.
	ShardDDLTable = "syncer_shard_ddl"
	// ShardSchemaTable holds, in optimistic shard mode, each upstream
	// table's schema before and after each DDL the unit handled (and its
	// first schema, at location '':0), with the statements reported: the
	// schema at any checkpoint is the one after the last DDL before it.
	ShardSchemaTable = "syncer_shard_schema"
)

// Tables lists every table of the sync unit in the meta schema.
var Tables = []string{CheckpointTable, SafePointTable, TablePointTable, ShardDDLTable, ShardSchemaTable}

// CreateStatements returns the statements that create schema and the sync
// unit's tables in it when missing, the schema's first; the sync unit runs
// them before it reads or writes a checkpoint (the tables' side by side).
func CreateStatements(schema string) []string {
	table := func(name string) string { return sqlschema.QuoteName(schema) + "." + sqlschema.QuoteName(name) }
	return []string{
		"CREATE DATABASE IF NOT EXISTS " + sqlschema.QuoteName(schema),
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
		"CREATE TABLE IF NOT EXISTS " + table(ShardDDLTable) + ` (
  task VARCHAR(128) NOT NULL, source VARCHAR(128) NOT NULL,
  target_schema VARCHAR(64) NOT NULL, target_table VARCHAR(64) NOT NULL,
  owner_table VARCHAR(200) NOT NULL, seq BIGINT NOT NULL, stmt INT NOT NULL, before_hash CHAR(64) NOT NULL,
  PRIMARY KEY (task, source, target_schema, target_table))`,
		"CREATE TABLE IF NOT EXISTS " + table(ShardSchemaTable) + ` (
  task VARCHAR(128) NOT NULL, source VARCHAR(128) NOT NULL,
  source_schema VARCHAR(64) NOT NULL, source_table VARCHAR(64) NOT NULL,
  binlog_name VARCHAR(255) NOT NULL, binlog_pos INT UNSIGNED NOT NULL,
  ddls LONGTEXT NOT NULL, create_before LONGTEXT NOT NULL, create_after LONGTEXT NOT NULL,
  model_before LONGTEXT NOT NULL, model_after LONGTEXT NOT NULL,
  PRIMARY KEY (task, source, source_schema, source_table, binlog_name, binlog_pos))`,
	}
}

// Removed is what RemoveTask deleted from one table.
type Removed = metaschema.Removed

// RemoveTask deletes every row of task (all sources) from the sync unit's
// tables in schema on the target db, in one transaction, and returns what
// it deleted from each table that held rows of the task. Missing tables
// are skipped; rows of other tasks stay.
func RemoveTask(ctx context.Context, db *sql.DB, schema, task string) ([]Removed, error) {
	return metaschema.RemoveTaskRows(ctx, db, schema, task, Tables)
}

// TaskSources returns the sources that have a checkpoint of task in
// schema, sorted; none when the table is missing.
func TaskSources(ctx context.Context, db *sql.DB, schema, task string) ([]string, error) {
	present, err := metaschema.ExistingTables(ctx, db, schema, Tables)
	if err != nil || !slices.Contains(present, CheckpointTable) {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT source FROM "+sqlschema.QuoteName(schema)+"."+sqlschema.QuoteName(CheckpointTable)+
		" WHERE task = ? ORDER BY source", task)
	if err != nil {
		return nil, fmt.Errorf("read checkpoints of task %s: %w", task, err)
	}
	return metaschema.ScanSources(rows, task, CheckpointTable)
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
	table := func(name string) string { return sqlschema.QuoteName(schema) + "." + sqlschema.QuoteName(name) }
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
