package dump

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/typestest"
	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// TestDumpTables dumps every column type, a table without a key, a
// composite non-integer key and a table of many chunks, and checks the
// manifest and every decoded field against the source.
func TestDumpTables(t *testing.T) {
	src := startSource(t)
	c := rawConn(t, src)
	createTables(t, src, c)
	cfg, scfg := configs(src, mariadbtest.SourceUser, mariadbtest.SourcePassword, 4, 1000)
	cfg.BAList.DoDBs = []string{"app"}
	dir := t.TempDir() + "/dump"
	d := newDumper(t, cfg, scfg, dir)
	m := process(t, d)
	if loc, ok := d.CheckpointLocation(); ok {
		t.Errorf("CheckpointLocation in task mode full = %v; want none (no sync unit follows)", loc)
	}
	all := *cfg
	all.TaskMode = config.ModeAll
	d2 := newDumper(t, &all, scfg, dir)
	if m2 := process(t, d2); m2.DumpID != m.DumpID {
		t.Errorf("task mode all took dump %s; want the finished %s reused", m2.DumpID, m.DumpID)
	}
	if got, ok := d2.CheckpointLocation(); !ok || got != m.Start {
		t.Errorf("CheckpointLocation in task mode all = %v %v, want the snapshot %v", got, ok, m.Start)
	}

	if m.Method != dumpfile.MethodFlushLock || m.LockHeld <= 0 {
		t.Errorf("method %q lock held %v, want %q and > 0", m.Method, m.LockHeld, dumpfile.MethodFlushLock)
	}
	if m.Start.IsZero() || m.Start.GTID == "" || m.End.Compare(m.Start) < 0 {
		t.Errorf("start %v (gtid %q) end %v", m.Start, m.Start.GTID, m.End)
	}
	if m.Task != "task1" || m.Source != "mysql-01" || m.Fingerprint != Fingerprint(cfg, scfg) || m.DumpID == "" {
		t.Errorf("manifest identity %q %q %q %q", m.Task, m.Source, m.Fingerprint, m.DumpID)
	}
	if len(m.Schemas) != 1 || m.Schemas[0].Name != "app" || !strings.Contains(m.Schemas[0].CreateSQL, "CREATE DATABASE `app`") {
		t.Errorf("schemas %+v", m.Schemas)
	}
	var names []string
	for _, tbl := range m.Tables {
		names = append(names, tbl.Schema+"."+tbl.Name)
	}
	if got := strings.Join(names, ","); got != "app.big,app.comp,app.empty,app.fkey,app.neg,app.nokey,app.types,app.uk,app.wide" {
		t.Fatalf("tables %s", got)
	}
	// app.big is split by key ranges sized from InnoDB's row estimate, the
	// others by keyset boundaries (exactly rows rows per chunk).
	wantChunks := map[string]int{"app.comp": 4, "app.nokey": 1, "app.types": 1, "app.wide": -1, "app.neg": -1,
		"app.uk": 3, "app.fkey": 1, "app.empty": 1}
	wantKeys := map[string]string{"app.big": "id", "app.comp": "name,at,tag", "app.nokey": "", "app.types": "id", "app.wide": "id", "app.neg": "id",
		"app.uk": "b", "app.fkey": "", "app.empty": "id"}
	for _, tbl := range m.Tables {
		n := tbl.Schema + "." + tbl.Name
		want, ok := wantChunks[n]
		if (ok && want >= 0 && len(tbl.Chunks) != want) || (ok && want < 0 && len(tbl.Chunks) < 2) || (!ok && (len(tbl.Chunks) < 10 || len(tbl.Chunks) > 40)) {
			t.Errorf("%s: %d chunks, want %d (0: 10 to 40)", n, len(tbl.Chunks), wantChunks[n])
		}
		if got := strings.Join(tbl.KeyColumns, ","); got != wantKeys[n] {
			t.Errorf("%s: key %q, want %q", n, got, wantKeys[n])
		}
		if !strings.HasPrefix(tbl.CreateSQL, "CREATE TABLE `"+tbl.Name+"`") {
			t.Errorf("%s: create sql %q", n, tbl.CreateSQL)
		}
	}
	checkTypesColumns(t, manifestTable(t, m, "app.types"))
	if cols := manifestTable(t, m, "app.nokey").Columns; len(cols) != 2 {
		t.Errorf("nokey columns %+v: the generated column must be left out", cols)
	}

	typesSelect := "SELECT id, ti, tiu, si, siu, mi, miu, i, iu, bi, biu, de, de0, CAST(f AS DOUBLE), d, dt, tm, dtm, dtm0, ts, CAST(y AS CHAR), " +
		"c, vc, tx, mt, bl, bn, vb, e, s, CAST(b1 AS UNSIGNED), CAST(b64 AS UNSIGNED), j, lat, u8 FROM app.types"
	for name, q := range map[string]string{
		"app.types": typesSelect,
		"app.nokey": "SELECT a, b FROM app.nokey",
		"app.comp":  "SELECT * FROM app.comp",
		"app.big":   "SELECT * FROM app.big",
		"app.wide":  "SELECT * FROM app.wide",
		"app.neg":   "SELECT * FROM app.neg",
		"app.uk":    "SELECT * FROM app.uk",
		"app.fkey":  "SELECT CAST(f AS DOUBLE) FROM app.fkey",
		"app.empty": "SELECT * FROM app.empty",
	} {
		want := sourceRows(t, c, q)
		sameRows(t, name, dumpedRows(t, dir, m, name), want)
	}
	// go-sql-driver parses integer columns; YEAR must keep MariaDB's four
	// digits (LOAD DATA reads "0" into a YEAR as 2000, "0000" as 0000).
	var years []string
	for _, r := range dumpedRows(t, dir, m, "app.types") {
		years = append(years, strings.Split(r, "|")[20])
	}
	if got := strings.Join(years, ","); got != `"1901","2155",NULL,"0000","2000"` {
		t.Errorf("YEAR fields %s", got)
	}
	if got := m.Rows(); got != 5+5+3000+20000+5002+5000+2500+2500 {
		t.Errorf("manifest rows %d", got)
	}
	st := d.Status().(Status)
	if st.Stage != StageFinished || st.ChunksDone != m.Chunks() || st.ChunksTotal != m.Chunks() || st.TablesDone != 9 ||
		st.Rows != m.Rows() || st.Bytes != m.Bytes() || st.ETASeconds == nil || *st.ETASeconds != 0 {
		t.Errorf("status %+v", st)
	}
}

// checkTypesColumns checks how the columns of typestest's table are read.
func checkTypesColumns(t *testing.T, tbl dumpfile.Table) {
	t.Helper()
	if len(tbl.Columns) != 35 {
		t.Fatalf("types: %d columns, want 35", len(tbl.Columns))
	}
	var got []string
	for _, c := range tbl.Columns {
		if c.Load != dumpfile.LoadRaw || c.Name == "f" || c.Name == "iu" {
			got = append(got, fmt.Sprintf("%s:%s:%s", c.Name, c.Type, c.Load))
		}
	}
	want := "iu:int(10) unsigned:,f:float:,b1:bit(1):bit,b64:bit(64):bit"
	if s := strings.Join(got, ","); s != want {
		t.Errorf("types columns %s, want %s", s, want)
	}
}

// createTables creates the tables TestDumpTables dumps; c writes the
// every-type rows under typestest's sql_mode.
func createTables(t *testing.T, src *mariadbtest.Instance, c *sql.Conn) {
	t.Helper()
	src.Exec(t, "CREATE DATABASE app")
	src.Exec(t, typestest.DDL("app"))
	for _, q := range append([]string{typestest.SQLMode}, typestest.Inserts("app")...) {
		if _, err := c.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	src.Exec(t, "CREATE TABLE app.nokey (a INT, b VARCHAR(30), g INT AS (a + 1) VIRTUAL)")
	src.Exec(t, "INSERT INTO app.nokey (a, b) VALUES (1, 'a'), (1, 'a'), (2, NULL), (NULL, 'n'), (3, 'tab\there\nnl\\\\')")
	src.Exec(t, `CREATE TABLE app.comp (name VARCHAR(20) CHARACTER SET latin1, at DATETIME(3), tag VARBINARY(4),
		note TEXT, PRIMARY KEY (name, at, tag))`)
	// 3000 rows whose key sorts otherwise than it was inserted.
	src.Exec(t, `INSERT INTO app.comp SELECT CONCAT(CHAR(65 + seq % 26), 'é', seq % 7), '2024-01-01 00:00:00.5' + INTERVAL (seq % 100) DAY,
		UNHEX(HEX(seq % 3)), REPEAT('x', seq % 50) FROM app.seq_0_to_2999`)
	src.Exec(t, "CREATE TABLE app.big (id INT PRIMARY KEY, k INT, c CHAR(120), UNIQUE KEY uk (k))")
	src.Exec(t, "INSERT INTO app.big SELECT seq, 20000 - seq, REPEAT(CHAR(97 + seq % 26), 120) FROM app.seq_1_to_20000")
	// Integer keys split by ranges: the extremes of BIGINT UNSIGNED, and
	// negative values.
	src.Exec(t, "CREATE TABLE app.wide (id BIGINT UNSIGNED PRIMARY KEY)")
	src.Exec(t, "INSERT INTO app.wide SELECT seq FROM app.seq_0_to_4999")
	src.Exec(t, "INSERT INTO app.wide VALUES (18446744073709551615), (9223372036854775808)")
	src.Exec(t, "CREATE TABLE app.neg (id INT PRIMARY KEY, v VARCHAR(10))")
	src.Exec(t, "INSERT INTO app.neg SELECT -seq * 3, 'n' FROM app.seq_1_to_5000")
	src.Exec(t, "ANALYZE TABLE app.wide, app.neg")
	// Key choice: a unique key with a nullable column is passed over; a
	// FLOAT key cannot split; an empty table is one empty chunk.
	src.Exec(t, "CREATE TABLE app.uk (a INT NULL, b VARCHAR(10) NOT NULL, UNIQUE KEY ua (a), UNIQUE KEY ub (b))")
	src.Exec(t, "INSERT INTO app.uk SELECT IF(seq % 2, seq, NULL), CONCAT('b', seq) FROM app.seq_1_to_2500")
	src.Exec(t, "CREATE TABLE app.fkey (f FLOAT PRIMARY KEY)")
	src.Exec(t, "INSERT INTO app.fkey SELECT seq / 3 FROM app.seq_1_to_2500")
	src.Exec(t, "CREATE TABLE app.empty (id INT PRIMARY KEY)")
	src.Exec(t, "CREATE VIEW app.v AS SELECT id FROM app.big")
	src.Exec(t, "CREATE DATABASE other")
	src.Exec(t, "CREATE TABLE other.t (id INT PRIMARY KEY)")

}
