package stream

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// TableName names one table of the source.
type TableName struct{ DB, Table string }

// String is "db.table", the key of the table in Checkpoint.Snapshot.
func (t TableName) String() string { return t.DB + "." + t.Table }

// IsZero reports whether t names no table.
func (t TableName) IsZero() bool { return t == TableName{} }

// quoted is `db`.`table`.
func (t TableName) quoted() string { return sqlschema.QuoteTable(t.DB, t.Table) }

// SnapshotRow is one row read by fill-history.
type SnapshotRow struct {
	Table TableName
	// Columns are the names of Values, in the table's column order; one
	// slice is shared by the rows of a table: do not modify it.
	Columns []string
	// Values are nil for NULL, else the value's bytes as MariaDB prints it
	// (text; a FLOAT as the double that holds it exactly), raw for
	// BINARY/BLOB/BIT; each a copy the caller may keep.
	Values []any
	// Cursor is the row's key as text, one value per key column (as
	// TableProgress.Cursor keeps it); nil for a table read without a key.
	Cursor []string
}

// SnapshotOption configures Snapshot.
type SnapshotOption func(*snapshotter)

// WithSnapshotLogger sets the logger (default: none).
func WithSnapshotLogger(l *zap.Logger) SnapshotOption {
	return func(s *snapshotter) { s.log = l }
}

// DefaultSnapshotChunk is the chunk size Snapshot uses when given 0 or less
// (mydumper's default rows per chunk).
const DefaultSnapshotChunk = 10000

// unkeyedWriteTimeout is the session's net_write_timeout (seconds) while a
// table without a key streams out of one query: emit (a sink write, which
// retries) may keep the client from reading for longer than the default
// 60 s after which the server would drop the connection.
const unkeyedWriteTimeout = 86400

// MariaDB error numbers the snapshot explains.
const erTableDefChanged = 1412

// Snapshot reads the selected tables at one consistent point of a
// MariaDB source and says which binlog location that point is, so that
// streaming from the location after the snapshot loses and doubles nothing.
//
// Consistency: one connection runs START TRANSACTION WITH CONSISTENT
// SNAPSHOT (REPEATABLE READ, read only; sqlschema.BeginSnapshot, the
// routine the dump's fallback uses too). MariaDB takes the InnoDB read view
// and the binlog position together, under the binlog's commit order, and
// shows that position as the status variables binlog_snapshot_file and
// binlog_snapshot_position of the session: every transaction committed
// before it is in the snapshot, every later one is not and has its events
// after it. BINLOG_GTID_POS(file, pos) turns it into the GTID position.
// Every table is then read inside that transaction, so no lock is taken
// (only the metadata lock of the table being read) and writes go on. The
// source must be MariaDB (MySQL has no binlog_snapshot_* variables) and its
// tables transactional (InnoDB); a table altered by DDL after the snapshot
// began fails with ER_TABLE_DEF_CHANGED and the snapshot must start again.
//
// Rows come as text, as the text protocol carries them (no statement has
// arguments: key values are written into the query as literals; the
// integers and floats go-sql-driver parses are printed back): integers,
// decimals and temporal values in MariaDB's text form (TIMESTAMP in UTC:
// the session's time_zone is +00:00, as the binlog carries them), FLOAT as
// the text of the double that holds it exactly (selectList), text columns
// in utf8mb4 (SET NAMES utf8mb4), BINARY/BLOB/BIT as their raw bytes, NULL
// as nil. The pool must not parse times (go-sql-driver's parseTime off).
// The connection's session settings are changed, so it is closed at the
// end instead of going back to the pool.
//
// It returns the snapshot's binlog location, where streaming starts.
//
// Each table not Done in progress (by TableName.String()) is read in
// key order in chunks of chunk rows (DefaultSnapshotChunk when chunk <= 0)
// with keyset pagination (sqlschema.Keyset, the chunker the dump uses
// too), WHERE (k1, k2) > (cursor) ORDER BY k1, k2 LIMIT chunk, written as
// k1 >= c1 AND (k1 > c1 OR (k1 = c1 AND k2 > c2)) so that MariaDB reads an
// index range. keys gives each table's key columns (the primary key or a
// unique key whose columns are NOT NULL); a table without an entry, or
// whose key has a column of a type that cannot be paged exactly (FLOAT,
// DOUBLE, ENUM, SET, spatial, JSON; sqlschema.KindOf) or an INVISIBLE one,
// is read whole in one query ordered by every column, which the log says.
// A key column that holds NULL fails the snapshot.
//
// emit is called once per chunk, in order, with the chunk's rows; done names
// the table when this chunk is its last (a table that ends exactly at a
// chunk boundary, or is empty, gets one more call with no rows), and is
// zero otherwise. The rows are the caller's. An error from emit stops the
// snapshot and is returned as it is. The snapshot transaction stays open
// while emit runs (a slow sink keeps an old read view on the source, whose
// undo history grows meanwhile). The caller keeps progress from the calls:
// Cursor of the last row, Rows counted, Done when done is set.
//
// Resume after a crash: progress gives per-table cursors; a table with a
// cursor is read from after it (a cursor that does not fit the key is
// dropped and the table read from its start, logged). The new snapshot is
// taken at a new point, so the rows before the cursor were read at the
// earlier point: the caller must stream from the earlier location (the one
// the first Snapshot returned, kept in its checkpoint), which replays the
// changes in between (at-least-once). Tables read without a key have no
// cursor and are read again from their start.
func Snapshot(ctx context.Context, db *sql.DB, tables []TableName, keys map[TableName][]string,
	progress map[string]TableProgress, chunk int,
	emit func(rows []SnapshotRow, done TableName) error, opts ...SnapshotOption) (loc binlog.Location, err error) {
	s := &snapshotter{chunk: chunk, emit: emit}
	for _, opt := range opts {
		opt(s)
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.chunk <= 0 {
		s.chunk = DefaultSnapshotChunk
	}
	if s.conn, err = db.Conn(ctx); err != nil {
		return binlog.Location{}, fmt.Errorf("stream: fill-history: connect to the source: %w", err)
	}
	defer s.discard()

	if loc, err = s.begin(ctx); err != nil {
		return binlog.Location{}, err
	}
	s.log.Info("fill-history snapshot taken", zap.Stringer("location", loc), zap.String("gtid", loc.GTID), zap.Int("tables", len(tables)))
	for _, t := range tables {
		p := progress[t.String()]
		if p.Done {
			continue
		}
		if err := s.table(ctx, t, keys[t], p); err != nil {
			return binlog.Location{}, err
		}
	}
	if _, err := s.conn.ExecContext(ctx, "COMMIT"); err != nil {
		return binlog.Location{}, fmt.Errorf("stream: fill-history: end the snapshot transaction: %w", err)
	}
	return loc, nil
}

// snapshotter is one run of Snapshot.
type snapshotter struct {
	conn  *sql.Conn
	chunk int
	emit  func([]SnapshotRow, TableName) error
	log   *zap.Logger
}

// discard closes the connection without returning it to the pool: its
// session settings differ from the pool's (and a transaction may be open).
func (s *snapshotter) discard() {
	_ = s.conn.Raw(func(any) error { return driver.ErrBadConn }) // makes database/sql close it
	_ = s.conn.Close()                                           // ErrConnDone by now; nothing to report
}

// begin sets up the session, starts the consistent snapshot and returns its
// binlog location.
func (s *snapshotter) begin(ctx context.Context) (binlog.Location, error) {
	for _, q := range []string{
		"SET NAMES " + snapshotCharset,
		"SET SESSION time_zone = '+00:00'",
		"SET SESSION net_write_timeout = " + strconv.Itoa(unkeyedWriteTimeout),
		"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
	} {
		if _, err := s.conn.ExecContext(ctx, q); err != nil {
			return binlog.Location{}, fmt.Errorf("stream: fill-history: %s: %w", q, err)
		}
	}
	loc, err := sqlschema.BeginSnapshot(ctx, s.conn)
	switch {
	case errors.Is(err, sqlschema.ErrNoSnapshotStatus):
		return binlog.Location{}, fmt.Errorf("stream: fill-history: %w: fill-history needs a MariaDB source "+
			"(it takes the snapshot's binlog position from START TRANSACTION WITH CONSISTENT SNAPSHOT); "+
			"set snapshot: false in the stream config for other sources", err)
	case errors.Is(err, sqlschema.ErrSnapshotGTIDUnknown):
		return binlog.Location{}, fmt.Errorf("stream: fill-history: %w; start the stream again", err)
	case err != nil:
		return binlog.Location{}, fmt.Errorf("stream: fill-history: %w", err)
	}
	return loc, nil
}

// snapshotCharset is the session's charset: text columns are read, and
// text cursors written, in it.
const snapshotCharset = "utf8mb4"

// tableKey is how one table is paged: the shared keyset chunker, and
// where its columns are among the columns read.
type tableKey struct {
	*sqlschema.Keyset
	index []int // the key columns' positions among the columns read
}

// table reads one table and emits its chunks.
func (s *snapshotter) table(ctx context.Context, t TableName, key []string, p TableProgress) error {
	log := s.log.With(zap.Stringer("table", t))
	tbl, err := sqlschema.ReadTable(ctx, s.conn, t.DB, t.Table)
	if err != nil {
		return readErr(t, err)
	}
	cols, types := selectedColumns(tbl)
	selected := selectList(cols, types)
	k, why := keyOf(tbl, cols, key)
	if why != "" {
		log.Warn("fill-history reads the table without a key, whole, in one query ordered by every column; "+
			"a restart reads it again from its start", zap.String("reason", why))
		return s.whole(ctx, t, selected, cols)
	}
	cursor := p.Cursor
	if len(cursor) != 0 && len(cursor) != len(k.Columns) {
		log.Warn("fill-history progress does not fit the table's key; reading the table from its start",
			zap.Strings("cursor", cursor), zap.Strings("key", k.Names()))
		cursor = nil
	}
	log.Info("fill-history reads the table", zap.Strings("key", k.Names()), zap.Bool("resume", cursor != nil))
	var total int64
	for {
		where, err := keysetWhere(k, cursor)
		if err != nil {
			return fmt.Errorf("stream: fill-history: %s: cursor %q: %w", t, cursor, err)
		}
		q := "SELECT " + selected + " FROM " + t.quoted() + where + " ORDER BY " + k.OrderBy() + " LIMIT " + strconv.Itoa(s.chunk)
		rows, err := s.read(ctx, t, q, cols, &k)
		if err != nil {
			return err
		}
		if len(rows) > 0 && cursor != nil && slices.Equal(rows[0].Cursor, cursor) {
			return fmt.Errorf("stream: fill-history: %s: the key (%s) does not advance past %q: its values do not compare as they print; give the table another key",
				t, strings.Join(k.Names(), ", "), cursor)
		}
		total += int64(len(rows))
		var done TableName
		if len(rows) < s.chunk {
			done = t
		} else {
			cursor = rows[len(rows)-1].Cursor
		}
		if err := s.emit(rows, done); err != nil {
			return err
		}
		if !done.IsZero() {
			log.Info("fill-history read the table", zap.Int64("rows", total))
			return nil
		}
	}
}

// keyOf pages the table tbl by the key columns key, read among the
// columns cols; why says why the key cannot page the table ("" when it
// can).
func keyOf(tbl *sqlschema.Table, cols []string, key []string) (k tableKey, why string) {
	if len(key) == 0 {
		return k, "no primary key or NOT NULL unique key"
	}
	ks, err := sqlschema.NewKeyset(tbl, "", key, snapshotCharset)
	if err != nil {
		return tableKey{}, err.Error()
	}
	k.Keyset = ks
	for _, c := range ks.Columns {
		i := slices.Index(cols, c.Name)
		if i < 0 {
			return tableKey{}, fmt.Sprintf("key column %s is INVISIBLE, so SELECT * does not read it", c.Name)
		}
		k.index = append(k.index, i)
	}
	return k, ""
}

// keysetWhere is the condition "key > cursor" (nothing without a cursor)
// that sqlschema.Keyset.Where writes.
func keysetWhere(k tableKey, cursor []string) (string, error) {
	if cursor == nil {
		return "", nil
	}
	raw := make([][]byte, len(cursor))
	for i, v := range cursor {
		raw[i] = []byte(v)
	}
	lits, err := k.Literals(raw)
	if err != nil {
		return "", err
	}
	return k.Where(lits, nil), nil
}

// selectedColumns are the names and upper-cased DATA_TYPEs of the columns
// of tbl that SELECT * reads: all but the INVISIBLE ones.
func selectedColumns(tbl *sqlschema.Table) (names, types []string) {
	for _, c := range tbl.Columns {
		if c.Invisible {
			continue
		}
		names = append(names, c.Name)
		types = append(types, strings.ToUpper(c.DataType))
	}
	return names, types
}

// selectList is the SELECT list that reads every column of a table exactly,
// given the names and types selectedColumns returns: each
// column as itself, but a FLOAT as CAST(col AS DOUBLE) under its own name.
// MariaDB prints a FLOAT with 6 significant digits (FLT_DIG, and ZEROFILL or
// FLOAT(M,D) digits), which lose most of its value; the DOUBLE holds the
// float32 exactly and prints as the shortest text that reads back as that
// double (up to 17 digits), whose nearest float32 is the stored value. The
// list keeps the columns' names and order, so the result's columns are
// those of SELECT * and ORDER BY positions and key names stay valid.
func selectList(names, types []string) string {
	exprs := make([]string, len(names))
	for i, n := range names {
		exprs[i] = sqlschema.QuoteName(n)
		if types[i] == "FLOAT" {
			exprs[i] = "CAST(" + exprs[i] + " AS DOUBLE) AS " + exprs[i]
		}
	}
	return strings.Join(exprs, ", ")
}

// read runs a chunk query and returns its rows; k (nil for a table read
// without a key) gives the cursor.
func (s *snapshotter) read(ctx context.Context, t TableName, q string, cols []string, k *tableKey) ([]SnapshotRow, error) {
	var out []SnapshotRow
	err := s.query(ctx, t, q, cols, k, func(r SnapshotRow) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// whole reads a table without a key in one query of the SELECT list
// selected (of the columns cols) ordered by every column, emitting every
// chunk rows as they arrive.
func (s *snapshotter) whole(ctx context.Context, t TableName, selected string, cols []string) error {
	order := make([]string, len(cols))
	for i := range cols {
		order[i] = strconv.Itoa(i + 1)
	}
	q := "SELECT " + selected + " FROM " + t.quoted() + " ORDER BY " + strings.Join(order, ", ")
	var total int64
	batch := make([]SnapshotRow, 0, s.chunk)
	err := s.query(ctx, t, q, cols, nil, func(r SnapshotRow) error {
		batch = append(batch, r)
		if len(batch) < s.chunk {
			return nil
		}
		total += int64(len(batch))
		full := batch
		batch = make([]SnapshotRow, 0, s.chunk)
		return s.emit(full, TableName{})
	})
	if err != nil {
		return err
	}
	total += int64(len(batch))
	if err := s.emit(batch, t); err != nil {
		return err
	}
	s.log.Info("fill-history read the table", zap.Stringer("table", t), zap.Int64("rows", total))
	return nil
}

// emitError marks an error of the row callback, returned as it is.
type emitError struct{ err error }

func (e *emitError) Error() string { return e.err.Error() }
func (e *emitError) Unwrap() error { return e.err }

// query runs q on the snapshot's connection and calls each with every row,
// copied out of the driver's buffers. An error of each is returned as it is.
func (s *snapshotter) query(ctx context.Context, t TableName, q string, cols []string, k *tableKey, each func(SnapshotRow) error) error {
	rows, err := s.conn.QueryContext(ctx, q)
	if err != nil {
		return readErr(t, err)
	}
	got, err := rows.Columns()
	if err != nil {
		_ = rows.Close()
		return readErr(t, err)
	}
	if !slices.Equal(got, cols) {
		_ = rows.Close()
		return fmt.Errorf("stream: fill-history: %s: its columns changed while it was read (%v, then %v); start the snapshot again", t, cols, got)
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	err = sqlschema.ScanRows(rows, func(r *sql.Rows) error {
		if err := r.Scan(ptrs...); err != nil { // into *any: []byte values are copied
			return err
		}
		row := SnapshotRow{Table: t, Columns: cols, Values: make([]any, len(cols))}
		for i, v := range vals {
			text, err := textValue(v)
			if err != nil {
				return fmt.Errorf("column %s: %w", cols[i], err)
			}
			if text != nil {
				row.Values[i] = text
			}
		}
		if k != nil {
			row.Cursor = make([]string, len(k.index))
			for j, i := range k.index {
				if vals[i] == nil {
					return fmt.Errorf("key column %s is NULL in a row: the key is not NOT NULL; give the table a key without NULLs", k.Columns[j].Name)
				}
				row.Cursor[j] = string(row.Values[i].([]byte))
			}
		}
		if err := each(row); err != nil {
			return &emitError{err}
		}
		return nil
	})
	if ee := (*emitError)(nil); errors.As(err, &ee) {
		return ee.err
	}
	return readErr(t, err)
}

// textValue returns a value of the text protocol as text (nil for NULL).
// go-sql-driver hands text as []byte but parses integers and floats; they
// are printed back (integers exactly as MariaDB prints them, floats in
// their shortest exact form).
func textValue(v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []byte:
		return x, nil
	case int64:
		return strconv.AppendInt(nil, x, 10), nil
	case uint64:
		return strconv.AppendUint(nil, x, 10), nil
	case float32:
		return strconv.AppendFloat(nil, float64(x), 'g', -1, 32), nil
	case float64:
		return strconv.AppendFloat(nil, x, 'g', -1, 64), nil
	case time.Time:
		return nil, errors.New("the pool parses times (go-sql-driver's parseTime is on), so their text is lost; open the source pool with parseTime off")
	}
	return nil, fmt.Errorf("the driver gave a %T, not text", v)
}

// readErr names the table in an error reading it.
func readErr(t TableName, err error) error {
	if err == nil {
		return nil
	}
	if dbconn.ErrorNumber(err) == erTableDefChanged {
		return fmt.Errorf("stream: fill-history: %s was altered after the snapshot began (%w); start the snapshot again", t, err)
	}
	return fmt.Errorf("stream: fill-history: read %s: %w", t, err)
}

// ListTables lists the base tables (no views) of the source that allowed
// selects, sorted by schema and name, leaving out the system schemas
// (mysql, information_schema, performance_schema, sys). allowed is the
// stream's block-allow list, e.g. filter.NewTables(cfg.BAList, false).TableAllowed;
// nil allows every table.
func ListTables(ctx context.Context, db *sql.DB, allowed func(db, table string) bool) ([]TableName, error) {
	q := "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN " +
		sqlschema.SystemSchemaList() + " ORDER BY TABLE_SCHEMA, TABLE_NAME"
	var out []TableName
	err := sqlschema.ScanAll(ctx, db, q, nil, func(r *sql.Rows) error {
		var t TableName
		if err := r.Scan(&t.DB, &t.Table); err != nil {
			return err
		}
		if allowed == nil || allowed(t.DB, t.Table) {
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("stream: list the source's tables: %w", err)
	}
	return out, nil
}
