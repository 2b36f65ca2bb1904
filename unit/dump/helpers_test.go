package dump

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// runTimeout bounds one Process in tests.
const runTimeout = 3 * time.Minute

func startSource(t *testing.T) *mariadbtest.Instance {
	t.Helper()
	return mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true})
}

// configs is a full-mode subtask of inst as user, chunks of rows rows read
// by threads workers.
func configs(inst *mariadbtest.Instance, user, password string, threads int, rows int64) (*config.SubTaskConfig, *config.SourceConfig) {
	cfg := &config.SubTaskConfig{
		Name: "task1", SourceID: "mysql-01", TaskMode: config.ModeFull, MetaSchema: "dm_meta",
		Mydumper: config.MydumperConfig{Threads: threads, Rows: rows},
	}
	src := &config.SourceConfig{SourceID: "mysql-01", From: config.DBConfig{
		Host: inst.Host(), Port: inst.Port(), User: user, Password: password}}
	return cfg, src
}

// newDumper creates and initialises a dump unit; it is closed in Cleanup.
func newDumper(t *testing.T, cfg *config.SubTaskConfig, src *config.SourceConfig, dir string) *Dumper {
	t.Helper()
	d, err := New(cfg, src, dir, NewMetrics(nil), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	if err := d.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	return d
}

// process runs Process to its end and fails the test unless it succeeded;
// it returns the manifest.
func process(t *testing.T, d *Dumper) *dumpfile.Manifest {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	if res := d.Process(ctx); res.Failed() || res.IsCanceled {
		t.Fatalf("Process = %+v", res)
	}
	m, err := dumpfile.ReadManifest(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// rawConn is a root session that reads as the dump does: raw bytes, UTC.
func rawConn(t *testing.T, inst *mariadbtest.Instance) *sql.Conn {
	t.Helper()
	return inst.Session(t, "SET NAMES binary", "SET time_zone = '+00:00'", "SET sql_mode = ''")
}

// sourceRows reads q's rows as the chunk format encodes them, sorted.
func sourceRows(t *testing.T, c *sql.Conn, q string) []string {
	t.Helper()
	rows, err := c.QueryContext(t.Context(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var out []string
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		fields := make([]dumpfile.Field, len(vals))
		for i, v := range vals {
			fields[i] = dumpfile.Field{Value: v, Null: v == nil}
		}
		out = append(out, rowKey(fields))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// rowKey is a row as comparable text.
func rowKey(fields []dumpfile.Field) string {
	var b strings.Builder
	for _, f := range fields {
		if f.Null {
			b.WriteString("NULL|")
		} else {
			fmt.Fprintf(&b, "%q|", f.Value)
		}
	}
	return b.String()
}

// dumpedRows decodes every chunk of the table named name, sorted.
func dumpedRows(t *testing.T, dir string, m *dumpfile.Manifest, name string) []string {
	t.Helper()
	tbl := manifestTable(t, m, name)
	var out []string
	for _, ch := range tbl.Chunks {
		n := 0
		f, err := os.Open(filepath.Join(dir, ch.File))
		if err != nil {
			t.Fatal(err)
		}
		r := dumpfile.NewReader(f)
		for {
			row, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", ch.File, err)
			}
			if len(row) != len(tbl.Columns) {
				t.Fatalf("%s: row of %d fields, table has %d columns", ch.File, len(row), len(tbl.Columns))
			}
			out = append(out, rowKey(row))
			n++
		}
		_ = f.Close()
		if int64(n) != ch.Rows {
			t.Errorf("%s holds %d rows, manifest says %d", ch.File, n, ch.Rows)
		}
		if st, err := os.Stat(filepath.Join(dir, ch.File)); err != nil || st.Size() != ch.Bytes {
			t.Errorf("%s: size %v (%v), manifest says %d", ch.File, st, err, ch.Bytes)
		}
	}
	slices.Sort(out)
	return out
}

func manifestTable(t *testing.T, m *dumpfile.Manifest, name string) dumpfile.Table {
	t.Helper()
	for _, tbl := range m.Tables {
		if tbl.Schema+"."+tbl.Name == name {
			return tbl
		}
	}
	t.Fatalf("manifest has no table %s", name)
	return dumpfile.Table{}
}

// sameRows fails the test unless got equals want, showing the first
// difference.
func sameRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows dumped, source has %d", what, len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Errorf("%s: row %d differs:\n dumped %s\n source %s", what, i, got[i], want[i])
			return
		}
	}
}
