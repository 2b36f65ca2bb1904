package validate

import (
	"bytes"
	"context"
	"crypto/sha1"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/unit/validate/validmeta"
)

// Error codes of the validator's store.
const (
	// CodeStore: reading or writing the checkpoint or the errors in the
	// meta schema failed (resumable when the cause is, e.g. the target is
	// unreachable).
	CodeStore = "validator-store"
	// CodeErrorNotFound: an operation named an error id the task and source
	// do not have.
	CodeErrorNotFound = "validation-error-not-found"
)

// An operation, state or error record the store cannot take is a
// non-resumable CodeBadOp error (operate.go).

// store reads and writes one task and source's rows of the validator's
// tables (validmeta) in the meta schema on the target: its checkpoint and
// its validation errors. It never touches rows of another task or source.
type store struct {
	db     *sql.DB
	schema string
	task   string
	source string
	// reportMu serialises report: concurrent transactions that lock
	// absent rows (FOR UPDATE) and then insert them deadlock on InnoDB's
	// gap locks.
	reportMu sync.Mutex
}

// newStore returns the store of task and source in schema on the target db.
func newStore(db *sql.DB, schema, task, source string) *store {
	return &store{db: db, schema: schema, task: task, source: source}
}

// table returns the quoted name of one of the validator's tables.
func (s *store) table(name string) string {
	return sqlschema.QuoteName(s.schema) + "." + sqlschema.QuoteName(name)
}

// storeErr wraps a database failure about what (e.g. "load checkpoint").
func (s *store) storeErr(err error, what string) error {
	return errs.Wrap(err, CodeStore, "validate: %s of task %q source %q in meta schema %s",
		what, s.task, s.source, sqlschema.QuoteName(s.schema))
}

// prepare creates the meta schema and the validator's tables when missing.
func (s *store) prepare(ctx context.Context) error {
	for _, q := range validmeta.CreateStatements(s.schema) {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return s.storeErr(err, "create the validator's tables")
		}
	}
	return nil
}

// loadCheckpoint returns the saved checkpoint and rows checked; ok is false
// when there is none (the validator starts from the sync checkpoint).
func (s *store) loadCheckpoint(ctx context.Context) (loc binlog.Location, rowsChecked int64, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT binlog_name, binlog_pos, binlog_gtid, rows_checked FROM "+
		s.table(validmeta.CheckpointTable)+" WHERE task = ? AND source = ?", s.task, s.source).
		Scan(&loc.Name, &loc.Pos, &loc.GTID, &rowsChecked)
	if errors.Is(err, sql.ErrNoRows) {
		return binlog.Location{}, 0, false, nil
	}
	if err != nil {
		return binlog.Location{}, 0, false, s.storeErr(err, "load checkpoint")
	}
	return loc, rowsChecked, true, nil
}

// saveCheckpoint writes the checkpoint: every row change before loc has
// been judged (and its errors reported), rowsChecked comparisons so far.
func (s *store) saveCheckpoint(ctx context.Context, loc binlog.Location, rowsChecked int64) error {
	_, err := s.db.ExecContext(ctx, "REPLACE INTO "+s.table(validmeta.CheckpointTable)+
		" (task, source, binlog_name, binlog_pos, binlog_gtid, rows_checked, updated_at) VALUES (?,?,?,?,?,?,CURRENT_TIMESTAMP(3))",
		s.task, s.source, loc.Name, loc.Pos, loc.GTID, rowsChecked)
	if err != nil {
		return s.storeErr(err, "save checkpoint "+loc.String())
	}
	return nil
}

// errorRow is an ErrorRecord checked and encoded for its table.
type errorRow struct {
	table, targetTable string
	tableHash          []byte
	key                string
	keyHash            []byte
	kind               string
	sourceRow          sql.NullString
	targetRow          sql.NullString
	loc                binlog.Location
}

// storedError is what report reads of an error already stored for a row.
type storedError struct {
	id    int64
	state string
	loc   binlog.Location
}

// report stores errors found by the validator, in one transaction, so that
// a restart that judges the same changes again neither loses nor repeats
// errors. For each record, in order: when the same table and key already
// has an error, in any state, at the record's binlog location or a later
// one, the record is skipped (it was stored before the restart, or is
// older than what is stored); else when that row has an error in state
// new, that error takes the record's kind, rows and location (and a new
// time) instead of a second error being added; else a new error is
// inserted. It returns how many errors in state new were added.
func (s *store) report(ctx context.Context, recs []ErrorRecord) (added int, err error) {
	rows := make([]errorRow, len(recs))
	for i := range recs {
		if rows[i], err = encodeRecord(&recs[i]); err != nil {
			return 0, err
		}
	}
	s.reportMu.Lock()
	defer s.reportMu.Unlock()
	// Another process writing the same table (a second worker's validator
	// of the task) can still deadlock with us: InnoDB rolled the
	// transaction back, so it is run again under the one lock-conflict
	// policy.
	err = dbconn.RetryLockConflict(ctx, func() error {
		added, err = s.reportTx(ctx, rows)
		return err
	}, nil)
	return added, err
}

// reportTx is one transaction of report.
func (s *store) reportTx(ctx context.Context, rows []errorRow) (added int, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, s.storeErr(err, "report validation errors: begin")
	}
	defer func() {
		if err != nil {
			if rb := tx.Rollback(); rb != nil && !errors.Is(rb, sql.ErrTxDone) {
				err = errors.Join(err, rb)
			}
		}
	}()
	for i := range rows {
		inserted, err := s.reportOne(ctx, tx, &rows[i])
		if err != nil {
			return 0, err
		}
		if inserted {
			added++
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, s.storeErr(err, "report validation errors: commit")
	}
	return added, nil
}

// reportOne applies the rules of report to one row; inserted tells whether
// a new error was added.
func (s *store) reportOne(ctx context.Context, tx *sql.Tx, r *errorRow) (inserted bool, err error) {
	what := fmt.Sprintf("report validation error of table %s key %s", r.table, r.key)
	stored, err := s.storedFor(ctx, tx, r)
	if err != nil {
		return false, s.storeErr(err, what)
	}
	var update int64
	for _, e := range stored {
		if e.loc.Compare(r.loc) >= 0 {
			return false, nil
		}
		if e.state == StateNew {
			update = e.id
		}
	}
	if update != 0 {
		_, err = tx.ExecContext(ctx, "UPDATE "+s.table(validmeta.ErrorTable)+
			" SET target_table = ?, kind = ?, source_row = ?, target_row = ?, binlog_name = ?, binlog_pos = ?, updated_at = CURRENT_TIMESTAMP(3)"+
			" WHERE id = ?", r.targetTable, r.kind, r.sourceRow, r.targetRow, r.loc.Name, r.loc.Pos, update)
		if err != nil {
			return false, s.storeErr(err, what)
		}
		return false, nil
	}
	_, err = tx.ExecContext(ctx, "INSERT INTO "+s.table(validmeta.ErrorTable)+
		" (task, source, src_table, target_table, table_hash, row_key, key_hash, kind, source_row, target_row, state, binlog_name, binlog_pos)"+
		" VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
		s.task, s.source, r.table, r.targetTable, r.tableHash, r.key, r.keyHash, r.kind, r.sourceRow, r.targetRow, StateNew, r.loc.Name, r.loc.Pos)
	if err != nil {
		return false, s.storeErr(err, what)
	}
	return true, nil
}

// storedFor reads (and locks) the errors stored for r's table and key,
// ordered by id.
func (s *store) storedFor(ctx context.Context, tx *sql.Tx, r *errorRow) (_ []storedError, err error) {
	rows, err := tx.QueryContext(ctx, "SELECT id, state, binlog_name, binlog_pos FROM "+s.table(validmeta.ErrorTable)+
		" WHERE task = ? AND source = ? AND table_hash = ? AND key_hash = ? ORDER BY id FOR UPDATE",
		s.task, s.source, r.tableHash, r.keyHash)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, rows.Close()) }()
	var out []storedError
	for rows.Next() {
		var e storedError
		if err := rows.Scan(&e.id, &e.state, &e.loc.Name, &e.loc.Pos); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// encodeRecord checks rec and encodes it for the error table: compact JSON
// for the key and rows (a nil or null row is NULL), SHA-1 hashes of table
// and key, the binlog location parsed. TargetTable defaults to Table.
func encodeRecord(rec *ErrorRecord) (errorRow, error) {
	bad := func(format string, args ...any) (errorRow, error) {
		return errorRow{}, errs.New(CodeBadOp, false, "validate: validation error of table %q: "+format,
			append([]any{rec.Table}, args...)...)
	}
	r := errorRow{table: rec.Table, targetTable: rec.TargetTable, kind: rec.Kind}
	if r.table == "" {
		return bad("no table; give the source table as schema.table")
	}
	if r.targetTable == "" {
		r.targetTable = r.table
	}
	if r.kind != KindMissing && r.kind != KindExtra && r.kind != KindDifferent {
		return bad("kind %q: use %s, %s or %s", r.kind, KindMissing, KindExtra, KindDifferent)
	}
	key, err := compactJSON(rec.Key)
	if err != nil || !key.Valid || key.String[0] != '{' {
		return bad("key %q is not a JSON object of key columns (%v)", rec.Key, err)
	}
	r.key = key.String
	if r.loc, err = binlog.ParseLocation(rec.Binlog); err != nil {
		return bad("binlog location: %v; give the judged change's location as file:pos", err)
	}
	if r.sourceRow, err = compactJSON(rec.SourceRow); err != nil {
		return bad("source row: %v", err)
	}
	if r.targetRow, err = compactJSON(rec.TargetRow); err != nil {
		return bad("target row: %v", err)
	}
	th, kh := sha1.Sum([]byte(r.table)), sha1.Sum([]byte(r.key))
	r.tableHash, r.keyHash = th[:], kh[:]
	return r, nil
}

// compactJSON returns raw as compact JSON text; NULL (not valid) for an
// empty raw or JSON null.
func compactJSON(raw json.RawMessage) (sql.NullString, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return sql.NullString{}, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return sql.NullString{}, err
	}
	if b.String() == "null" {
		return sql.NullString{}, nil
	}
	return sql.NullString{String: b.String(), Valid: true}, nil
}
