// Package loadmeta names the tables the load unit keeps in the meta schema
// on the target (one row per loaded chunk, one status row per task and
// source, one row per table whose secondary indexes are still to be added) and removes one task's rows from them, for `dmctl task start
// --remove-meta`. It imports nothing of the load unit, so dmctl can use it
// without linking the unit; the load unit takes its table names and
// statements from here. It never touches a row of another task.
package loadmeta

import (
	"context"
	"database/sql"

	"github.com/dmworker/dm-worker/pkg/metaschema"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
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
	// IndexTable has one row per target table the load created without
	// its plain secondary indexes, which it adds after the table's rows:
	// the indexes (JSON) still to add; keyed by (task, source, table).
	IndexTable = "load_index"
)

// Tables lists every table of the load unit in the meta schema.
var Tables = []string{CheckpointTable, StatusTable, IndexTable}

// Removed is what RemoveTask deleted from one table.
type Removed = metaschema.Removed

// CreateStatements returns the statements that create schema and the load
// unit's tables in it when missing; the load unit runs them in Init.
func CreateStatements(schema string) []string {
	table := func(name string) string { return sqlschema.QuoteName(schema) + "." + sqlschema.QuoteName(name) }
	return []string{
		"CREATE DATABASE IF NOT EXISTS " + sqlschema.QuoteName(schema),
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
		"CREATE TABLE IF NOT EXISTS " + table(IndexTable) + ` (
  task VARCHAR(128) NOT NULL, source VARCHAR(128) NOT NULL,
  table_schema VARCHAR(64) NOT NULL, table_name VARCHAR(64) NOT NULL, indexes MEDIUMTEXT NOT NULL,
  PRIMARY KEY (task, source, table_schema, table_name)) DEFAULT CHARSET=utf8mb4`,
	}
}

// RemoveTask deletes every row of task (all sources) from the load unit's
// tables in schema on the target db, in one transaction, and returns what
// it deleted from each table that held rows of the task. Missing tables
// are skipped; rows of other tasks stay. The loaded rows of the task's
// tables are not touched: clean those before loading again.
func RemoveTask(ctx context.Context, db *sql.DB, schema, task string) ([]Removed, error) {
	return metaschema.RemoveTaskRows(ctx, db, schema, task, Tables)
}
