package dump

import (
	"context"
	"database/sql"
	"math/big"

	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// splitByRange is mydumper's way for a table whose key is one integer
// column: the span MIN..MAX of the key (two index dives) is cut into equal
// ranges sized from the table's estimated row count, so no rows are
// scanned to find boundaries. It returns false (and emits nothing) when it
// does not apply: another key, an empty table, or an estimate too small to
// trust (then the keyset boundaries are cheap anyway). Ranges are even in
// key values, not rows; a sparse key gives uneven chunks, never wrong ones.
func splitByRange(ctx context.Context, c *sql.Conn, t *tableInfo, rows int64, emit func(upper []string) error) (bool, error) {
	if t.key == nil || len(t.key.Columns) != 1 || !t.key.Columns[0].Integer {
		return false, nil
	}
	var estimate sql.NullInt64
	q := "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = " + dbconn.QuoteString(t.ref.schema) +
		" AND TABLE_NAME = " + dbconn.QuoteString(t.ref.name)
	if err := c.QueryRowContext(ctx, q).Scan(&estimate); err != nil {
		return false, readErr(t.ref, "estimate its rows", err)
	}
	if !estimate.Valid || estimate.Int64 < 2*rows {
		return false, nil
	}
	k := sqlschema.QuoteName(t.key.Columns[0].Name)
	var lo, hi sql.NullString
	if err := c.QueryRowContext(ctx, "SELECT MIN("+k+"), MAX("+k+") FROM "+t.ref.quoted()).Scan(&lo, &hi); err != nil {
		return false, readErr(t.ref, "read its key's range", err)
	}
	if !lo.Valid || !hi.Valid {
		return false, nil
	}
	minK, ok1 := new(big.Int).SetString(lo.String, 10)
	maxK, ok2 := new(big.Int).SetString(hi.String, 10)
	if !ok1 || !ok2 {
		return false, nil
	}
	span := new(big.Int).Sub(maxK, minK)
	span.Add(span, big.NewInt(1))
	// step = ceil(span * rows / estimate), at least 1.
	step := new(big.Int).Mul(span, big.NewInt(rows))
	step.Add(step, big.NewInt(estimate.Int64-1))
	step.Quo(step, big.NewInt(estimate.Int64))
	if step.Sign() <= 0 {
		step.SetInt64(1)
	}
	upper := new(big.Int).Add(minK, step)
	upper.Sub(upper, big.NewInt(1))
	for upper.Cmp(maxK) < 0 {
		if err := emit([]string{upper.String()}); err != nil {
			return true, err
		}
		upper.Add(upper, step)
	}
	return true, emit(nil)
}
