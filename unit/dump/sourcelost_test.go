package dump

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit/dumpfile"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// TestDumpSourceLost: the source crashes mid-dump; the run fails with a
// resumable error and no manifest, and Resume after the source is back
// dumps everything.
func TestDumpSourceLost(t *testing.T) {
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true})
	src.Exec(t, "CREATE DATABASE app")
	src.Exec(t, "CREATE TABLE app.t (id INT PRIMARY KEY, c CHAR(100))")
	src.Exec(t, "INSERT INTO app.t SELECT seq, 'c' FROM app.seq_1_to_100000")
	cfg, scfg := configs(src, mariadbtest.SourceUser, mariadbtest.SourcePassword, 2, 50)
	dir := filepath.Join(t.TempDir(), "dump")
	d := newDumper(t, cfg, scfg, dir)

	r := unittest.Start(d, false, runTimeout)
	testutil.WaitFor(t, time.Minute, "chunks written", func() bool { return d.Status().(Status).ChunksDone >= 3 })
	src.Kill(t)
	res := r.Wait(t, runTimeout+30*time.Second)
	if !res.Failed() || !res.Resumable() {
		t.Fatalf("Process when the source crashed = %+v, want a resumable error", res)
	}
	if _, err := dumpfile.ReadManifest(dir); !errors.Is(err, dumpfile.ErrNoManifest) {
		t.Fatalf("manifest after a failed dump: %v", err)
	}
	src.Restart(t)
	m := resume(t, d)
	if m.Rows() != 100000 {
		t.Fatalf("resumed dump holds %d rows", m.Rows())
	}
	checkOnlyManifestFiles(t, dir, m)
}
