package validate

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/rowimage"
)

// openPool opens a validator pool to the target (the comparer's) or the
// source (current rows for the staleness check, the flavor).
// Sessions must read TIMESTAMP values in UTC, as the sync unit writes them
// and the binlog carries them: time_zone '+00:00' is forced (a time_zone in
// the target's session block is overridden, as in the sync unit). Queries
// interpolate their arguments client-side (interpolateParams, as the sync
// unit: the same literals, so key values match the same rows; one round
// trip per query) and are read over the text protocol, whose exact forms
// the comparer's SELECT expressions produce. String columns are read with
// CAST(... AS BINARY), so the session's character_set_results does not
// matter. ParseTime is off: temporal values arrive as text.
func openPool(ep *dbconn.Endpoint, maxConns int) (*sql.DB, error) {
	return openPoolIn(nil, "", ep, maxConns)
}

// UseConnBudget makes the validator's target pools take their connections
// from b, the worker's budget of connections to each target. A comparer,
// the error store and the checkpoint each use one connection at a time,
// so a budget smaller than the pool cannot deadlock it.
func (v *Validator) UseConnBudget(b *dbconn.Budget) { v.budget = b }

// UseSourceBudget makes the validator's source pool (the staleness
// check's row reads) take its connections from b, the worker's budget of
// source connections, learn the flavor there once per source, and count
// its own binlog dump there when it reads the source directly. The
// staleness check reads one row set at a time, so the budget cannot
// deadlock it. Call it before Start.
func (v *Validator) UseSourceBudget(b *dbconn.Budget) { v.sources = b }

// openPool is openPool from the validator's budget of targets when ep is
// the subtask's target, of sources when it is the source.
func (v *Validator) openPool(ep *dbconn.Endpoint, maxConns int) (*sql.DB, error) {
	b := v.sources
	if ep.Ref == dbconn.TargetRef(v.cfg.Name) {
		b = v.budget
	}
	return openPoolIn(b, v.cfg.Name, ep, maxConns)
}

// openPoolIn is openPool with the connections from budget b for task
// owner (nil: a pool of its own).
func openPoolIn(b *dbconn.Budget, owner string, ep *dbconn.Endpoint, maxConns int) (*sql.DB, error) {
	cfg := ep.DriverConfig()
	cfg.InterpolateParams = true
	cfg.ParseTime = false
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	pool, err := b.Open(ep, cfg, owner, maxConns)
	if err != nil {
		return nil, fmt.Errorf("validator %s: %w", ep.Addr(), err)
	}
	return pool, nil
}

// Server errors meaning the target table (or its database) does not exist.
const (
	errNoSuchTable = 1146 // ER_NO_SUCH_TABLE
	errBadDB       = 1049 // ER_BAD_DB_ERROR
)

// isTableGone reports whether err is the server saying the table or its
// database does not exist.
func isTableGone(err error) bool {
	n := dbconn.ErrorNumber(err)
	return n == errNoSuchTable || n == errBadDB
}

// targetColumn is what the comparer needs of a target column.
type targetColumn struct {
	// binaryLen is the length of a BINARY(n) column, whose values the
	// binlog carries without their trailing zeros; 0 for other columns.
	binaryLen int
}

// readTargetColumns returns the target table's columns by lower-cased
// name; none when the table does not exist.
func readTargetColumns(ctx context.Context, db *sql.DB, t filter.TableName) (map[string]targetColumn, error) {
	tt, err := rowimage.ReadTarget(ctx, db, t)
	if err != nil || tt == nil {
		return map[string]targetColumn{}, err
	}
	cols := make(map[string]targetColumn, len(tt.Columns))
	for _, c := range tt.Columns {
		cols[strings.ToLower(c.Name)] = targetColumn{binaryLen: c.Length}
	}
	return cols, nil
}

// copyRow copies the columns the driver scanned (valid until the next
// Scan) into one allocation; a NULL stays nil.
func copyRow(raw []sql.RawBytes) []any {
	n := 0
	for _, b := range raw {
		n += len(b)
	}
	buf := make([]byte, 0, n)
	row := make([]any, len(raw))
	for i, b := range raw {
		if b != nil {
			start := len(buf)
			buf = append(buf, b...)
			row[i] = buf[start:len(buf):len(buf)]
		}
	}
	return row
}
