package validmeta

import (
	"encoding/json"
	"time"
)

// Kinds of validation errors.
const (
	// KindMissing: the source row exists, the target has no row with its key.
	KindMissing = "missing"
	// KindExtra: the source row was deleted, the target still has it.
	KindExtra = "extra"
	// KindDifferent: both exist and a compared column differs (full mode).
	KindDifferent = "different"
)

// States of validation errors.
const (
	StateNew      = "new"
	StateIgnored  = "ignored"
	StateResolved = "resolved"
	// StateAll selects every state in a listing.
	StateAll = "all"
)

// Operations on validation errors (POST .../validation/errors).
const (
	OpIgnore  = "ignore"
	OpResolve = "resolve"
	OpClear   = "clear"
)

// ErrorRecord is one validation error as stored in the meta schema and
// listed by GET /api/v1/subtasks/{task}/validation/errors (DESIGN.md §6).
type ErrorRecord struct {
	ID int64 `json:"id"`
	// Table is the source table, "schema.table"; TargetTable the routed
	// target table.
	Table       string `json:"table"`
	TargetTable string `json:"target-table"`
	Kind        string `json:"kind"`
	// Key is the row's key as a JSON object of key column to value, the
	// same encoding as the rows.
	Key json.RawMessage `json:"key"`
	// SourceRow and TargetRow are JSON objects of column name to value
	// (string, or null for NULL; bytes of binary columns as "0x" + hex);
	// null when the row does not exist on that side.
	SourceRow json.RawMessage `json:"source-row"`
	TargetRow json.RawMessage `json:"target-row"`
	State     string          `json:"state"`
	// Time is when the error was reported (or last updated, for a new
	// error of the same row reported again).
	Time time.Time `json:"time"`
	// Binlog is the location of the row change that was judged.
	Binlog string `json:"binlog"`
}
