package load

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/dump"
	"github.com/dmworker/dm-worker/unit/dumpfile"
	"github.com/dmworker/dm-worker/unit/load/loadmeta"
)

// TestLoadRefusals: the errors that need the operator (a differing target
// table, keys already there, a filter rule with action Error, a dump that
// is gone, was taken again or under another block-allow list or online-ddl
// setting), keeping the dump files when asked, and removing a task's
// records.
func TestLoadRefusals(t *testing.T) {
	e := newEnv(t, false)
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app",
		"CREATE TABLE app.m (id INT PRIMARY KEY, a INT, b VARCHAR(10))", "INSERT INTO app.m VALUES (1, 1, 'x')",
		"CREATE TABLE app.r (id INT PRIMARY KEY, v INT)", "INSERT INTO app.r SELECT seq, seq FROM app.seq_1_to_100")
	mariadbtest.MustExec(t, e.dstDB, "CREATE DATABASE app", "CREATE TABLE app.m (id INT PRIMARY KEY, a BIGINT, c VARCHAR(10))")
	ctx := context.Background()

	t.Run("existing target table differs", func(t *testing.T) { refuseDifferingTable(t, e) })
	t.Run("key already in the target", func(t *testing.T) { refuseKnownKeys(t, e) })
	t.Run("filter rule with action Error", func(t *testing.T) { refuseErrorRule(t, e) })
	t.Run("dump missing or taken again", func(t *testing.T) { refuseMissingDump(t, e) })
	t.Run("block-allow list changed since the dump", func(t *testing.T) { refuseReselectedDump(t, e) })
	t.Run("online-ddl changed since the dump", func(t *testing.T) { refuseOnlineDDLChanged(t, e) })
	t.Run("cleanup-dump-file false keeps the files", func(t *testing.T) { keepDumpFiles(t, e) })

	removed, err := loadmeta.RemoveTask(ctx, e.dstDB, "dm_meta", "gone")
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 || removed[0].Table != "`dm_meta`.`load_checkpoint`" || removed[0].Rows != 3 ||
		removed[1].Table != "`dm_meta`.`load_status`" || removed[1].Rows != 1 || !slices.Equal(removed[1].Sources, []string{"mysql-01"}) {
		t.Fatalf("RemoveTask: %+v", removed)
	}
	if n := queryInt(t, e.dstDB, "SELECT COUNT(*) FROM dm_meta.load_status WHERE task = 'keep' AND finished = 1"); n != 1 {
		t.Fatalf("RemoveTask of another task removed the status of task keep (%d rows)", n)
	}
	if removed, err := loadmeta.RemoveTask(ctx, e.dstDB, "no_such_schema", "gone"); err != nil || removed != nil {
		t.Fatalf("RemoveTask without tables: %v, %v", removed, err)
	}
}

func refuseDifferingTable(t *testing.T, e *env) {
	dir := t.TempDir()
	e.dumpTables(t, dir, "mismatch", "dump-m", 0, tn("app", "m"))
	cfg, src := e.configs("mismatch", config.ModeFull, 2)
	l := newLoader(t, cfg, src, dir, nil)
	requireError(t, process(t, l), CodeLoadSchema, "`app`.`m`", "column 2 is `a` int(11) in the source but `a` bigint(20)",
		"column 3 is `b` varchar(10) in the source but `c` varchar(10)")
}

// refuseKnownKeys: a key already in the target (as from a merged table
// whose keys overlap) stops the load, with either method.
func refuseKnownKeys(t *testing.T, e *env) {
	for _, method := range []int32{methodLoadData, methodInsert} {
		dir := t.TempDir()
		e.dumpTables(t, dir, "overlap", "dump-o", 0, tn("app", "r"))
		cfg, src := e.configs("overlap", config.ModeFull, 1)
		cfg.RouteRules = []config.RouteRule{{SchemaPattern: "app", TablePattern: "*", TargetSchema: fmt.Sprintf("ov%d", method), TargetTable: "r"}}
		mariadbtest.MustExec(t, e.dstDB, fmt.Sprintf("CREATE DATABASE ov%d", method), fmt.Sprintf("CREATE TABLE ov%d.r (id INT PRIMARY KEY, v INT)", method),
			fmt.Sprintf("INSERT INTO ov%d.r VALUES (50, 0)", method))
		l := newLoader(t, cfg, src, dir, nil)
		l.method.Store(method)
		requireError(t, process(t, l), CodeLoadChunk, fmt.Sprintf("`ov%d`.`r`", method), "already in the target table")
		if n := queryInt(t, e.dstDB, fmt.Sprintf("SELECT COUNT(*) FROM ov%d.r", method)); n != 1 {
			t.Fatalf("the refused chunk left %d rows in the target, want the 1 there before", n)
		}
		mariadbtest.MustExec(t, e.dstDB, "DELETE FROM dm_meta.load_status WHERE task = 'overlap'")
	}
}

func refuseErrorRule(t *testing.T, e *env) {
	dir := t.TempDir()
	e.dumpTables(t, dir, "guarded", "dump-g", 0, tn("app", "r"))
	cfg, src := e.configs("guarded", config.ModeFull, 2)
	cfg.FilterRules = []config.FilterRule{{Name: "no-r", SchemaPattern: "app", TablePattern: "r", Events: []string{"insert"}, Action: config.FilterError}}
	l := newLoader(t, cfg, src, dir, nil)
	requireError(t, process(t, l), CodeLoadFilterError, "no-r", "`app`.`r`")
}

func refuseMissingDump(t *testing.T, e *env) {
	dir := t.TempDir()
	cfg, src := e.configs("gone", config.ModeFull, 1)
	l := newLoader(t, cfg, src, dir, nil)
	requireError(t, process(t, l), CodeLoadDump, "no finished dump in "+dir)

	m := e.dumpTables(t, dir, "gone", "dump-1", 10, tn("app", "r"))
	// The fourth chunk is changed after the dump: the load stops there
	// with three chunks recorded (pool-size 1 loads them in order).
	bad := filepath.Join(dir, m.Tables[0].Chunks[3].File)
	if err := os.WriteFile(bad, []byte("1\t1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	requireError(t, process(t, l), CodeLoadDump, bad, "has 4 bytes but the manifest of dump dump-1 says")
	if n := queryInt(t, e.dstDB, "SELECT COUNT(*) FROM dm_meta.load_checkpoint WHERE task = 'gone'"); n != 3 {
		t.Fatalf("%d chunks recorded, want 3", n)
	}
	if err := os.Remove(filepath.Join(dir, dumpfile.ManifestName)); err != nil {
		t.Fatal(err)
	}
	requireError(t, process(t, l), CodeLoadDump, "holds 3 loaded chunks of dump dump-1", dir, "--remove-meta")

	m.DumpID = "dump-2"
	if err := dumpfile.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	requireError(t, process(t, l), CodeLoadDump, "dump dump-2", "taken again", "holds 3 chunks of dump dump-1", "--remove-meta")
}

func refuseReselectedDump(t *testing.T, e *env) {
	dir := t.TempDir()
	m := e.dumpTables(t, dir, "reselect", "dump-s", 0, tn("app", "r"))
	cfg, src := e.configs("reselect", config.ModeFull, 2)
	cfg.RouteRules = []config.RouteRule{{SchemaPattern: "app", TargetSchema: "reselected"}}
	before := *cfg
	before.BAList = config.BAList{DoDBs: []string{"app"}}
	before.Mydumper.Rows = 5 // the chunk size is not the selection
	m.Fingerprint = dump.Fingerprint(&before, src)
	if err := dumpfile.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	l := newLoader(t, cfg, src, dir, nil)
	requireError(t, process(t, l), CodeLoadDump, "dump-s", "the block-allow list of the task changed", "--remove-meta")
	cfg.BAList = before.BAList
	l = newLoader(t, cfg, src, dir, nil)
	requireOK(t, process(t, l))
	e.requireEqual(t, "reselected.r", "app.r")
}

// refuseOnlineDDLChanged: a dump taken with online-ddl off may hold shadow
// and trash tables, one taken with it on lacks them: either is refused by a
// load whose online-ddl setting differs.
func refuseOnlineDDLChanged(t *testing.T, e *env) {
	for _, on := range []bool{true, false} {
		task := fmt.Sprintf("osc%t", on)
		dir := t.TempDir()
		m := e.dumpTables(t, dir, task, "dump-"+task, 0, tn("app", "r"))
		cfg, src := e.configs(task, config.ModeFull, 2)
		cfg.RouteRules = []config.RouteRule{{SchemaPattern: "app", TargetSchema: task}}
		before := *cfg
		before.OnlineDDL = !on
		m.Fingerprint = dump.Fingerprint(&before, src)
		if err := dumpfile.WriteManifest(dir, m); err != nil {
			t.Fatal(err)
		}
		cfg.OnlineDDL = on
		l := newLoader(t, cfg, src, dir, nil)
		requireError(t, process(t, l), CodeLoadDump, "dump-"+task, "online-ddl (or its shadow-table-rules and trash-table-rules) of the task changed", "--remove-meta")
		cfg.OnlineDDL = before.OnlineDDL
		l = newLoader(t, cfg, src, dir, nil)
		requireOK(t, process(t, l))
		e.requireEqual(t, task+".r", "app.r")
	}
}

func keepDumpFiles(t *testing.T, e *env) {
	dir := t.TempDir()
	m := e.dumpTables(t, dir, "keep", "dump-k", 30, tn("app", "r"))
	cfg, src := e.configs("keep", config.ModeFull, 2)
	keep := false
	cfg.Loader.CleanupDumpFile = &keep
	cfg.RouteRules = []config.RouteRule{{SchemaPattern: "app", TargetSchema: "kept"}}
	l := newLoader(t, cfg, src, dir, nil)
	requireOK(t, process(t, l))
	e.requireEqual(t, "kept.r", "app.r")
	want := []string{dumpfile.ManifestName}
	for _, c := range m.Tables[0].Chunks {
		want = append(want, c.File)
	}
	slices.Sort(want)
	if got := dumpFiles(t, dir); !slices.Equal(got, want) {
		t.Fatalf("files after the load: %v, want %v", got, want)
	}
	// Full mode leaves the sync unit's checkpoint at the snapshot, for an
	// incremental task of the same name started without meta.
	e.requireHandOff(t, "keep", m)
}
