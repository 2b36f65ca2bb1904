package load

import (
	"context"
	"database/sql"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/typestest"
	"github.com/dmworker/dm-worker/unit/dumpfile"
	"github.com/dmworker/dm-worker/unit/syncer/syncmeta"
)

// TestLoadEqualsSource loads every column type, a table without a key, two
// tables merged by a route, a table whose inserts a filter skips and a
// table whose creation a filter skips (it exists on the target), in task
// mode all, and checks the target equals the source, the hand-off to the
// sync unit and the cleanup.
func TestLoadEqualsSource(t *testing.T) {
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true})
	e := &env{src: src, srcDB: src.PlainDB(t)}
	conn, err := e.srcDB.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mustExecConn(t, conn, "CREATE DATABASE app", typestest.DDL("app"), typestest.SQLMode)
	mustExecConn(t, conn, typestest.Inserts("app")...)
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	mariadbtest.MustExec(t, e.srcDB,
		"CREATE TABLE app.nokey (a INT, b VARCHAR(20), c BLOB)",
		"INSERT INTO app.nokey VALUES (1, 'x', NULL), (1, 'x', NULL), (2, NULL, X'00090A0D5C'), (NULL, 'tab\there', 'back\\\\slash')",
		"CREATE TABLE app.shard_1 (id INT PRIMARY KEY, v VARCHAR(20), g INT AS (id * 2) VIRTUAL)",
		"CREATE TABLE app.shard_2 (id INT PRIMARY KEY, v VARCHAR(20), g INT AS (id * 2) VIRTUAL)",
		"INSERT INTO app.shard_1 (id, v) SELECT seq, CONCAT('one-', seq) FROM app.seq_1_to_7",
		"INSERT INTO app.shard_2 (id, v) SELECT seq, CONCAT('two-', seq) FROM app.seq_100_to_105",
		"CREATE TABLE app.noins (id INT PRIMARY KEY)", "INSERT INTO app.noins VALUES (1), (2)",
		"CREATE TABLE app.precreated (id INT PRIMARY KEY, v TEXT)", "INSERT INTO app.precreated VALUES (1, 'a'), (2, 'b')",
		"CREATE TABLE app.empty (id INT PRIMARY KEY)")
	for _, v := range []struct {
		name   string
		extra  []string
		method int32
	}{{"load data", nil, methodLoadData}, {"insert when the target refuses local infile", []string{"local_infile=OFF"}, methodInsert}} {
		t.Run(v.name, func(t *testing.T) {
			dst := mariadbtest.Start(t, mariadbtest.Options{Name: "target", FastCommit: true, ExtraConfig: v.extra})
			e := &env{src: e.src, srcDB: e.srcDB, dst: dst, dstDB: dst.PlainDB(t)}
			l := loadEverything(t, e)
			if got := l.method.Load(); got != v.method {
				t.Fatalf("load method %d, want %d", got, v.method)
			}
		})
	}
}

// loadEverything loads the tables of TestLoadEqualsSource and checks them.
func loadEverything(t *testing.T, e *env) *Loader {
	mariadbtest.MustExec(t, e.dstDB, "CREATE DATABASE app", "CREATE TABLE app.precreated (id INT PRIMARY KEY, v TEXT)")
	dir := t.TempDir()
	m := e.dumpTables(t, dir, "full1", "dump-1", 2, tn("app", "types"), tn("app", "nokey"), tn("app", "shard_1"),
		tn("app", "shard_2"), tn("app", "noins"), tn("app", "precreated"), tn("app", "empty"))
	// A schema without tables is created too, with its options. The end
	// differs from the start, as after writes during the dump.
	m.End.Pos += 1000
	m.Schemas = append(m.Schemas, dumpfile.Schema{Name: "empty_db", CreateSQL: "CREATE DATABASE `empty_db` /*!40100 DEFAULT CHARACTER SET latin1 COLLATE latin1_swedish_ci */"})
	if err := dumpfile.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	cfg, src := e.configs("full1", config.ModeAll, 3)
	cfg.RouteRules = []config.RouteRule{{SchemaPattern: "app", TablePattern: "shard_*", TargetSchema: "merged", TargetTable: "shards"}}
	cfg.FilterRules = []config.FilterRule{
		{SchemaPattern: "app", TablePattern: "noins", Events: []string{"insert"}, Action: config.FilterIgnore},
		{SchemaPattern: "app", TablePattern: "precreated", Events: []string{"create table"}, Action: config.FilterIgnore},
	}
	reg := prometheus.NewRegistry()
	l := newLoader(t, cfg, src, dir, NewMetrics(reg))
	if fresh, err := l.IsFreshTask(context.Background()); err != nil || !fresh {
		t.Fatalf("IsFreshTask before the load: %v, %v; want true", fresh, err)
	}
	requireOK(t, process(t, l))
	if loc, ok := l.CheckpointLocation(); !ok || loc != m.Start {
		t.Errorf("CheckpointLocation = %v %v, want the snapshot %v (task mode all)", loc, ok, m.Start)
	}

	e.requireEqual(t, "app.types", "app.types")
	e.requireEqual(t, "app.nokey", "app.nokey")
	e.requireEqual(t, "app.precreated", "app.precreated")
	e.requireEqual(t, "app.empty", "app.empty")
	e.requireEqual(t, "merged.shards", "app.shard_1", "app.shard_2")
	if n := queryInt(t, e.dstDB, "SELECT COUNT(*) FROM app.noins"); n != 0 {
		t.Fatalf("app.noins: %d rows loaded although a filter rule ignores its inserts", n)
	}
	if n := queryInt(t, e.dstDB, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'merged'"); n != 1 {
		t.Fatal("the routed schema merged was not created")
	}
	if n := queryInt(t, e.dstDB, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'empty_db' AND DEFAULT_CHARACTER_SET_NAME = 'latin1'"); n != 1 {
		t.Fatal("the schema empty_db was not created with its character set")
	}

	st := l.Status().(Status)
	if !st.Finished || st.ChunksDone != m.Chunks() || st.ChunksTotal != m.Chunks() || st.TablesDone != 7 ||
		st.Rows != m.Rows() || st.Bytes != m.Bytes() || st.DumpID != "dump-1" || st.Dir != dir {
		t.Fatalf("status after the load: %+v (manifest: %d chunks, %d rows, %d bytes)", st, m.Chunks(), m.Rows(), m.Bytes())
	}
	wantRows := m.Rows() - 2 // app.noins's rows are skipped
	labels := []string{"full1", "mysql-01"}
	if got := counterValue(t, l.metrics.m.Rows.WithLabelValues(labels...)); int64(got) != wantRows {
		t.Fatalf("dm_load_rows_total = %v, want %d", got, wantRows)
	}
	if got := counterValue(t, l.metrics.m.Chunks.WithLabelValues(labels...)); int(got) != m.Chunks() {
		t.Fatalf("dm_load_chunks_total = %v, want %d", got, m.Chunks())
	}

	e.requireHandOff(t, "full1", m)
	if n := queryInt(t, e.dstDB, "SELECT COUNT(*) FROM dm_meta.load_checkpoint WHERE task = 'full1'"); n != int64(m.Chunks()) {
		t.Fatalf("%d chunk records, want %d", n, m.Chunks())
	}
	if files := dumpFiles(t, dir); len(files) != 0 {
		t.Fatalf("dump files left after the load: %v", files)
	}

	// Finished: not fresh, and another run ends at once without a dump.
	if fresh, err := l.IsFreshTask(context.Background()); err != nil || fresh {
		t.Fatalf("IsFreshTask after the load: %v, %v; want false", fresh, err)
	}
	requireOK(t, process(t, l))
	l.Close()
	return l
}

func mustExecConn(t *testing.T, conn *sql.Conn, queries ...string) {
	t.Helper()
	for _, q := range queries {
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// requireHandOff checks the sync unit's rows the load wrote for task: the
// checkpoint at the snapshot, the safe point at the dump's end.
func (e *env) requireHandOff(t *testing.T, task string, m *dumpfile.Manifest) {
	t.Helper()
	// The hand-off: sync starts at the snapshot, safe mode until the end.
	var name, gtid string
	var pos int64
	if err := e.dstDB.QueryRow("SELECT binlog_name, binlog_pos, binlog_gtid FROM dm_meta."+syncmeta.CheckpointTable+
		" WHERE task = ? AND source = 'mysql-01'", task).Scan(&name, &pos, &gtid); err != nil {
		t.Fatal(err)
	}
	if name != m.Start.Name || uint32(pos) != m.Start.Pos || gtid != m.Start.GTID {
		t.Fatalf("sync checkpoint %s:%d %q, want the snapshot %s", name, pos, gtid, m.Start)
	}
	if err := e.dstDB.QueryRow("SELECT binlog_name, binlog_pos FROM dm_meta."+syncmeta.SafePointTable+
		" WHERE task = ? AND source = 'mysql-01' AND worker = ?", task, syncmeta.HandOffWorker).Scan(&name, &pos); err != nil {
		t.Fatal(err)
	}
	if name != m.End.Name || uint32(pos) != m.End.Pos {
		t.Fatalf("safe point %s:%d, want the dump's end %s", name, pos, m.End)
	}
}
