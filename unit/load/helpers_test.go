package load

import (
	"context"
	"database/sql"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/dumpfile"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// env is a source and a target MariaDB with plain (text, UTC) pools.
type env struct {
	src, dst     *mariadbtest.Instance
	srcDB, dstDB *sql.DB
}

func newEnv(t *testing.T, durableTarget bool) *env {
	t.Helper()
	e := &env{
		src: mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true}),
		dst: mariadbtest.Start(t, mariadbtest.Options{Name: "target", FastCommit: !durableTarget}),
	}
	e.srcDB, e.dstDB = e.src.PlainDB(t), e.dst.PlainDB(t)
	return e
}

func queryInt(t testing.TB, db *sql.DB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// configs returns a subtask of mode loading into the target and its source.
func (e *env) configs(name, mode string, poolSize int) (*config.SubTaskConfig, *config.SourceConfig) {
	cfg := &config.SubTaskConfig{
		Name: name, SourceID: "mysql-01", TaskMode: mode,
		TargetDatabase: config.DBConfig{Host: e.dst.Host(), Port: e.dst.Port(), User: mariadbtest.RootUser},
		MetaSchema:     "dm_meta",
		Loader:         config.LoaderConfig{PoolSize: poolSize},
	}
	src := &config.SourceConfig{SourceID: "mysql-01", From: config.DBConfig{
		Host: e.src.Host(), Port: e.src.Port(), User: mariadbtest.SourceUser, Password: mariadbtest.SourcePassword}}
	return cfg, src
}

// newLoader creates and initialises a load unit; it is killed in Cleanup
// unless the test closed it (Kill twice is harmless).
func newLoader(t *testing.T, cfg *config.SubTaskConfig, src *config.SourceConfig, dir string, m *Metrics) *Loader {
	t.Helper()
	l, err := New(cfg, src, dir, m, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Kill)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.Init(ctx); err != nil {
		t.Fatal(err)
	}
	return l
}

// dumpTables writes a dump of tables (source schema.table) into dir the
// way the dump unit does: SET NAMES binary, UTC, FLOAT as DOUBLE, BIT as
// unsigned integers, chunks of rowsPerChunk rows in key order.
func (e *env) dumpTables(t testing.TB, dir, task, dumpID string, rowsPerChunk int, tables ...filter.TableName) *dumpfile.Manifest {
	t.Helper()
	ctx := context.Background()
	conn, err := e.srcDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET NAMES binary"); err != nil {
		t.Fatal(err)
	}
	file, pos, gtid := e.src.MasterStatus(t)
	m := &dumpfile.Manifest{DumpID: dumpID, Task: task, Source: "mysql-01", Method: dumpfile.MethodFlushLock,
		Start: binlog.Location{Name: file, Pos: pos, GTID: gtid}, StartedAt: time.Now()}
	schemas := map[string]bool{}
	for i, tn := range tables {
		if !schemas[tn.Schema] {
			schemas[tn.Schema] = true
			var n, create string
			if err := conn.QueryRowContext(ctx, "SHOW CREATE DATABASE "+sqlschema.QuoteName(tn.Schema)).Scan(&n, &create); err != nil {
				t.Fatal(err)
			}
			m.Schemas = append(m.Schemas, dumpfile.Schema{Name: tn.Schema, CreateSQL: create})
		}
		m.Tables = append(m.Tables, dumpTable(t, conn, dir, i, rowsPerChunk, tn))
	}
	file, pos, gtid = e.src.MasterStatus(t)
	m.End = binlog.Location{Name: file, Pos: pos, GTID: gtid}
	m.FinishedAt = time.Now()
	if err := dumpfile.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func dumpTable(t testing.TB, conn *sql.Conn, dir string, idx, rowsPerChunk int, tn filter.TableName) dumpfile.Table {
	t.Helper()
	ctx := context.Background()
	tb := dumpfile.Table{Schema: tn.Schema, Name: tn.Table}
	var n string
	if err := conn.QueryRowContext(ctx, "SHOW CREATE TABLE "+tn.String()).Scan(&n, &tb.CreateSQL); err != nil {
		t.Fatal(err)
	}
	model, err := sqlschema.ReadTable(ctx, conn, tn.Schema, tn.Table)
	if err != nil {
		t.Fatal(err)
	}
	inKey := map[int]bool{}
	if model.Keyed() { // what information_schema marks PRI
		for _, k := range model.RowKey {
			inKey[k] = true
		}
	}
	var sel []string
	for i, col := range model.Columns {
		if col.Generated {
			continue
		}
		c := dumpfile.Column{Name: col.Name, Type: col.ColumnType}
		expr := sqlschema.QuoteName(c.Name)
		switch col.DataType {
		case "float":
			expr = "CAST(" + expr + " AS DOUBLE)"
		case "bit":
			expr, c.Load = "CAST("+expr+" AS UNSIGNED)", dumpfile.LoadBit
		}
		if inKey[i] {
			tb.KeyColumns = append(tb.KeyColumns, c.Name)
		}
		tb.Columns = append(tb.Columns, c)
		sel = append(sel, expr)
	}
	q := "SELECT " + strings.Join(sel, ", ") + " FROM " + tn.String()
	if len(tb.KeyColumns) > 0 {
		keys := make([]string, len(tb.KeyColumns))
		for i, k := range tb.KeyColumns {
			keys[i] = sqlschema.QuoteName(k)
		}
		q += " ORDER BY " + strings.Join(keys, ", ")
	}
	writeChunks(t, conn, dir, idx, rowsPerChunk, q, len(sel), &tb)
	return tb
}

// writeChunks runs q and writes its rows (n columns) as chunk files of
// rowsPerChunk rows (an empty table gets one empty chunk).
func writeChunks(t testing.TB, conn *sql.Conn, dir string, idx, rowsPerChunk int, q string, n int, tb *dumpfile.Table) {
	t.Helper()
	data, err := conn.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	vals := make([]sql.RawBytes, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var buf []byte
	var inChunk int64
	flush := func() {
		name := dumpfile.ChunkFile(idx, len(tb.Chunks))
		if err := dumpfile.WriteFileAtomic(dir, name, buf); err != nil {
			t.Fatal(err)
		}
		tb.Chunks = append(tb.Chunks, dumpfile.Chunk{File: name, Rows: inChunk, Bytes: int64(len(buf))})
		buf, inChunk = buf[:0], 0
	}
	for data.Next() {
		if err := data.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if i > 0 {
				buf = append(buf, '\t')
			}
			if v == nil {
				buf = append(buf, dumpfile.Null...)
			} else {
				buf = dumpfile.AppendField(buf, v)
			}
		}
		buf = append(buf, '\n')
		if inChunk++; rowsPerChunk > 0 && inChunk == int64(rowsPerChunk) {
			flush()
		}
	}
	if err := data.Err(); err != nil {
		t.Fatal(err)
	}
	if inChunk > 0 || len(tb.Chunks) == 0 {
		flush()
	}
}

// tableRows reads a whole table as text rows, sorted.
func tableRows(t testing.TB, db *sql.DB, table string) []string {
	t.Helper()
	out, err := mariadbtest.QueryRows(context.Background(), db, "SELECT * FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func checksum(t testing.TB, db *sql.DB, table string) string {
	t.Helper()
	var name string
	var sum sql.NullString
	if err := db.QueryRowContext(context.Background(), "CHECKSUM TABLE "+table).Scan(&name, &sum); err != nil {
		t.Fatal(err)
	}
	if !sum.Valid {
		t.Fatalf("CHECKSUM TABLE %s: the table does not exist", table)
	}
	return sum.String
}

// requireEqual fails unless the target table holds exactly the rows of the
// source tables (one source table: also the same CHECKSUM TABLE).
func (e *env) requireEqual(t *testing.T, dstTable string, srcTables ...string) {
	t.Helper()
	var want []string
	for _, s := range srcTables {
		want = append(want, tableRows(t, e.srcDB, s)...)
	}
	slices.Sort(want)
	got := tableRows(t, e.dstDB, dstTable)
	if !slices.Equal(want, got) {
		for i := 0; i < len(want) && i < len(got); i++ {
			if want[i] != got[i] {
				t.Fatalf("%s: %d rows, want %d (from %v); first difference:\n source %s\n target %s", dstTable, len(got), len(want), srcTables, want[i], got[i])
			}
		}
		t.Fatalf("%s: %d rows, want %d (from %v)", dstTable, len(got), len(want), srcTables)
	}
	if len(srcTables) == 1 {
		if a, b := checksum(t, e.srcDB, srcTables[0]), checksum(t, e.dstDB, dstTable); a != b {
			t.Fatalf("CHECKSUM TABLE %s = %s on the source, %s = %s on the target", srcTables[0], a, dstTable, b)
		}
	}
}

// process runs Process to its end.
func process(t *testing.T, l *Loader) unit.Result {
	t.Helper()
	return unittest.Start(l, false, 0).Wait(t, 5*time.Minute)
}

// requireOK fails when res has errors or was cancelled.
func requireOK(t *testing.T, res unit.Result) {
	t.Helper()
	if res.IsCanceled || len(res.Errors) > 0 {
		t.Fatalf("load ended with %+v", res)
	}
}

// requireError fails unless res holds one non-resumable error of code whose
// message contains every one of parts.
func requireError(t *testing.T, res unit.Result, code string, parts ...string) {
	t.Helper()
	if len(res.Errors) != 1 {
		t.Fatalf("want one %s error, got %+v", code, res)
	}
	e := res.Errors[0]
	if e.Code != code || e.Resumable {
		t.Fatalf("want a non-resumable %s error, got %+v", code, e)
	}
	for _, p := range parts {
		if !strings.Contains(e.Message, p) {
			t.Fatalf("error %q does not say %q", e.Message, p)
		}
	}
}

// dumpFiles lists the files left in dir.
func dumpFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func tn(schema, table string) filter.TableName { return filter.TableName{Schema: schema, Table: table} }
