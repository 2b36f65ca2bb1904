package syncer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/unit/syncer/syncmeta"
)

// Tables of the meta schema owned by the sync unit (package syncmeta names
// them for dmctl's --remove-meta).
const (
	checkpointTable = syncmeta.CheckpointTable
	safePointTable  = syncmeta.SafePointTable
)

// savedCheckpoint is the row of one task+source.
type savedCheckpoint struct {
	loc binlog.Location
	// pendingDDL is the location after a DDL that was about to run when
	// the checkpoint was saved; zero when none.
	pendingDDL binlog.Location
}

// checkpointStore reads and writes the sync unit's rows in the meta schema.
type checkpointStore struct {
	db           *sql.DB
	schema       string
	task, source string
}

func (s *checkpointStore) table(name string) string {
	return sqlschema.QuoteName(s.schema) + "." + sqlschema.QuoteName(name)
}

// prepare creates the meta schema and tables when missing: the schema
// first, then the tables side by side on connections of their own (each
// CREATE TABLE of a fresh target waits for InnoDB to create a file; one
// after the other they were ~65 ms of every first start).
func (s *checkpointStore) prepare(ctx context.Context) error {
	stmts := syncmeta.CreateStatements(s.schema)
	fail := func(err error) error {
		return errs.Wrap(err, CodeCheckpoint, "sync: create checkpoint tables in meta schema %s", sqlschema.QuoteName(s.schema))
	}
	if _, err := s.db.ExecContext(ctx, stmts[0]); err != nil {
		return fail(err)
	}
	errc := make(chan error, len(stmts)-1)
	for _, q := range stmts[1:] {
		go func() {
			_, err := s.db.ExecContext(ctx, q)
			errc <- err
		}()
	}
	var err error
	for range stmts[1:] {
		err = errors.Join(err, <-errc)
	}
	if err != nil {
		return fail(err)
	}
	return nil
}

// load returns the saved checkpoint; ok is false when there is none.
func (s *checkpointStore) load(ctx context.Context) (cp savedCheckpoint, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT binlog_name, binlog_pos, binlog_gtid, pending_ddl_name, pending_ddl_pos FROM "+
		s.table(checkpointTable)+" WHERE task = ? AND source = ?", s.task, s.source).
		Scan(&cp.loc.Name, &cp.loc.Pos, &cp.loc.GTID, &cp.pendingDDL.Name, &cp.pendingDDL.Pos)
	if errors.Is(err, sql.ErrNoRows) {
		return cp, false, nil
	}
	if err != nil {
		return cp, false, errs.Wrap(err, CodeCheckpoint, "sync: load checkpoint of task %q source %q", s.task, s.source)
	}
	return cp, true, nil
}

// save writes the checkpoint.
func (s *checkpointStore) save(ctx context.Context, cp savedCheckpoint) error {
	_, err := s.db.ExecContext(ctx, "REPLACE INTO "+s.table(checkpointTable)+
		" (task, source, binlog_name, binlog_pos, binlog_gtid, pending_ddl_name, pending_ddl_pos) VALUES (?,?,?,?,?,?,?)",
		s.task, s.source, cp.loc.Name, cp.loc.Pos, cp.loc.GTID, cp.pendingDDL.Name, cp.pendingDDL.Pos)
	if err != nil {
		return errs.Wrap(err, CodeCheckpoint, "sync: save checkpoint %s of task %q source %q", cp.loc, s.task, s.source)
	}
	return nil
}

// safePointStmt records, inside a worker's batch transaction, the highest
// location the batch applied.
func (s *checkpointStore) safePointStmt(worker int, loc binlog.Location) stmt {
	return stmt{sql: "REPLACE INTO " + s.table(safePointTable) +
		" (task, source, worker, binlog_name, binlog_pos) VALUES (?,?,?,?,?)",
		args: []any{s.task, s.source, worker, loc.Name, loc.Pos}}
}

// maxSafePoint returns the highest location any worker ever applied.
func (s *checkpointStore) maxSafePoint(ctx context.Context) (binlog.Location, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT binlog_name, binlog_pos FROM "+s.table(safePointTable)+
		" WHERE task = ? AND source = ?", s.task, s.source)
	if err != nil {
		return binlog.Location{}, errs.Wrap(err, CodeCheckpoint, "sync: load safe points of task %q", s.task)
	}
	var best binlog.Location
	for rows.Next() {
		var l binlog.Location
		if err := rows.Scan(&l.Name, &l.Pos); err != nil {
			return binlog.Location{}, errors.Join(fmt.Errorf("sync: scan safe point: %w", err), rows.Close())
		}
		if best.IsZero() || l.Compare(best) > 0 {
			best = l
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return binlog.Location{}, errs.Wrap(err, CodeCheckpoint, "sync: load safe points of task %q", s.task)
	}
	return best, nil
}

// exists reports whether a checkpoint row exists (tables may be missing).
func (s *checkpointStore) exists(ctx context.Context) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
		s.schema, checkpointTable).Scan(&n)
	if err != nil {
		return false, errs.Wrap(err, CodeCheckpoint, "sync: look for checkpoint table")
	}
	if n == 0 {
		return false, nil
	}
	_, ok, err := s.load(ctx)
	return ok, err
}
