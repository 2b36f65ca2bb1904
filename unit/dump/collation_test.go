package dump

import (
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// TestDumpCollations: the manifest records the source's default
// collations at the snapshot; a finished dump without them (an older
// worker's) is reused by a loose subtask and taken again by a strict one.
func TestDumpCollations(t *testing.T) {
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true,
		ExtraConfig: []string{"character-set-server=latin1", "collation-server=latin1_bin"}})
	src.Exec(t, "CREATE DATABASE app")
	src.Exec(t, "CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(10))")
	src.Exec(t, "INSERT INTO app.t VALUES (1, 'a'), (2, 'b')")
	cfg, scfg := configs(src, mariadbtest.SourceUser, mariadbtest.SourcePassword, 2, 1000)
	cfg.BAList.DoDBs = []string{"app"}
	dir := t.TempDir() + "/dump"
	m := process(t, newDumper(t, cfg, scfg, dir))
	c := m.Collations
	if c == nil || c.Server != "latin1_bin" || c.Charsets["utf8mb4"] != "utf8mb4_general_ci" || c.Charsets["latin1"] != "latin1_swedish_ci" {
		t.Fatalf("recorded collations %+v", c)
	}
	old := *m
	old.Collations = nil
	if err := dumpfile.WriteManifest(dir, &old); err != nil {
		t.Fatal(err)
	}
	if again := process(t, newDumper(t, cfg, scfg, dir)); again.DumpID != m.DumpID {
		t.Errorf("loose: dump %s taken again; want %s reused", again.DumpID, m.DumpID)
	}
	strict := *cfg
	strict.CollationCompatible = config.CollationStrict
	d := newDumper(t, &strict, scfg, dir)
	if fresh, err := d.IsFreshTask(t.Context()); err != nil || !fresh {
		t.Errorf("strict: IsFreshTask = %v %v, want a fresh task", fresh, err)
	}
	again := process(t, d)
	if again.DumpID == m.DumpID || again.Collations == nil || again.Collations.Server != "latin1_bin" {
		t.Errorf("strict: dump %s with collations %+v; want a new dump that records them", again.DumpID, again.Collations)
	}
}
