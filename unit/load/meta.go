package load

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/unit/load/loadmeta"
	"github.com/dmworker/dm-worker/unit/syncer/syncmeta"
)

// metaStore reads and writes the load unit's rows of one task and source
// in the meta schema (tables named by package loadmeta).
type metaStore struct {
	schema       string
	task, source string
}

func (s *metaStore) table(name string) string { return sqlschema.QuoteTable(s.schema, name) }

// prepare creates the meta schema, the load tables and the sync unit's
// tables the hand-off writes, when missing.
func (s *metaStore) prepare(ctx context.Context, db *sql.DB) error {
	stmts := append(loadmeta.CreateStatements(s.schema), syncmeta.CreateStatements(s.schema)...)
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return errs.Wrap(err, CodeLoadCheckpoint, "load: create the load tables in meta schema %s of the target", sqlschema.QuoteName(s.schema))
		}
	}
	return nil
}

// loadState is what the target records of this task and source.
type loadState struct {
	hasStatus bool
	dumpID    string // of the status row
	finished  bool
	// chunks maps each recorded chunk file to its dump id.
	chunks map[string]string
}

// dumpIDs returns the distinct dump ids of the chunk records and how many
// chunks each has, in a stable order.
func (st *loadState) otherDumps(dumpID string) (ids []string, counts map[string]int) {
	counts = map[string]int{}
	for _, id := range st.chunks {
		if id != dumpID {
			if counts[id] == 0 {
				ids = append(ids, id)
			}
			counts[id]++
		}
	}
	return ids, counts
}

// anyDumpID is the dump id the records name (the status row's, else a
// chunk's), "" when nothing is recorded.
func (st *loadState) anyDumpID() string {
	if st.hasStatus {
		return st.dumpID
	}
	for _, id := range st.chunks {
		return id
	}
	return ""
}

// read returns the records of this task and source.
func (s *metaStore) read(ctx context.Context, db *sql.DB) (*loadState, error) {
	st := &loadState{chunks: map[string]string{}}
	var finished int
	err := db.QueryRowContext(ctx, "SELECT dump_id, finished FROM "+s.table(loadmeta.StatusTable)+
		" WHERE task = ? AND source = ?", s.task, s.source).Scan(&st.dumpID, &finished)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, s.readErr(err)
	default:
		st.hasStatus, st.finished = true, finished != 0
	}
	rows, err := db.QueryContext(ctx, "SELECT chunk_file, dump_id FROM "+s.table(loadmeta.CheckpointTable)+
		" WHERE task = ? AND source = ?", s.task, s.source)
	if err != nil {
		return nil, s.readErr(err)
	}
	for rows.Next() {
		var file, id string
		if err := rows.Scan(&file, &id); err != nil {
			return nil, s.readErr(errors.Join(err, rows.Close()))
		}
		st.chunks[file] = id
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, s.readErr(err)
	}
	return st, nil
}

func (s *metaStore) readErr(err error) error {
	return errs.Wrap(err, CodeLoadCheckpoint, "load: read the load records of task %q source %q in meta schema %s",
		s.task, s.source, sqlschema.QuoteName(s.schema))
}

// exists reports whether anything is recorded for this task and source.
func (s *metaStore) exists(ctx context.Context, db *sql.DB) (bool, error) {
	var n int
	err := db.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM "+s.table(loadmeta.StatusTable)+
		" WHERE task = ? AND source = ?) + (SELECT COUNT(*) FROM "+s.table(loadmeta.CheckpointTable)+
		" WHERE task = ? AND source = ?)", s.task, s.source, s.task, s.source).Scan(&n)
	if err != nil {
		return false, s.readErr(err)
	}
	return n > 0, nil
}

// begin records that dumpID is being loaded (not finished).
func (s *metaStore) begin(ctx context.Context, db *sql.DB, dumpID string) error {
	_, err := db.ExecContext(ctx, "INSERT INTO "+s.table(loadmeta.StatusTable)+
		" (task, source, dump_id, finished, row_count) VALUES (?, ?, ?, 0, 0)"+
		" ON DUPLICATE KEY UPDATE dump_id = VALUES(dump_id), finished = 0", s.task, s.source, dumpID)
	if err != nil {
		return errs.Wrap(err, CodeLoadCheckpoint, "load: record the start of loading dump %s of task %q source %q", dumpID, s.task, s.source)
	}
	return nil
}

// chunkStmt is the statement that records a chunk, run in the chunk's
// transaction. A chunk recorded twice fails on the primary key.
// The table is the source table the chunk holds rows of; rows is what was
// loaded (0 when a filter rule skips the table's rows).
func (s *metaStore) chunkStmt(dumpID string, j *job, rows int64) (string, []any) {
	return "INSERT INTO " + s.table(loadmeta.CheckpointTable) +
			" (task, source, dump_id, chunk_file, table_schema, table_name, row_count, byte_count) VALUES (?,?,?,?,?,?,?,?)",
		[]any{s.task, s.source, dumpID, j.chunk.File, j.plan.source.Schema, j.plan.source.Table, rows, j.chunk.Bytes}
}

// finish marks the load of dumpID finished and runs handOff (the sync
// unit's checkpoint and safe point, task mode all) in the same
// transaction.
func (s *metaStore) finish(ctx context.Context, db *sql.DB, dumpID string, rows int64, handOff []syncmeta.Statement) (err error) {
	wrap := func(err error) error {
		return errs.Wrap(err, CodeLoadCheckpoint, "load: record the end of loading dump %s of task %q source %q", dumpID, s.task, s.source)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return wrap(err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback() // the error being returned matters more
		}
	}()
	res, err := tx.ExecContext(ctx, "UPDATE "+s.table(loadmeta.StatusTable)+
		" SET finished = 1, row_count = ? WHERE task = ? AND source = ? AND dump_id = ?", rows, s.task, s.source, dumpID)
	if err != nil {
		return wrap(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return wrap(errors.Join(err, fmt.Errorf("the status row of dump %s is gone (meta removed while loading?)", dumpID)))
	}
	for _, st := range handOff {
		if _, err := tx.ExecContext(ctx, st.SQL, st.Args...); err != nil {
			return wrap(fmt.Errorf("hand over to the sync unit: %w", err))
		}
	}
	if err := tx.Commit(); err != nil {
		return wrap(err)
	}
	return nil
}
