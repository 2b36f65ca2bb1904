package sqlschema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dmworker/dm-worker/pkg/binlog"
)

// Errors of BeginSnapshot that callers explain in their own terms (wrapped
// with what failed; test with errors.Is).
var (
	// ErrNoSnapshotStatus: the session shows no binlog_snapshot_file
	// status variable, so the source is not MariaDB (MySQL has no
	// binlog_snapshot_* variables) and a consistent snapshot cannot say
	// which binlog position it is.
	ErrNoSnapshotStatus = errors.New("the source has no binlog_snapshot_file status variable: " +
		"a consistent snapshot's binlog position can only be read from a MariaDB source")
	// ErrSnapshotBinlogOff: binlog_snapshot_file is empty, the source's
	// binary log is off.
	ErrSnapshotBinlogOff = errors.New("the source's binary log is off (binlog_snapshot_file is empty); turn on log_bin")
	// ErrSnapshotGTIDUnknown: BINLOG_GTID_POS of the snapshot's position
	// is NULL: the source does not find its own position in its binlog
	// (purged at that moment?), so the GTID position of the snapshot is
	// unknown. Taking the snapshot again usually succeeds.
	ErrSnapshotGTIDUnknown = errors.New("BINLOG_GTID_POS is NULL: the source does not find the snapshot's position in its binlog " +
		"(purged at this moment?); take the snapshot again")
)

// StartSnapshot starts a read-only transaction WITH CONSISTENT SNAPSHOT on
// c: every later read of it sees the source as of this moment. Set the
// session's isolation level (REPEATABLE READ) before.
func StartSnapshot(ctx context.Context, c *sql.Conn) error {
	const q = "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"
	if _, err := c.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

// BeginSnapshot is the one consistent-snapshot routine that needs no lock:
// it starts the snapshot on c (StartSnapshot) and returns the binlog
// location it is at, with its GTID position.
//
// MariaDB takes the InnoDB read view and the binlog position together,
// under the binlog's commit order, and shows that position as the session
// status binlog_snapshot_file / binlog_snapshot_position: every
// transaction committed before it is in the snapshot, every later one is
// not and has its events after it. BINLOG_GTID_POS(file, pos) turns it
// into the GTID position ("" when the binlog has no GTID yet).
//
// The errors name the step that failed; ErrNoSnapshotStatus (not
// MariaDB), ErrSnapshotBinlogOff and ErrSnapshotGTIDUnknown are wrapped
// for the caller to explain with its own remedy. The transaction stays
// open on c whatever is returned; closing c ends it.
func BeginSnapshot(ctx context.Context, c *sql.Conn) (binlog.Location, error) {
	if err := StartSnapshot(ctx, c); err != nil {
		return binlog.Location{}, err
	}
	status := map[string]string{}
	err := ScanAll(ctx, c, "SHOW SESSION STATUS LIKE 'binlog_snapshot_%'", nil, func(rows *sql.Rows) error {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return err
		}
		status[strings.ToLower(name)] = value
		return nil
	})
	if err != nil {
		return binlog.Location{}, fmt.Errorf("read the snapshot's binlog location (SHOW SESSION STATUS LIKE 'binlog_snapshot_%%'): %w", err)
	}
	file, ok := status["binlog_snapshot_file"]
	if !ok {
		return binlog.Location{}, ErrNoSnapshotStatus
	}
	if file == "" {
		return binlog.Location{}, ErrSnapshotBinlogOff
	}
	pos, err := strconv.ParseUint(status["binlog_snapshot_position"], 10, 32)
	if err != nil {
		return binlog.Location{}, fmt.Errorf("the snapshot's binlog_snapshot_position %q is no position: %w", status["binlog_snapshot_position"], err)
	}
	loc := binlog.Location{Name: file, Pos: uint32(pos)}
	if loc.GTID, err = gtidPos(ctx, c, loc); err != nil {
		return binlog.Location{}, err
	}
	return loc, nil
}

// gtidPos returns BINLOG_GTID_POS of loc's file and position; NULL is an
// error wrapping ErrSnapshotGTIDUnknown.
func gtidPos(ctx context.Context, q Querier, loc binlog.Location) (string, error) {
	var gtid sql.NullString
	err := ScanAll(ctx, q, "SELECT BINLOG_GTID_POS("+stringLiteral(loc.Name)+", "+strconv.FormatUint(uint64(loc.Pos), 10)+")", nil,
		func(rows *sql.Rows) error { return rows.Scan(&gtid) })
	if err != nil {
		return "", fmt.Errorf("BINLOG_GTID_POS of %s: %w", loc, err)
	}
	if !gtid.Valid {
		return "", fmt.Errorf("BINLOG_GTID_POS of %s: %w", loc, ErrSnapshotGTIDUnknown)
	}
	return gtid.String, nil
}
