package load

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/typestest"
	"github.com/dmworker/dm-worker/unit/dump"
)

// TestLoadAfterDumpUnit loads what the dump unit wrote (every column type,
// a keyless table, a composite key, an empty table, a 5 MB BLOB of bytes
// that need escaping, many chunks): the target equals the source.
func TestLoadAfterDumpUnit(t *testing.T) {
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true})
	dst := mariadbtest.Start(t, mariadbtest.Options{Name: "target", FastCommit: true})
	e := &env{src: src, srcDB: src.PlainDB(t), dst: dst, dstDB: dst.PlainDB(t)}
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
		"CREATE TABLE app.nokey (a INT, b TEXT)", "INSERT INTO app.nokey SELECT seq % 10, REPEAT('x', seq) FROM app.seq_1_to_300",
		"CREATE TABLE app.pair (a INT, b VARCHAR(10), v DOUBLE, PRIMARY KEY (a, b))",
		"INSERT INTO app.pair SELECT seq % 50, CONCAT('k', seq), seq / 7 FROM app.seq_1_to_3000",
		"CREATE TABLE app.empty (id INT PRIMARY KEY)",
		"CREATE TABLE app.blobs (id INT PRIMARY KEY, b LONGBLOB)",
		"INSERT INTO app.blobs VALUES (1, REPEAT(UNHEX('00FF5C090A0D27'), 700000)), (2, ''), (3, NULL)")

	dir := t.TempDir()
	cfg, srcCfg := e.configs("withdump", config.ModeAll, 4)
	cfg.BAList = config.BAList{DoDBs: []string{"app"}}
	cfg.Mydumper = config.MydumperConfig{Threads: 2, Rows: 100}
	d, err := dump.New(cfg, srcCfg, dir, nil, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := d.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if res := d.Process(ctx); res.IsCanceled || len(res.Errors) > 0 {
		t.Fatalf("dump: %+v", res)
	}

	l := newLoader(t, cfg, srcCfg, dir, nil)
	requireOK(t, process(t, l))
	for _, table := range []string{"app.types", "app.nokey", "app.pair", "app.empty", "app.blobs"} {
		e.requireEqual(t, table, table)
	}
	var name string
	if err := e.dstDB.QueryRow("SELECT binlog_name FROM dm_meta.syncer_checkpoint WHERE task = 'withdump'").Scan(&name); err != nil || name == "" {
		t.Fatalf("no sync checkpoint after the load: %q, %v", name, err)
	}
	if st := l.Status().(Status); !st.Finished || st.ChunksDone != st.ChunksTotal || st.ChunksTotal < 30 {
		t.Fatalf("status: %+v", st)
	}
	l.Close()
}
