package stream

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/shopspring/decimal"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// encodeTypesDDL has a column of every type, as unit/syncer's round-trip
// test does, plus a latin1 column that holds cp1252's euro sign.
const encodeTypesDDL = `CREATE TABLE app.types (
  id INT PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
  de DECIMAL(40,10), de0 DECIMAL(5,0) UNSIGNED, f FLOAT, d DOUBLE,
  dt DATE, tm TIME(3), tm0 TIME, dtm DATETIME(6), dtm0 DATETIME, ts TIMESTAMP(6) NULL DEFAULT NULL, y YEAR,
  c CHAR(10), vc VARCHAR(100), tx TEXT, mt MEDIUMTEXT, bl BLOB, bn BINARY(4), vb VARBINARY(10),
  e ENUM('a','b''c','d,e'), s SET('x','y','z'), b1 BIT(1), b64 BIT(64), j JSON,
  lat VARCHAR(20) CHARACTER SET latin1, u8 VARCHAR(20) CHARACTER SET utf8mb3
) DEFAULT CHARSET=utf8mb4`

var encodeTypesRows = []string{
	`(1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
 '-999999999999999999999999999999.9999999999', 0, -3.402823e38, -1.7976931348623157e308,
 '1000-01-01', '-838:59:59.000', '-838:59:59', '1000-01-01 00:00:00.000000', '1000-01-01 00:00:00', '1970-01-01 00:00:01.000000', 1901,
 '', '', '', '', '', X'00000000', X'', 'a', '', 0, 0, '[]', '', '')`,
	`(2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615,
 '999999999999999999999999999999.9999999999', 99999, 3.402823e38, 1.7976931348623157e308,
 '9999-12-31', '838:59:59.999', '838:59:59', '9999-12-31 23:59:59.999999', '9999-12-31 23:59:59', '2038-01-19 03:14:07.999999', 2155,
 'zzzzzzzzzz', REPEAT('y', 100), REPEAT('t', 3000), REPEAT('m', 70000), REPEAT(X'FF', 5000), X'FFFFFFFF', X'00FF00FF00FF00FF00FF',
 'd,e', 'x,y,z', 1, 18446744073709551615, '{"a": [1, 2.5, "x"], "b": {"c": null}}', 'café €‚ŸŠ', 'naïve')`,
	`(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
	`(4, 1, 200, 2, 40000, 3, 9000000, 4, 3000000000, 5, 10000000000000000000,
 '0.0000000001', 1, 7.16350793838501, 0.1, '0000-00-00', '00:00:00.5', '00:00:00', '0000-00-00 00:00:00.000000', '2024-02-29 12:34:56', '0000-00-00 00:00:00', 0,
 'ab', '日本語テキスト😀', 'Ελληνικά', 'ü', X'0001020304', X'0102', X'', 'b''c', 'y', 0, 1, '"str"', 'déjà', '€')`,
	`(5, -1, 128, -1, 32768, -1, 8388608, -1, 2147483648, -1, 9223372036854775808,
 '-0.5', 12345, -0.0, 2.2250738585072014e-308, '2000-01-01', '-00:00:01.001', '-00:00:01', '2000-01-01 00:00:00.100000', '2000-01-01 00:00:00',
 '2000-06-15 12:00:00.123456', 2000, 'a ', 'trailing  ', 'x\n"q"\\', 'y', X'00', X'61', X'6100', 'a', 'x,z', 1, 9223372036854775808,
 '{}', 'x', 'y')`,
}

// encChange is one row change read from the binlog, encoded.
type encChange struct {
	op       string
	id       int64
	debezium Event
	canal    Event
}

// TestEncodeBinlogMatchesSnapshot writes rows of every column type, reads
// their changes from the binlog with go-mysql (as the stream reads them)
// and the rows with database/sql (as fill-history reads them), and checks
// that both encode to the same after image, column by column, and that
// every encoded value is what SELECT returns.
func TestEncodeBinlogMatchesSnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	env := newEncEnv(ctx, t, "types", encodeTypesDDL, false)
	root := env.root

	for _, row := range encodeTypesRows {
		encExec(t, root, "INSERT INTO app.types VALUES "+row)
	}
	inserted := env.snapshot(ctx, t)
	env.checkSelect(ctx, t, inserted)

	encExec(t, root,
		"UPDATE app.types SET tiu = 254, biu = 18446744073709551614, vc = CONCAT(vc, '-é'), ts = '2001-02-03 04:05:06.7', "+
			"e = 'a', s = 'x,y', b64 = 9223372036854775807 WHERE id IN (2, 4)",
		"UPDATE app.types SET id = 40 WHERE id = 4",
		"UPDATE app.types SET j = NULL, bl = NULL, e = NULL, lat = 'Ÿ' WHERE id = 5",
		"DELETE FROM app.types WHERE id = 1",
	)
	final := env.snapshot(ctx, t)
	env.checkSelect(ctx, t, final)

	// 5 inserts, 2 + 1 + 1 updated rows, 1 delete.
	changes := env.readBinlog(ctx, t, 10)
	last := map[int64]encChange{}
	for _, ch := range changes {
		switch ch.op {
		case "c":
			want, ok := inserted[ch.id]
			if !ok {
				t.Errorf("binlog insert of id %d, which the snapshot after the inserts does not have", ch.id)
				continue
			}
			encCompareAfter(t, fmt.Sprintf("insert of id %d", ch.id), ch, want)
			last[ch.id] = ch
		case "u":
			last[ch.id] = ch
		case "d":
			delete(last, ch.id)
		}
	}
	// An update moving id 4 to 40 leaves 4 behind in last.
	delete(last, 4)
	if len(last) != len(final) {
		t.Errorf("binlog leaves %d rows, the table has %d", len(last), len(final))
	}
	for id, want := range final {
		ch, ok := last[id]
		if !ok {
			t.Errorf("id %d is in the table but no binlog change leaves it", id)
			continue
		}
		encCompareAfter(t, fmt.Sprintf("last change of id %d", id), ch, want)
	}
}

// TestEncodeBinlogInetUUID does the same for MariaDB's INET4, INET6 and
// UUID (10.10 and newer), which the binlog carries in binary without
// trailing 0x00 bytes and SELECT prints as text.
func TestEncodeBinlogInetUUID(t *testing.T) {
	encInsertsMatch(t, "fbt", "CREATE TABLE app.fbt (id INT PRIMARY KEY, i4 INET4, i6 INET6, uu UUID)", true,
		"(1, '0.0.0.0', '::', '00000000-0000-0000-0000-000000000000')",
		"(2, '1.2.3.0', '2001:db8::', '123e4567-e89b-12d3-a456-426655440000')",
		"(3, '255.255.255.255', '::ffff:1.2.3.4', 'f81d4fae-7dec-41d0-a765-00a0c91e6bf6')",
		"(4, '10.0.0.1', '::1.2.3.4', 'ffffffff-ffff-ffff-ffff-ffffffffffff')",
		"(5, '127.0.0.1', '2001:db8:0:1:1:1:1:1', '01234567-89ab-cdef-0123-456789abcdef')",
		"(6, '192.168.0.1', '1:0:0:1:0:0:0:1', NULL)",
		"(7, NULL, 'fe80::1:2', '00000000-0000-0000-0000-000000000001')",
	)
}

// TestEncodeBinlogDisplayWidths does the same for ZEROFILL columns, which
// SELECT pads with zeros, BOOLEAN, and DOUBLE(M,D).
func TestEncodeBinlogDisplayWidths(t *testing.T) {
	encInsertsMatch(t, "widths", "CREATE TABLE app.widths (id INT PRIMARY KEY, iz INT(5) ZEROFILL, tz TINYINT(3) ZEROFILL, "+
		"bz BIGINT ZEROFILL, dz DECIMAL(6,2) ZEROFILL, fz FLOAT ZEROFILL, d2 DOUBLE(10,2), bo BOOLEAN)", false,
		"(1, 42, 7, 18446744073709551615, 1.5, 1.5, 1.005, TRUE)",
		"(2, 0, 0, 0, 0, 0, -1.005, FALSE)",
		"(3, 99999, 255, 1, 9999.99, 123456789, 99999999.99, NULL)",
	)
}

// encInsertsMatch creates app.<table> with ddl, inserts rows, and checks
// that the binlog's inserts and the snapshot read encode alike and as
// SELECT prints the values. skipOnError: see newEncEnv.
func encInsertsMatch(t *testing.T, table, ddl string, skipOnError bool, rows ...string) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	env := newEncEnv(ctx, t, table, ddl, skipOnError)
	for _, row := range rows {
		encExec(t, env.root, "INSERT INTO app."+table+" VALUES "+row)
	}
	snap := env.snapshot(ctx, t)
	env.checkSelect(ctx, t, snap)
	for _, ch := range env.readBinlog(ctx, t, len(rows)) {
		encCompareAfter(t, fmt.Sprintf("insert of id %d", ch.id), ch, snap[ch.id])
	}
}

// encEnv is a source with the binlog on, a root pool that reads text in
// UTC, one table of database app, and an encoder of each format.
type encEnv struct {
	src        *mariadbtest.Instance
	root       *sql.DB
	file       string // the binlog position after the table was created
	pos        uint32
	schema     *sqlschema.Table
	deb, canal *Encoder
}

// newEncEnv starts the source and creates app.<table> with ddl. When ddl
// fails the test fails, or is skipped with skipOnError (a type this
// MariaDB lacks).
func newEncEnv(ctx context.Context, t *testing.T, table, ddl string, skipOnError bool) *encEnv {
	t.Helper()
	encNoLeaks(t)
	env := &encEnv{src: mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true})}
	env.root = encSourceDB(t, env.src, mariadbtest.RootUser, "")
	encExec(t, env.root, "CREATE DATABASE app")
	if _, err := env.root.ExecContext(ctx, ddl); err != nil {
		if skipOnError {
			t.Skipf("this MariaDB cannot create app.%s: %v", table, err)
		}
		t.Fatalf("%s: %v", ddl, err)
	}
	env.file, env.pos, _ = env.src.MasterStatus(t)
	var err error
	if env.schema, err = NewSchemaCache(env.root).Table(ctx, "app", table); err != nil {
		t.Fatal(err)
	}
	env.deb, env.canal = encEncoder(t, FormatDebezium), encEncoder(t, FormatCanalJSON)
	return env
}

// snapshot reads the table as fill-history does (its SELECT list, RawBytes
// copied) and encodes each row as op "r", by id.
func (env *encEnv) snapshot(ctx context.Context, t *testing.T) map[int64]encChange {
	t.Helper()
	db, s, deb, canal := env.root, env.schema, env.deb, env.canal
	table := TableName{DB: s.Schema, Table: s.Name}
	names, types := selectedColumns(s)
	rows, err := db.QueryContext(ctx, "SELECT "+selectList(names, types)+" FROM "+table.quoted()+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	out := map[int64]encChange{}
	raw := make([]sql.RawBytes, len(s.Columns))
	dest := make([]any, len(raw))
	for i := range raw {
		dest[i] = &raw[i]
	}
	for n := 0; rows.Next(); n++ {
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		vals := make([]any, len(raw))
		for i, r := range raw {
			if r != nil {
				vals[i] = append([]byte{}, r...)
			}
		}
		id, err := strconv.ParseInt(string(raw[0]), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		pos := Position{File: "snapshot", Row: n, TsMs: 1, Snapshot: true}
		out[id] = encChange{op: "r", id: id, debezium: encRow(t, deb, s, "r", nil, vals, pos), canal: encRow(t, canal, s, "r", nil, vals, pos)}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func encRow(t *testing.T, e *Encoder, s *sqlschema.Table, op string, before, after []any, pos Position) Event {
	t.Helper()
	ev, err := e.Row(s, op, before, after, pos)
	if err != nil {
		t.Fatalf("%s Row(%s): %v", e.Format(), op, err)
	}
	if !json.Valid(ev.Value) || !json.Valid(ev.Key) {
		t.Fatalf("%s Row(%s): invalid JSON key %s value %s", e.Format(), op, ev.Key, ev.Value)
	}
	return ev
}

// readBinlog reads the table's row changes from env.file:pos with the
// decoder settings the stream uses until it has want rows.
func (env *encEnv) readBinlog(ctx context.Context, t *testing.T, want int) []encChange {
	t.Helper()
	src, file, pos, s, deb, canal := env.src, env.file, env.pos, env.schema, env.deb, env.canal
	syncer := src.BinlogSyncer(1<<30 + 77)
	defer syncer.Close()
	streamer, err := syncer.StartSync(gomysql.Position{Name: file, Pos: pos})
	if err != nil {
		t.Fatal(err)
	}
	var (
		out  []encChange
		gtid string
	)
	for len(out) < want {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			t.Fatalf("binlog after %d of %d row changes: %v", len(out), want, err)
		}
		switch e := ev.Event.(type) {
		case *replication.RotateEvent:
			file = string(e.NextLogName)
		case *replication.MariadbGTIDEvent:
			gtid = e.GTID.String()
		case *replication.RowsEvent:
			if string(e.Table.Schema) != s.Schema || string(e.Table.Table) != s.Name {
				continue
			}
			p := Position{File: file, Pos: ev.Header.LogPos - ev.Header.EventSize, GTID: gtid,
				ServerID: ev.Header.ServerID, TsMs: int64(ev.Header.Timestamp) * 1000}
			out = append(out, encRowsEvent(t, ev.Header.EventType, e, p, s, deb, canal)...)
		}
	}
	return out
}

func encRowsEvent(t *testing.T, typ replication.EventType, e *replication.RowsEvent, p Position, s *sqlschema.Table, deb, canal *Encoder) []encChange {
	t.Helper()
	var out []encChange
	add := func(op string, before, after []any) {
		img := after
		if op == "d" {
			img = before
		}
		out = append(out, encChange{op: op, id: int64(img[0].(int32)),
			debezium: encRow(t, deb, s, op, before, after, p), canal: encRow(t, canal, s, op, before, after, p)})
		p.Row++
	}
	switch typ {
	case replication.WRITE_ROWS_EVENTv0, replication.WRITE_ROWS_EVENTv1, replication.WRITE_ROWS_EVENTv2:
		for _, r := range e.Rows {
			add("c", nil, r)
		}
	case replication.UPDATE_ROWS_EVENTv0, replication.UPDATE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv2:
		for i := 0; i+1 < len(e.Rows); i += 2 {
			add("u", e.Rows[i], e.Rows[i+1])
		}
	case replication.DELETE_ROWS_EVENTv0, replication.DELETE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv2:
		for _, r := range e.Rows {
			add("d", r, nil)
		}
	default:
		t.Fatalf("rows event of type %s", typ)
	}
	return out
}

// encDebeziumAfter returns the after image of a debezium value, whole and by
// column.
func encDebeziumAfter(t *testing.T, ev Event) (json.RawMessage, map[string]json.RawMessage) {
	t.Helper()
	var v struct{ After json.RawMessage }
	if err := json.Unmarshal(ev.Value, &v); err != nil {
		t.Fatal(err)
	}
	cols := map[string]json.RawMessage{}
	if err := json.Unmarshal(v.After, &cols); err != nil {
		t.Fatal(err)
	}
	return v.After, cols
}

// encCanalData returns data[0] of a canal-json value.
func encCanalData(t *testing.T, ev Event) map[string]*string {
	t.Helper()
	var v struct{ Data []map[string]*string }
	if err := json.Unmarshal(ev.Value, &v); err != nil || len(v.Data) != 1 {
		t.Fatalf("canal value %s: %v", ev.Value, err)
	}
	return v.Data[0]
}

// encCompareAfter checks that the binlog change's after image equals the
// snapshot row's, in both formats, and that their keys are equal.
func encCompareAfter(t *testing.T, what string, got, want encChange) {
	t.Helper()
	gotAfter, gotCols := encDebeziumAfter(t, got.debezium)
	wantAfter, wantCols := encDebeziumAfter(t, want.debezium)
	if !bytes.Equal(gotAfter, wantAfter) {
		for name, w := range wantCols {
			if g := gotCols[name]; !bytes.Equal(g, w) {
				t.Errorf("%s: column %s: binlog %s, snapshot %s", what, name, encTruncate(g), encTruncate(w))
			}
		}
		if len(gotCols) != len(wantCols) {
			t.Errorf("%s: binlog after has %d columns, snapshot %d", what, len(gotCols), len(wantCols))
		}
	}
	if !bytes.Equal(got.debezium.Key, want.debezium.Key) || !bytes.Equal(got.canal.Key, want.canal.Key) {
		t.Errorf("%s: binlog key %s, snapshot key %s", what, got.debezium.Key, want.debezium.Key)
	}
	gotData, wantData := encCanalData(t, got.canal), encCanalData(t, want.canal)
	for name, w := range wantData {
		g := gotData[name]
		if (g == nil) != (w == nil) || g != nil && *g != *w {
			t.Errorf("%s: canal-json column %s: binlog %s, snapshot %s", what, name, encShow(g), encShow(w))
		}
	}
}

func encShow(s *string) string {
	if s == nil {
		return "null"
	}
	return encTruncate([]byte(strconv.Quote(*s)))
}

func encTruncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + fmt.Sprintf("…(%d bytes)", len(b))
	}
	return string(b)
}

// encBinaryType says a column's values are encoded as base64.
func encBinaryType(dataType string) bool {
	switch dataType {
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return true
	}
	return false
}

// checkSelect compares every encoded value of rows with what SELECT
// returns: CAST(col AS CHAR), HEX(col) for binary columns, col+0 for BIT,
// and for FLOAT CAST(col AS DOUBLE), which holds every bit of the float
// (SELECT prints a FLOAT with 6 significant digits).
func (env *encEnv) checkSelect(ctx context.Context, t *testing.T, rows map[int64]encChange) {
	t.Helper()
	db, s := env.root, env.schema
	exprs := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		switch {
		case encBinaryType(c.DataType):
			exprs[i] = "HEX(`" + c.Name + "`)"
		case c.DataType == "bit":
			exprs[i] = "CAST(`" + c.Name + "` + 0 AS CHAR)"
		case c.DataType == "float":
			exprs[i] = "CAST(`" + c.Name + "` AS DOUBLE)"
		default:
			exprs[i] = "CAST(`" + c.Name + "` AS CHAR)"
		}
	}
	query := "SELECT " + strings.Join(exprs, ", ") + " FROM " + s.String() + " WHERE id = ?"
	for id, row := range rows {
		texts := make([]sql.NullString, len(s.Columns))
		dest := make([]any, len(texts))
		for i := range texts {
			dest[i] = &texts[i]
		}
		if err := db.QueryRowContext(ctx, query, id).Scan(dest...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		_, cols := encDebeziumAfter(t, row.debezium)
		for i, c := range s.Columns {
			if err := encSameAsSelect(&c, cols[c.Name], texts[i]); err != nil {
				t.Errorf("id %d column %s (%s): %v", id, c.Name, c.ColumnType, err)
			}
		}
	}
}

// encSameAsSelect compares one encoded value with SELECT's text of it.
func encSameAsSelect(c *sqlschema.Column, raw json.RawMessage, text sql.NullString) error {
	if string(raw) == "null" || !text.Valid {
		if string(raw) != "null" || text.Valid {
			return fmt.Errorf("encoded %s, SELECT %q (valid %v)", encTruncate(raw), text.String, text.Valid)
		}
		return nil
	}
	var str string
	isString := json.Unmarshal(raw, &str) == nil
	switch {
	case c.DataType == "float" || c.DataType == "double":
		bits := 64
		if c.DataType == "float" {
			bits = 32
		}
		got, err1 := strconv.ParseFloat(string(raw), bits)
		want, err2 := strconv.ParseFloat(text.String, bits)
		if err1 != nil || err2 != nil || got != want {
			return fmt.Errorf("encoded %s, SELECT %s", raw, text.String)
		}
	case encBinaryType(c.DataType):
		b, err := base64.StdEncoding.DecodeString(str)
		if !isString || err != nil || !strings.EqualFold(hex.EncodeToString(b), text.String) {
			return fmt.Errorf("encoded %s, SELECT HEX %s", encTruncate(raw), encTruncate([]byte(text.String)))
		}
	case c.DataType == "decimal":
		got, err1 := decimal.NewFromString(str)
		want, err2 := decimal.NewFromString(text.String)
		if !isString || err1 != nil || err2 != nil || !got.Equal(want) {
			return fmt.Errorf("encoded %s, SELECT %s", raw, text.String)
		}
	case !isString: // integer types, YEAR, BIT
		got, ok1 := new(big.Int).SetString(string(raw), 10)
		want, ok2 := new(big.Int).SetString(text.String, 10)
		if !ok1 || !ok2 || got.Cmp(want) != 0 {
			return fmt.Errorf("encoded %s, SELECT %s", raw, text.String)
		}
	case str != text.String:
		return fmt.Errorf("encoded %s, SELECT %s", encTruncate(raw), encTruncate([]byte(strconv.Quote(text.String))))
	}
	return nil
}
