package stream

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
)

// Fill-history reads the selected tables at one consistent point of a
// MariaDB source and says which binlog location that point is, so that
// streaming from the location after the snapshot loses and doubles nothing.
//
// Consistency: one connection runs START TRANSACTION WITH CONSISTENT
// SNAPSHOT (REPEATABLE READ, read only). MariaDB takes the InnoDB read view
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

// TableName names one table of the source.
type TableName struct{ DB, Table string }

// String is "db.table", the key of the table in Checkpoint.Snapshot.
func (t TableName) String() string { return t.DB + "." + t.Table }

// IsZero reports whether t names no table.
func (t TableName) IsZero() bool { return t == TableName{} }

// quoted is `db`.`table`.
func (t TableName) quoted() string { return quoteName(t.DB) + "." + quoteName(t.Table) }

// quoteName quotes an identifier with backticks.
func quoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

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

// Snapshot reads tables at one consistent point of the source (see above)
// and returns that point's binlog location, where streaming starts.
//
// Each table not Done in progress (by TableName.String()) is read in
// key order in chunks of chunk rows (DefaultSnapshotChunk when chunk <= 0)
// with keyset pagination, WHERE (k1, k2) > (cursor) ORDER BY k1, k2 LIMIT
// chunk, written as k1 >= c1 AND (k1 > c1 OR (k1 = c1 AND k2 > c2)) so
// that MariaDB reads an index range. keys gives each table's key columns
// (the primary key or a unique key whose columns are NOT NULL); a table
// without an entry, or whose key has a column of a type that cannot be
// paged exactly (FLOAT, DOUBLE, ENUM, SET, spatial, JSON), is read whole in
// one query ordered by every column, which the log says. A key column that
// holds NULL fails the snapshot.
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
		"SET NAMES utf8mb4",
		"SET SESSION time_zone = '+00:00'",
		"SET SESSION net_write_timeout = " + strconv.Itoa(unkeyedWriteTimeout),
		"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
		"START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
	} {
		if _, err := s.conn.ExecContext(ctx, q); err != nil {
			return binlog.Location{}, fmt.Errorf("stream: fill-history: %s: %w", q, err)
		}
	}
	status := map[string]string{}
	rows, err := s.conn.QueryContext(ctx, "SHOW SESSION STATUS LIKE 'binlog_snapshot_%'")
	if err != nil {
		return binlog.Location{}, fmt.Errorf("stream: fill-history: read the snapshot's binlog location: %w", err)
	}
	err = scanAll(rows, func(r *sql.Rows) error {
		var name, value string
		if err := r.Scan(&name, &value); err != nil {
			return err
		}
		status[strings.ToLower(name)] = value
		return nil
	})
	if err != nil {
		return binlog.Location{}, fmt.Errorf("stream: fill-history: read the snapshot's binlog location: %w", err)
	}
	file, ok := status["binlog_snapshot_file"]
	if !ok {
		return binlog.Location{}, errors.New("stream: fill-history: the source has no binlog_snapshot_file status variable: " +
			"fill-history needs a MariaDB source (it takes the snapshot's binlog position from START TRANSACTION WITH CONSISTENT SNAPSHOT); " +
			"set snapshot: false in the stream config for other sources")
	}
	if file == "" {
		return binlog.Location{}, errors.New("stream: fill-history: the source's binary log is off (binlog_snapshot_file is empty); turn on log_bin")
	}
	pos, err := strconv.ParseUint(status["binlog_snapshot_position"], 10, 32)
	if err != nil {
		return binlog.Location{}, fmt.Errorf("stream: fill-history: binlog_snapshot_position %q: %w", status["binlog_snapshot_position"], err)
	}
	var gtid sql.NullString
	if err := s.conn.QueryRowContext(ctx, "SELECT BINLOG_GTID_POS("+textLiteral(file)+", "+strconv.FormatUint(pos, 10)+")").Scan(&gtid); err != nil {
		return binlog.Location{}, fmt.Errorf("stream: fill-history: BINLOG_GTID_POS of %s:%d: %w", file, pos, err)
	}
	if !gtid.Valid {
		return binlog.Location{}, fmt.Errorf("stream: fill-history: BINLOG_GTID_POS(%s, %d) is NULL: the source does not find its own snapshot position in its binlog (purged at this moment?); start the stream again", file, pos)
	}
	return binlog.Location{Name: file, Pos: uint32(pos), GTID: gtid.String}, nil
}

// keyKind says how a key column's cursor value is written into a query.
type keyKind int

const (
	keyUnusable keyKind = iota // the column cannot page the table exactly
	keyNumber                  // an exact number: written as it is
	keyText                    // text and temporal values: a utf8mb4 string
	keyBinary                  // bytes: a binary string
)

// kindOf classifies a column by go-sql-driver's DatabaseTypeName.
func kindOf(typeName string) keyKind {
	t := strings.TrimPrefix(typeName, "UNSIGNED ")
	switch {
	case strings.HasSuffix(t, "INT"), t == "DECIMAL", t == "YEAR":
		return keyNumber
	case t == "BINARY", t == "VARBINARY", strings.HasSuffix(t, "BLOB"), t == "BIT":
		return keyBinary
	case t == "CHAR", t == "VARCHAR", strings.HasSuffix(t, "TEXT"),
		t == "DATE", t == "DATETIME", t == "TIMESTAMP", t == "TIME":
		return keyText
	}
	// FLOAT/DOUBLE text may not compare equal to the stored value; ENUM and
	// SET sort by member number but compare with strings as text; spatial,
	// JSON and unknown types are not keys to page by.
	return keyUnusable
}

// numberText is the text of an exact number as MariaDB prints it.
var numberText = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

// literal writes v, a key value of kind k read from the table, as an SQL
// literal that compares with the column as the column's own values do.
func literal(k keyKind, v string) (string, error) {
	switch k {
	case keyNumber:
		if !numberText.MatchString(v) {
			return "", fmt.Errorf("%q is not a number", v)
		}
		return v, nil
	case keyBinary:
		return "X'" + hex.EncodeToString([]byte(v)) + "'", nil
	}
	return textLiteral(v), nil
}

// textLiteral writes v as a utf8mb4 string literal (coercible, so the
// column's collation decides the comparison), hex-encoded so that no
// sql_mode changes how it reads.
func textLiteral(v string) string { return "_utf8mb4 X'" + hex.EncodeToString([]byte(v)) + "'" }

// tableKey is how one table is paged.
type tableKey struct {
	names []string  // key columns, as the table spells them
	index []int     // their positions among the columns
	kinds []keyKind // how their values are written
}

// table reads one table and emits its chunks.
func (s *snapshotter) table(ctx context.Context, t TableName, key []string, p TableProgress) error {
	log := s.log.With(zap.Stringer("table", t))
	cols, types, err := tableColumns(ctx, s.conn, t)
	if err != nil {
		return err
	}
	selected := selectList(cols, types)
	k, why := keyOf(cols, types, key)
	if why != "" {
		log.Warn("fill-history reads the table without a key, whole, in one query ordered by every column; "+
			"a restart reads it again from its start", zap.String("reason", why))
		return s.whole(ctx, t, selected, cols)
	}
	cursor := p.Cursor
	if len(cursor) != 0 && len(cursor) != len(k.names) {
		log.Warn("fill-history progress does not fit the table's key; reading the table from its start",
			zap.Strings("cursor", cursor), zap.Strings("key", k.names))
		cursor = nil
	}
	log.Info("fill-history reads the table", zap.Strings("key", k.names), zap.Bool("resume", cursor != nil))
	order := make([]string, len(k.names))
	for i, n := range k.names {
		order[i] = quoteName(n)
	}
	var total int64
	for {
		where, err := keysetWhere(k, cursor)
		if err != nil {
			return fmt.Errorf("stream: fill-history: %s: cursor %q: %w", t, cursor, err)
		}
		q := "SELECT " + selected + " FROM " + t.quoted() + where + " ORDER BY " + strings.Join(order, ", ") + " LIMIT " + strconv.Itoa(s.chunk)
		rows, err := s.read(ctx, t, q, cols, &k)
		if err != nil {
			return err
		}
		if len(rows) > 0 && cursor != nil && slices.Equal(rows[0].Cursor, cursor) {
			return fmt.Errorf("stream: fill-history: %s: the key (%s) does not advance past %q: its values do not compare as they print; give the table another key",
				t, strings.Join(k.names, ", "), cursor)
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

// keyOf matches the key columns with the table's columns; why says why the
// key cannot page the table ("" when it can).
func keyOf(cols []string, types []string, key []string) (k tableKey, why string) {
	if len(key) == 0 {
		return k, "no primary key or NOT NULL unique key"
	}
	for _, name := range key {
		i := slices.IndexFunc(cols, func(c string) bool { return strings.EqualFold(c, name) })
		if i < 0 {
			return tableKey{}, fmt.Sprintf("key column %s is not a column of the table", name)
		}
		kind := kindOf(types[i])
		if kind == keyUnusable {
			return tableKey{}, fmt.Sprintf("key column %s is of type %s, whose values cannot page the table exactly", name, types[i])
		}
		k.names = append(k.names, cols[i])
		k.index = append(k.index, i)
		k.kinds = append(k.kinds, kind)
	}
	return k, ""
}

// keysetWhere is the condition "key > cursor" (nothing without a cursor),
// written so that MariaDB reads a range of the key's index:
// k1 >= c1 AND (k1 > c1 OR (k1 = c1 AND (k2 > c2 OR (k2 = c2 AND k3 > c3)))).
func keysetWhere(k tableKey, cursor []string) (string, error) {
	if cursor == nil {
		return "", nil
	}
	lits := make([]string, len(cursor))
	for i, v := range cursor {
		var err error
		if lits[i], err = literal(k.kinds[i], v); err != nil {
			return "", fmt.Errorf("key column %s: %w", k.names[i], err)
		}
	}
	n := len(lits) - 1
	cond := quoteName(k.names[n]) + " > " + lits[n]
	for i := n - 1; i >= 0; i-- {
		c := quoteName(k.names[i])
		cond = c + " > " + lits[i] + " OR (" + c + " = " + lits[i] + " AND (" + cond + "))"
	}
	return " WHERE " + quoteName(k.names[0]) + " >= " + lits[0] + " AND (" + cond + ")", nil
}

// queryer runs a query: a *sql.Conn, *sql.DB or *sql.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// tableColumns returns the names and go-sql-driver type names
// (DatabaseTypeName) of t's columns, in the table's order.
func tableColumns(ctx context.Context, q queryer, t TableName) (names, types []string, err error) {
	rows, err := q.QueryContext(ctx, "SELECT * FROM "+t.quoted()+" LIMIT 0")
	if err != nil {
		return nil, nil, readErr(t, err)
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, nil, readErr(t, err)
	}
	for _, ct := range cts {
		names = append(names, ct.Name())
		types = append(types, ct.DatabaseTypeName())
	}
	return names, types, readErr(t, scanAll(rows, func(*sql.Rows) error { return nil }))
}

// selectList is the SELECT list that reads every column of a table exactly,
// given the names and go-sql-driver type names tableColumns returns: each
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
		exprs[i] = quoteName(n)
		if strings.TrimPrefix(types[i], "UNSIGNED ") == "FLOAT" {
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
	err = scanAll(rows, func(r *sql.Rows) error {
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
					return fmt.Errorf("key column %s is NULL in a row: the key is not NOT NULL; give the table a key without NULLs", k.names[j])
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

// scanAll calls each for every row, closes rows and returns the first
// error.
func scanAll(rows *sql.Rows, each func(*sql.Rows) error) error {
	for rows.Next() {
		if err := each(rows); err != nil {
			_ = rows.Close()
			return err
		}
	}
	if err := rows.Err(); err != nil {
		_ = rows.Close()
		return err
	}
	return rows.Close()
}

// readErr names the table in an error reading it.
func readErr(t TableName, err error) error {
	if err == nil {
		return nil
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == erTableDefChanged {
		return fmt.Errorf("stream: fill-history: %s was altered after the snapshot began (%w); start the snapshot again", t, err)
	}
	return fmt.Errorf("stream: fill-history: read %s: %w", t, err)
}

// systemSchemas are never read by fill-history.
var systemSchemas = []string{"mysql", "information_schema", "performance_schema", "sys"}

// ListTables lists the base tables (no views) of the source that allowed
// selects, sorted by schema and name, leaving out the system schemas
// (mysql, information_schema, performance_schema, sys). allowed is the
// stream's block-allow list, e.g. filter.NewTables(cfg.BAList, false).TableAllowed;
// nil allows every table.
func ListTables(ctx context.Context, db *sql.DB, allowed func(db, table string) bool) ([]TableName, error) {
	q := "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN ('" +
		strings.Join(systemSchemas, "', '") + "') ORDER BY TABLE_SCHEMA, TABLE_NAME"
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("stream: list the source's tables: %w", err)
	}
	var out []TableName
	err = scanAll(rows, func(r *sql.Rows) error {
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
