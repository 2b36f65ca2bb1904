package dump

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/binlog/upstream"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// defaultLockWait bounds (the session's lock_wait_timeout, whole seconds)
// how long FLUSH TABLES WITH READ LOCK may wait for running statements to
// finish; writers wait for it as long. Past it the dump falls back to the
// binlog-snapshot method.
const defaultLockWait = 10 * time.Second

// readerSetup prepares a reader session: raw bytes, UTC TIMESTAMPs, zero
// dates kept, and a consistent read.
var readerSetup = []string{
	"SET NAMES binary",
	"SET SESSION time_zone = '+00:00'",
	"SET SESSION sql_mode = ''",
	// A worker may pause reading while it writes a big row to disk.
	"SET SESSION net_write_timeout = 600",
	"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
}

// snapshot is a consistent snapshot: every reader's transaction sees the
// source as of start.
type snapshot struct {
	method  string
	held    time.Duration
	start   binlog.Location
	readers []*sql.Conn
}

// close ends every reader's session.
func (s *snapshot) close() {
	for _, c := range s.readers {
		discard(c)
	}
	s.readers = nil
}

// discard closes c without returning it to the pool: its session settings
// differ from the pool's, and a transaction or lock may be open (closing
// the connection ends both).
func discard(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn }) // makes database/sql close it
	_ = c.Close()                                           // ErrConnDone by now; nothing to report
}

// openSession takes a connection of db and runs setup on it.
func openSession(ctx context.Context, db *sql.DB, setup []string) (*sql.Conn, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, errs.Wrap(err, CodeDumpSnapshot, "dump: connect to the source")
	}
	for _, q := range setup {
		if _, err := c.ExecContext(ctx, q); err != nil {
			discard(c)
			return nil, errs.Wrap(err, CodeDumpSnapshot, "dump: %s", q)
		}
	}
	return c, nil
}

// takeSnapshot opens threads readers and starts their snapshot under
// FLUSH TABLES WITH READ LOCK, or, where the lock is refused or times out,
// one reader with MariaDB's binlog_snapshot_* status.
func takeSnapshot(ctx context.Context, db *sql.DB, threads int, lockWait time.Duration, log *zap.Logger) (*snapshot, error) {
	s := &snapshot{method: dumpfile.MethodFlushLock}
	// Every connection is open before the lock is taken, so that the lock
	// lasts only as long as a few statements.
	for range threads {
		c, err := openSession(ctx, db, readerSetup)
		if err != nil {
			s.close()
			return nil, err
		}
		s.readers = append(s.readers, c)
	}
	lock, err := openSession(ctx, db, []string{"SET SESSION lock_wait_timeout = " + strconv.Itoa(max(1, int(lockWait.Seconds())))})
	if err != nil {
		s.close()
		return nil, err
	}
	defer discard(lock) // also releases the lock on any error below
	if _, err := lock.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK"); err != nil {
		if why := lockRefused(err, lockWait); why != "" {
			log.Warn("FLUSH TABLES WITH READ LOCK is not possible; the dump uses one connection and MariaDB's binlog_snapshot_file/position",
				zap.String("reason", why), zap.Error(err))
			for _, c := range s.readers[1:] {
				discard(c)
			}
			s.readers = s.readers[:1]
			if err := s.binlogSnapshot(ctx); err != nil {
				return nil, err
			}
			return s, nil
		}
		s.close()
		return nil, errs.Wrap(err, CodeDumpSnapshot, "dump: FLUSH TABLES WITH READ LOCK")
	}
	locked := time.Now()
	if err := s.underLock(ctx, lock); err != nil {
		s.close()
		return nil, err
	}
	s.held = time.Since(locked)
	return s, nil
}

// underLock starts every reader's snapshot, reads the binlog location and
// unlocks.
func (s *snapshot) underLock(ctx context.Context, lock *sql.Conn) error {
	for _, c := range s.readers {
		if err := sqlschema.StartSnapshot(ctx, c); err != nil {
			return errs.Wrap(err, CodeDumpSnapshot, "dump")
		}
	}
	loc, err := masterStatus(ctx, lock)
	if err != nil {
		return err
	}
	if _, err := lock.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		return errs.Wrap(err, CodeDumpSnapshot, "dump: UNLOCK TABLES")
	}
	s.start = loc
	return nil
}

// lockRefused says why err means FLUSH TABLES WITH READ LOCK cannot be had
// ("" when err is another failure).
func lockRefused(err error, lockWait time.Duration) string {
	switch dbconn.ErrorNumber(err) {
	case erSpecificAccessDenied, erAccessDenied, erDBAccessDenied:
		return "the source user lacks the RELOAD privilege"
	case dbconn.ErLockWaitTimeout:
		return fmt.Sprintf("a running statement kept the lock waiting for more than %v", lockWait)
	}
	return ""
}

// binlogSnapshot starts the snapshot of the only reader and takes its
// binlog location from the session's binlog_snapshot_* status
// (sqlschema.BeginSnapshot).
func (s *snapshot) binlogSnapshot(ctx context.Context) error {
	s.method = dumpfile.MethodBinlogSnapshot
	loc, err := sqlschema.BeginSnapshot(ctx, s.readers[0])
	switch {
	case errors.Is(err, sqlschema.ErrNoSnapshotStatus), errors.Is(err, sqlschema.ErrSnapshotBinlogOff):
		s.close()
		return errs.New(CodeDumpSnapshot, false, "dump: %w: without FLUSH TABLES WITH READ LOCK "+
			"(grant RELOAD to the source user) the dump needs a MariaDB source with its binary log on (log_bin)", err)
	case errors.Is(err, sqlschema.ErrSnapshotGTIDUnknown):
		s.close()
		return errs.New(CodeDumpSnapshot, true, "dump: %w", err)
	case err != nil:
		s.close()
		return errs.Wrap(err, CodeDumpSnapshot, "dump: take the consistent snapshot")
	}
	s.start = loc
	return nil
}

// masterStatus reads SHOW MASTER STATUS and the GTID position
// (@@gtid_binlog_pos on MariaDB, @@gtid_executed on MySQL).
func masterStatus(ctx context.Context, c *sql.Conn) (binlog.Location, error) {
	loc, err := upstream.MasterStatus(ctx, c)
	if errors.Is(err, upstream.ErrNoBinlog) {
		return binlog.Location{}, errs.New(CodeDumpSnapshot, false, "dump: %w", err)
	}
	if err != nil {
		return binlog.Location{}, errs.Wrap(err, CodeDumpSnapshot, "dump")
	}
	var gtid sql.NullString
	if err := c.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&gtid); err != nil {
		if dbconn.ErrorNumber(err) != erUnknownSystemVariable { // MySQL
			return binlog.Location{}, errs.Wrap(err, CodeDumpSnapshot, "dump: SELECT @@gtid_binlog_pos")
		}
		if err := c.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_executed").Scan(&gtid); err != nil {
			return binlog.Location{}, errs.Wrap(err, CodeDumpSnapshot, "dump: SELECT @@GLOBAL.gtid_executed")
		}
	}
	loc.GTID = gtid.String
	return loc, nil
}
