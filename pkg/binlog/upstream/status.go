package upstream

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dmworker/dm-worker/pkg/binlog"
)

// Queryer runs a query: a *sql.DB, *sql.Conn or *sql.Tx.
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// ErrNoBinlog is returned (wrapped) by MasterStatus when the source has no
// binary log.
var ErrNoBinlog = errors.New("SHOW MASTER STATUS returned no row: the source's binary log is off; turn on log_bin")

// MasterStatus returns the file and position of SHOW MASTER STATUS on q
// (no GTID set).
func MasterStatus(ctx context.Context, q Queryer) (binlog.Location, error) {
	rows, err := q.QueryContext(ctx, "SHOW MASTER STATUS")
	if err != nil {
		return binlog.Location{}, fmt.Errorf("SHOW MASTER STATUS: %w", err)
	}
	defer func() { _ = rows.Close() }() // read only; errors are reported below
	cols, err := rows.Columns()
	if err != nil {
		return binlog.Location{}, fmt.Errorf("SHOW MASTER STATUS: %w", err)
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return binlog.Location{}, fmt.Errorf("SHOW MASTER STATUS: %w", err)
		}
		return binlog.Location{}, ErrNoBinlog
	}
	if len(cols) < 2 {
		return binlog.Location{}, fmt.Errorf("SHOW MASTER STATUS: %d columns, want at least 2", len(cols))
	}
	var loc binlog.Location
	dest := make([]any, len(cols))
	dest[0], dest[1] = &loc.Name, &loc.Pos
	for i := 2; i < len(dest); i++ {
		dest[i] = new(sql.RawBytes)
	}
	if err := rows.Scan(dest...); err != nil {
		return binlog.Location{}, fmt.Errorf("SHOW MASTER STATUS: %w", err)
	}
	return loc, rows.Close()
}
