package validate

import (
	"encoding/json"

	"github.com/dmworker/dm-worker/unit/validate/validmeta"
)

// The validation error vocabulary lives in validmeta, which dmctl reads
// without linking the validator.
const (
	KindMissing   = validmeta.KindMissing
	KindExtra     = validmeta.KindExtra
	KindDifferent = validmeta.KindDifferent
	StateNew      = validmeta.StateNew
	StateIgnored  = validmeta.StateIgnored
	StateResolved = validmeta.StateResolved
	StateAll      = validmeta.StateAll
	OpIgnore      = validmeta.OpIgnore
	OpResolve     = validmeta.OpResolve
	OpClear       = validmeta.OpClear
)

// ErrorRecord is one validation error (validmeta.ErrorRecord).
type ErrorRecord = validmeta.ErrorRecord

// rowCheck is one row key to check on the target table.
type rowCheck struct {
	// key are the converted values of the table's key columns (Table.Key
	// order), as the sync unit writes them.
	key []any
	// want is the converted row image the target must hold (every column
	// of the table, Table.Columns order); nil when the row must not exist.
	want []any
}

// rowResult is the verdict of one rowCheck.
type rowResult struct {
	// kind is "" when the target row is as expected, else KindMissing,
	// KindExtra or KindDifferent.
	kind string
	// target is the target row as a display object (see ErrorRecord);
	// nil when the target has no row with the key.
	target json.RawMessage
}
