// Package validmeta names the tables the continuous validator keeps in the
// meta schema on the target (its checkpoint, one row per task and source,
// and the validation errors it found, keyed by task and source too) and
// removes one task's rows from them, for `dmctl task start --remove-meta`.
// It imports nothing of the validator, so dmctl can use it without linking
// the validator; the validator takes its table names and statements from
// here. It never touches a row of another task.
package validmeta

import (
	"context"
	"database/sql"

	"github.com/dmworker/dm-worker/pkg/metaschema"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// The validator's tables in the meta schema; both are shared by every task
// and keyed by (task, source, ...), so their names never depend on a task
// name.
const (
	// CheckpointTable has one row per task and source: the location before
	// which every row change has been judged, and the rows checked so far.
	CheckpointTable = "validator_checkpoint"
	// ErrorTable has one row per validation error: the row's table and key,
	// the kind, both row images, the operator's state and the binlog
	// location of the change judged.
	ErrorTable = "validator_error"
)

// Tables lists every table of the validator in the meta schema.
var Tables = []string{CheckpointTable, ErrorTable}

// Removed is what RemoveTask deleted from one table.
type Removed = metaschema.Removed

// CreateStatements returns the statements that create schema and the
// validator's tables in it when missing; the validator runs them before it
// reads or writes anything there.
//
// In ErrorTable, table_hash and key_hash are the SHA-1 of src_table and
// row_key: the unique key (one error per table, key and judged binlog
// location) then fits InnoDB's 3072-byte index limit whatever the table
// name or key, and a restart that judges the same change again finds the
// error it already stored.
func CreateStatements(schema string) []string {
	table := func(name string) string { return sqlschema.QuoteName(schema) + "." + sqlschema.QuoteName(name) }
	return []string{
		"CREATE DATABASE IF NOT EXISTS " + sqlschema.QuoteName(schema),
		"CREATE TABLE IF NOT EXISTS " + table(CheckpointTable) + ` (
  task VARCHAR(128) NOT NULL, source VARCHAR(128) NOT NULL,
  binlog_name VARCHAR(255) NOT NULL, binlog_pos INT UNSIGNED NOT NULL, binlog_gtid TEXT NOT NULL,
  rows_checked BIGINT NOT NULL DEFAULT 0,
  updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (task, source)) DEFAULT CHARSET=utf8mb4`,
		"CREATE TABLE IF NOT EXISTS " + table(ErrorTable) + ` (
  id BIGINT NOT NULL AUTO_INCREMENT,
  task VARCHAR(128) NOT NULL, source VARCHAR(128) NOT NULL,
  src_table VARCHAR(256) NOT NULL, target_table VARCHAR(256) NOT NULL, table_hash BINARY(20) NOT NULL,
  row_key LONGTEXT NOT NULL, key_hash BINARY(20) NOT NULL,
  kind VARCHAR(16) NOT NULL, source_row LONGTEXT NULL, target_row LONGTEXT NULL,
  state VARCHAR(16) NOT NULL,
  binlog_name VARCHAR(255) NOT NULL, binlog_pos INT UNSIGNED NOT NULL,
  created_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY uk_change (task, source, table_hash, key_hash, binlog_name, binlog_pos),
  KEY idx_state (task, source, state)) DEFAULT CHARSET=utf8mb4`,
	}
}

// RemoveTask deletes every row of task (all sources) from the validator's
// tables in schema on the target db, in one transaction, and returns what
// it deleted from each table that held rows of the task. Missing tables
// are skipped; rows of other tasks stay.
func RemoveTask(ctx context.Context, db *sql.DB, schema, task string) ([]Removed, error) {
	return metaschema.RemoveTaskRows(ctx, db, schema, task, Tables)
}
