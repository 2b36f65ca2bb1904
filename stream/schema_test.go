package stream

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// testSourceDB opens a pool on instance i as user that reads every value
// as text (parseTime off) in UTC over utf8mb4, as the stream's snapshot
// reads do.
func encSourceDB(t *testing.T, i *mariadbtest.Instance, user, password string) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(i.UserDSN(user, password, ""))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ParseTime = false
	cfg.Params = map[string]string{"time_zone": "'+00:00'", "sql_mode": "'NO_ENGINE_SUBSTITUTION'"}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("open a pool on %s as %s: %v", i.Name(), user, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// encNoLeaks checks, after every other cleanup of t, that t left no
// goroutine behind (pools closing their connection opener may take a
// moment, which goleak waits for).
func encNoLeaks(t *testing.T) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
}

func encExec(t *testing.T, db *sql.DB, queries ...string) {
	t.Helper()
	for _, q := range queries {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestSchemaCache reads tables from a real MariaDB as the source user:
// the key choice (PRIMARY KEY in key order, first UNIQUE key of NOT NULL
// columns, all columns), members of ENUM / SET with quotes and commas, a
// missing table, and invalidation after DDL.
func TestSchemaCache(t *testing.T) {
	encNoLeaks(t)
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", FastCommit: true})
	root := encSourceDB(t, src, mariadbtest.RootUser, "")
	encExec(t, root,
		"CREATE DATABASE app",
		"CREATE DATABASE other",
		"CREATE TABLE app.pk (a INT, b INT, c VARCHAR(5), PRIMARY KEY (b, a))",
		"CREATE TABLE app.uk (a INT NULL, b INT NOT NULL, c INT NOT NULL, d INT NOT NULL, "+
			"UNIQUE KEY u_null (a), KEY plain (d), UNIQUE KEY u_ok (c, b))",
		"CREATE TABLE app.nokey (a INT, b TEXT, KEY k (a))",
		`CREATE TABLE app.types (e ENUM('a','b''c','d,e','x\\y') NOT NULL, s SET('x','y z','日本') NULL, `+
			`dt DATETIME(6), de DECIMAL(12,3) UNSIGNED, bn BINARY(4), lat VARCHAR(3) CHARACTER SET latin1)`,
		"CREATE TABLE other.t (a INT PRIMARY KEY)",
	)
	cache := NewSchemaCache(encSourceDB(t, src, mariadbtest.SourceUser, mariadbtest.SourcePassword))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	table := func(db, name string) *sqlschema.Table {
		t.Helper()
		s, err := cache.Table(ctx, db, name)
		if err != nil {
			t.Fatalf("Table(%s.%s): %v", db, name, err)
		}
		return s
	}

	keys := []struct {
		table   string
		key     []string
		hasPK   bool
		keyName string
	}{
		{"pk", []string{"b", "a"}, true, "PRIMARY"},
		{"uk", []string{"c", "b"}, false, "u_ok"},
		{"nokey", []string{"a", "b"}, false, ""},
	}
	for _, k := range keys {
		s := table("app", k.table)
		if got := s.KeyColumns(); !reflect.DeepEqual(got, k.key) || s.HasPK() != k.hasPK || s.RowKeyIndex != k.keyName {
			t.Errorf("app.%s key %q HasPK %v KeyName %q; want %q %v %q", k.table, got, s.HasPK(), s.RowKeyIndex, k.key, k.hasPK, k.keyName)
		}
	}

	types := table("app", "types")
	want := []sqlschema.Column{
		{Name: "e", Ordinal: 1, DataType: "enum", ColumnType: `enum('a','b''c','d,e','x\\y')`, Elems: []string{"a", "b'c", "d,e", `x\y`}, Charset: "utf8mb4"},
		{Name: "s", Ordinal: 2, DataType: "set", ColumnType: "set('x','y z','日本')", Elems: []string{"x", "y z", "日本"}, Nullable: true, Charset: "utf8mb4", HasDefault: true, Default: "NULL"},
		{Name: "dt", Ordinal: 3, DataType: "datetime", ColumnType: "datetime(6)", Nullable: true, Scale: 6, HasDefault: true, Default: "NULL"},
		{Name: "de", Ordinal: 4, DataType: "decimal", ColumnType: "decimal(12,3) unsigned", Unsigned: true, Nullable: true, Scale: 3, HasDefault: true, Default: "NULL"},
		{Name: "bn", Ordinal: 5, DataType: "binary", ColumnType: "binary(4)", Nullable: true, Length: 4, HasDefault: true, Default: "NULL"},
		{Name: "lat", Ordinal: 6, DataType: "varchar", ColumnType: "varchar(3)", Nullable: true, Charset: "latin1", HasDefault: true, Default: "NULL"},
	}
	// Collation is the server's default for the charset (version
	// dependent): present exactly for the text columns, compared apart.
	got := slices.Clone(types.Columns)
	for i := range got {
		if (got[i].Collation != "") != (got[i].Charset != "") || !strings.HasPrefix(got[i].Collation, got[i].Charset) {
			t.Errorf("app.types column %s: charset %q, collation %q", got[i].Name, got[i].Charset, got[i].Collation)
		}
		got[i].Collation = ""
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("app.types columns\n got %+v\nwant %+v", got, want)
	}

	_, err := cache.Table(ctx, "app", "missing")
	if !errors.Is(err, ErrTableNotFound) || !strings.Contains(err.Error(), "app.missing") {
		t.Errorf("Table(app.missing) error = %v, want ErrTableNotFound naming app.missing", err)
	}

	// Cached until invalidated.
	pk, nokey, other := table("app", "pk"), table("app", "nokey"), table("other", "t")
	encExec(t, root, "ALTER TABLE app.pk ADD COLUMN d INT", "ALTER TABLE app.nokey ADD COLUMN c INT", "ALTER TABLE other.t ADD COLUMN b INT")
	if s := table("app", "pk"); s != pk || len(s.Columns) != 3 {
		t.Errorf("app.pk re-read before Invalidate: %d columns", len(s.Columns))
	}
	cache.Invalidate("app", "pk")
	if s := table("app", "pk"); len(s.Columns) != 4 {
		t.Errorf("app.pk after Invalidate has %d columns, want 4", len(s.Columns))
	}
	if s := table("app", "nokey"); s != nokey {
		t.Error("Invalidate(app, pk) dropped app.nokey too")
	}
	cache.Invalidate("app", "")
	if s := table("app", "nokey"); len(s.Columns) != 3 || !reflect.DeepEqual(s.KeyColumns(), []string{"a", "b", "c"}) {
		t.Errorf("app.nokey after Invalidate(app, \"\") has columns %d key %q, want 3 and all columns", len(s.Columns), s.KeyColumns())
	}
	if s := table("other", "t"); s != other {
		t.Error(`Invalidate(app, "") dropped other.t`)
	}

	// Readers and invalidations at once (for -race); every read is whole.
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				if g%2 == 0 {
					cache.Invalidate("app", "pk")
					continue
				}
				s, err := cache.Table(ctx, "app", "pk")
				if err != nil || len(s.Columns) != 4 || !s.HasPK() {
					t.Errorf("concurrent Table(app.pk) = %+v, %v", s, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
