package sqlschema

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// readTestTables are the tables every read test reads: keys of each kind
// (PRIMARY; unique keys of NOT NULL and of nullable columns defined in an
// order that neither the server's key order nor the names' order follow;
// no usable key), generated and invisible columns, types whose COLUMN_TYPE
// carries members, scale or length, and names that need quoting.
var readTestTables = []string{
	"CREATE DATABASE app",
	"CREATE DATABASE other",
	"CREATE TABLE app.pk (a INT, b INT, c VARCHAR(5), PRIMARY KEY (b, a))",
	// Defined: a_null (nullable), b_plain, z_ok (NOT NULL, columns c, b),
	// m_ok (NOT NULL). The server keeps NOT NULL unique keys first, in
	// definition order: z_ok, m_ok, a_null, b_plain. Ordered by name,
	// the first NOT NULL unique key would be m_ok.
	"CREATE TABLE app.uk (a INT NULL, b INT NOT NULL, c INT NOT NULL, d INT NOT NULL, e INT NOT NULL, " +
		"UNIQUE KEY a_null (a), KEY b_plain (d), UNIQUE KEY z_ok (c, b), UNIQUE KEY m_ok (e))",
	"CREATE TABLE app.nokey (a INT, b TEXT, KEY k (a))",
	"CREATE TABLE app.nullonly (a INT NULL, b INT, UNIQUE KEY u (a))",
	"CREATE TABLE app.gen (id INT PRIMARY KEY, v INT AS (id * 2) VIRTUAL, s INT AS (id + 1) STORED, " +
		"h INT INVISIBLE, x INT)",
	`CREATE TABLE app.types (e ENUM('a','b''c','d,e','x\\y') NOT NULL, s SET('x','y z','日本') NULL, ` +
		`dt DATETIME(6), de DECIMAL(12,3) UNSIGNED, bn BINARY(4), lat VARCHAR(3) CHARACTER SET latin1, ` +
		`bl BLOB, vb VARBINARY(8))`,
	"CREATE TABLE other.t (a INT PRIMARY KEY)",
	"CREATE TABLE app.defaults (id INT NOT NULL, n INT NULL, dn INT DEFAULT NULL, five INT NOT NULL DEFAULT 5, " +
		"s VARCHAR(5) DEFAULT 'it''s', ts TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)",
	"CREATE DATABASE " + QuoteName("we`ird"),
	"CREATE TABLE " + QuoteTable("we`ird", "ta`ble") + " (" + QuoteName("x`y") + " INT PRIMARY KEY, " +
		QuoteName("the value") + " INT)",
}

// startReadTest starts a MariaDB with readTestTables and returns a pool
// on it.
func startReadTest(t *testing.T) (context.Context, *sql.DB) {
	t.Helper()
	i := mariadbtest.Start(t, mariadbtest.Options{Name: "sqlschema", FastCommit: true})
	db := i.DB(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	for _, q := range readTestTables {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return ctx, db
}

// TestRead reads the models of readTestTables from a real MariaDB.
func TestRead(t *testing.T) {
	ctx, db := startReadTest(t)
	read := func(t *testing.T, schema, table string) *Table {
		t.Helper()
		tb, err := ReadTable(ctx, db, schema, table)
		if err != nil {
			t.Fatalf("ReadTable(%s.%s): %v", schema, table, err)
		}
		return tb
	}

	t.Run("RowKey", func(t *testing.T) {
		cases := []struct {
			table    string
			key      []string
			rowKey   []int
			index    string
			reason   KeyReason
			hasPK    bool
			keyed    bool
			nColumns int
		}{
			{"pk", []string{"b", "a"}, []int{1, 0}, "PRIMARY", KeyPrimary, true, true, 3},
			// Server key order, not name order (m_ok) nor definition
			// order (a_null, nullable): z_ok.
			{"uk", []string{"c", "b"}, []int{2, 1}, "z_ok", KeyUnique, false, true, 5},
			{"nokey", []string{"a", "b"}, []int{0, 1}, "", KeyNone, false, false, 2},
			{"nullonly", []string{"a", "b"}, []int{0, 1}, "", KeyNone, false, false, 2},
		}
		for _, c := range cases {
			tb := read(t, "app", c.table)
			if got := tb.KeyColumns(); !reflect.DeepEqual(got, c.key) || !reflect.DeepEqual(tb.RowKey, c.rowKey) ||
				tb.RowKeyIndex != c.index || tb.KeyReason != c.reason || tb.HasPK() != c.hasPK || tb.Keyed() != c.keyed {
				t.Errorf("app.%s: key %q RowKey %v index %q reason %v HasPK %v Keyed %v; want %q %v %q %v %v %v",
					c.table, got, tb.RowKey, tb.RowKeyIndex, tb.KeyReason, tb.HasPK(), tb.Keyed(),
					c.key, c.rowKey, c.index, c.reason, c.hasPK, c.keyed)
			}
			if len(tb.Columns) != c.nColumns || tb.Schema != "app" || tb.Name != c.table || tb.String() != "app."+c.table {
				t.Errorf("app.%s read as %s with %d columns, want %d", c.table, tb, len(tb.Columns), c.nColumns)
			}
		}
	})

	t.Run("IndexOrder", func(t *testing.T) {
		want := []Index{
			{Name: "z_ok", Columns: []string{"c", "b"}, Unique: true, Type: "BTREE"},
			{Name: "m_ok", Columns: []string{"e"}, Unique: true, Type: "BTREE"},
			{Name: "a_null", Columns: []string{"a"}, Unique: true, Nullable: true, Type: "BTREE"},
			{Name: "b_plain", Columns: []string{"d"}, Type: "BTREE"},
		}
		uk := read(t, "app", "uk")
		if !reflect.DeepEqual(uk.Indexes, want) {
			t.Errorf("app.uk indexes\n got %+v\nwant %+v (the server's key order)", uk.Indexes, want)
		}
		if got := uk.UniqueKeys(); !reflect.DeepEqual(got, want[:3]) {
			t.Errorf("app.uk UniqueKeys\n got %+v\nwant %+v", got, want[:3])
		}
		pk := read(t, "app", "pk")
		if want := []Index{{Name: "PRIMARY", Columns: []string{"b", "a"}, Primary: true, Unique: true, Type: "BTREE"}}; !reflect.DeepEqual(pk.Indexes, want) {
			t.Errorf("app.pk indexes %+v, want %+v", pk.Indexes, want)
		}
	})

	t.Run("Generated", func(t *testing.T) {
		gen := read(t, "app", "gen")
		type flags struct {
			name                 string
			generated, invisible bool
		}
		var got []flags
		for _, c := range gen.Columns {
			got = append(got, flags{c.Name, c.Generated, c.Invisible})
		}
		want := []flags{{"id", false, false}, {"v", true, false}, {"s", true, false}, {"h", false, true}, {"x", false, false}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("app.gen columns %+v, want %+v", got, want)
		}
		if gen.ColumnIndex("H") != 3 || gen.ColumnIndex("nope") != -1 {
			t.Errorf("ColumnIndex(H) = %d, ColumnIndex(nope) = %d; want 3, -1", gen.ColumnIndex("H"), gen.ColumnIndex("nope"))
		}
	})

	t.Run("Types", func(t *testing.T) {
		types := read(t, "app", "types")
		want := []Column{
			{Name: "e", Ordinal: 1, DataType: "enum", ColumnType: `enum('a','b''c','d,e','x\\y')`,
				Elems: []string{"a", "b'c", "d,e", `x\y`}, Charset: "utf8mb4", Collation: "utf8mb4_general_ci"},
			{Name: "s", Ordinal: 2, DataType: "set", ColumnType: "set('x','y z','日本')",
				Elems: []string{"x", "y z", "日本"}, Nullable: true, Charset: "utf8mb4", Collation: "utf8mb4_general_ci", HasDefault: true, Default: "NULL"},
			{Name: "dt", Ordinal: 3, DataType: "datetime", ColumnType: "datetime(6)", Nullable: true, Scale: 6, HasDefault: true, Default: "NULL"},
			{Name: "de", Ordinal: 4, DataType: "decimal", ColumnType: "decimal(12,3) unsigned", Unsigned: true, Nullable: true, Scale: 3, HasDefault: true, Default: "NULL"},
			{Name: "bn", Ordinal: 5, DataType: "binary", ColumnType: "binary(4)", Nullable: true, Length: 4, HasDefault: true, Default: "NULL"},
			{Name: "lat", Ordinal: 6, DataType: "varchar", ColumnType: "varchar(3)", Nullable: true, Charset: "latin1", Collation: "latin1_swedish_ci", HasDefault: true, Default: "NULL"},
			{Name: "bl", Ordinal: 7, DataType: "blob", ColumnType: "blob", Nullable: true, HasDefault: true, Default: "NULL"},
			{Name: "vb", Ordinal: 8, DataType: "varbinary", ColumnType: "varbinary(8)", Nullable: true, HasDefault: true, Default: "NULL"},
		}
		if !reflect.DeepEqual(types.Columns, want) {
			t.Errorf("app.types columns\n got %+v\nwant %+v", types.Columns, want)
		}
		var binary []string
		for _, c := range types.Columns {
			if c.Binary() {
				binary = append(binary, c.Name)
			}
		}
		if want := []string{"bn", "bl", "vb"}; !reflect.DeepEqual(binary, want) {
			t.Errorf("binary columns %q, want %q", binary, want)
		}
	})

	t.Run("Defaults", func(t *testing.T) {
		tb := read(t, "app", "defaults")
		type def struct {
			name string
			has  bool
			expr string
		}
		var got []def
		for _, c := range tb.Columns {
			got = append(got, def{c.Name, c.HasDefault, c.Default})
		}
		want := []def{{"id", false, ""}, {"n", true, "NULL"}, {"dn", true, "NULL"}, {"five", true, "5"},
			{"s", true, "'it''s'"}, {"ts", true, "current_timestamp()"}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("app.defaults defaults %+v, want %+v", got, want)
		}
	})

	t.Run("QuotedNames", func(t *testing.T) {
		tb := read(t, "we`ird", "ta`ble")
		if got := tb.KeyColumns(); !reflect.DeepEqual(got, []string{"x`y"}) || !tb.HasPK() {
			t.Errorf("we`ird.ta`ble key %q HasPK %v, want [x`y] true", got, tb.HasPK())
		}
		quoted := QuoteTable(tb.Schema, tb.Name)
		if want := "`we``ird`.`ta``ble`"; quoted != want {
			t.Errorf("QuoteTable = %s, want %s", quoted, want)
		}
		q := "INSERT INTO " + quoted + " (" + QuoteName(tb.Columns[0].Name) + ", " + QuoteName(tb.Columns[1].Name) + ") VALUES (1, 2)"
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		got, err := QueryStrings(ctx, db, "SELECT "+QuoteName("the value")+" FROM "+quoted+" WHERE "+QuoteName("x`y")+" = ?", 1)
		if err != nil || !reflect.DeepEqual(got, []string{"2"}) {
			t.Errorf("read back through the quoted names: %q, %v; want [2]", got, err)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		for _, name := range []TableName{{"app", "missing"}, {"nosuch", "t"}} {
			_, err := ReadTable(ctx, db, name.Schema, name.Name)
			if !errors.Is(err, ErrTableNotFound) || !strings.Contains(err.Error(), name.Schema+"."+name.Name) {
				t.Errorf("ReadTable(%s.%s) error = %v, want ErrTableNotFound naming the table", name.Schema, name.Name, err)
			}
		}
	})

	t.Run("Schemas", func(t *testing.T) {
		tables, err := ReadSchemas(ctx, db, "other", "app")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tb := range tables {
			names = append(names, tb.String())
			if one := read(t, tb.Schema, tb.Name); !reflect.DeepEqual(one, tb) {
				t.Errorf("ReadSchemas' %s\n %+v\ndiffers from ReadTable's\n %+v", tb, tb, one)
			}
		}
		want := []string{"app.defaults", "app.gen", "app.nokey", "app.nullonly", "app.pk", "app.types", "app.uk", "other.t"}
		if !reflect.DeepEqual(names, want) {
			t.Errorf("ReadSchemas(other, app) = %q, want %q", names, want)
		}

		all, err := ReadSchemas(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, tb := range all {
			seen[tb.String()] = true
			if IsSystemSchema(tb.Schema) {
				t.Errorf("ReadSchemas() read system table %s", tb)
			}
		}
		for _, n := range append(want, "we`ird.ta`ble") {
			if !seen[n] {
				t.Errorf("ReadSchemas() left out %s", n)
			}
		}

		if none, err := ReadSchemas(ctx, db, "nosuch"); err != nil || len(none) != 0 {
			t.Errorf("ReadSchemas(nosuch) = %v, %v; want none", none, err)
		}
	})

	t.Run("Conn", func(t *testing.T) {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		tb, err := ReadTable(ctx, conn, "other", "t")
		if err != nil || !tb.HasPK() {
			t.Errorf("ReadTable through a *sql.Conn = %+v, %v", tb, err)
		}
	})

	t.Run("Rows", func(t *testing.T) {
		got, err := QueryStrings(ctx, db, "SELECT NULL UNION ALL SELECT 'x'")
		if err != nil || !reflect.DeepEqual(got, []string{"", "x"}) {
			t.Errorf("QueryStrings = %q, %v; want [\"\" x]", got, err)
		}
		stop := errors.New("stop")
		n := 0
		err = ScanAll(ctx, db, "SELECT 1 UNION ALL SELECT 2", nil, func(*sql.Rows) error { n++; return stop })
		if !errors.Is(err, stop) || n != 1 {
			t.Errorf("ScanAll with a failing each: %v after %d rows, want stop after 1", err, n)
		}
		if _, err := QueryStrings(ctx, db, "SELECT * FROM app.missing"); err == nil {
			t.Error("QueryStrings of a missing table: no error")
		}
	})
}
