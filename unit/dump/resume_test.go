package dump

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/dumpfile"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// TestDumpResume: a cancelled dump leaves no manifest and is taken again;
// a finished one is reused; a changed block-allow list discards it; files
// the dump did not write stop it with a clear error.
func TestDumpResume(t *testing.T) {
	src := startSource(t)
	src.Exec(t, "CREATE DATABASE app")
	src.Exec(t, "CREATE TABLE app.big (id INT PRIMARY KEY, c CHAR(100))")
	src.Exec(t, "INSERT INTO app.big SELECT seq, 'c' FROM app.seq_1_to_60000")
	src.Exec(t, "CREATE TABLE app.small (id INT PRIMARY KEY)")
	src.Exec(t, "INSERT INTO app.small VALUES (1), (2)")
	cfg, scfg := configs(src, mariadbtest.SourceUser, mariadbtest.SourcePassword, 2, 50)
	dir := filepath.Join(t.TempDir(), "dump")
	d := newDumper(t, cfg, scfg, dir)
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o750 {
		t.Fatalf("dump dir %v %v, want created 0750", info, err)
	}

	// Pause mid-dump.
	r := unittest.Start(d, false, runTimeout)
	testutil.WaitFor(t, time.Minute, "chunks written", func() bool { return d.Status().(Status).ChunksDone >= 3 })
	r.Cancel()
	if res := r.Wait(t, runTimeout+30*time.Second); !res.IsCanceled || res.Failed() {
		t.Fatalf("Process after cancel = %+v", res)
	}
	if _, err := dumpfile.ReadManifest(dir); !errors.Is(err, dumpfile.ErrNoManifest) {
		t.Fatalf("manifest after a cancelled dump: %v", err)
	}
	if len(chunkFiles(t, dir)) == 0 {
		t.Fatal("no chunk file after a cancelled dump: the test does not cover leftovers")
	}
	if fresh, err := d.IsFreshTask(t.Context()); err != nil || !fresh {
		t.Fatalf("IsFreshTask after a cancelled dump = %v, %v", fresh, err)
	}
	first := resume(t, d)
	if len(first.Tables) != 2 || first.Rows() != 60002 {
		t.Fatalf("resumed dump: %d tables %d rows", len(first.Tables), first.Rows())
	}
	checkOnlyManifestFiles(t, dir, first)

	// Finished: reused, by this unit and by a new one (a restarted worker).
	if again := process(t, d); again.DumpID != first.DumpID {
		t.Fatalf("a finished dump was taken again: %s, then %s", first.DumpID, again.DumpID)
	}
	d2 := newDumper(t, cfg, scfg, dir)
	if fresh, err := d2.IsFreshTask(t.Context()); err != nil || fresh {
		t.Fatalf("IsFreshTask with a finished dump = %v, %v", fresh, err)
	}
	if again := process(t, d2); again.DumpID != first.DumpID {
		t.Fatalf("a finished dump was taken again after a restart: %s, then %s", first.DumpID, again.DumpID)
	}
	if st := d2.Status().(Status); st.Stage != StageFinished || st.Rows != 60002 || st.DumpID != first.DumpID {
		t.Errorf("status of a reused dump %+v", st)
	}

	d3, second := changeConfig(t, d, cfg, scfg, dir, first)
	// A chunk of a finished dump went missing (a crash while the load unit
	// removed the files): the dump is taken again.
	if err := os.Remove(filepath.Join(dir, second.Tables[0].Chunks[0].File)); err != nil {
		t.Fatal(err)
	}
	if fresh, err := d3.IsFreshTask(t.Context()); err != nil || !fresh {
		t.Fatalf("IsFreshTask with a chunk missing = %v, %v", fresh, err)
	}
	if again := process(t, d3); again.DumpID == second.DumpID {
		t.Fatal("a dump with a chunk missing was reused")
	}

	// A crash left a half-written chunk and no manifest.
	if err := os.Remove(filepath.Join(dir, dumpfile.ManifestName)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, dumpfile.ChunkFile(0, 7)+dumpfile.TmpSuffix), []byte("1\t"), 0o640); err != nil {
		t.Fatal(err)
	}
	third := process(t, d3)
	checkOnlyManifestFiles(t, dir, third)

	// A file the dump did not write.
	foreign := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(foreign, []byte("mine"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, dumpfile.ManifestName)); err != nil {
		t.Fatal(err)
	}
	res := d3.Process(t.Context())
	if !res.Failed() || res.Resumable() || res.Errors[0].Code != CodeDumpDir ||
		!strings.Contains(res.Errors[0].Message, foreign) || !strings.Contains(res.Errors[0].Message, "loader.dir") {
		t.Fatalf("Process with a foreign file = %+v", res)
	}
}

// resume runs Resume to its end and returns the manifest.
func resume(t *testing.T, d *Dumper) *dumpfile.Manifest {
	t.Helper()
	if res := d.Resume(t.Context()); res.Failed() || res.IsCanceled {
		t.Fatalf("Resume = %+v", res)
	}
	m, err := dumpfile.ReadManifest(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func chunkFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.Name() != dumpfile.ManifestName {
			out = append(out, e.Name())
		}
	}
	return out
}

// checkOnlyManifestFiles: dir holds the manifest and exactly its chunks.
func checkOnlyManifestFiles(t *testing.T, dir string, m *dumpfile.Manifest) {
	t.Helper()
	var want []string
	for _, tbl := range m.Tables {
		for _, c := range tbl.Chunks {
			want = append(want, c.File)
		}
	}
	slices.Sort(want)
	if got := chunkFiles(t, dir); !slices.Equal(got, want) {
		t.Fatalf("dump dir holds %d files %.200q, manifest names %d", len(got), got, len(want))
	}
}

// changeConfig checks what a config change does to the finished dump
// first: Update refuses a new block-allow list and accepts new threads; a
// unit with the new list dumps again. It returns that unit and its dump.
func changeConfig(t *testing.T, d *Dumper, cfg *config.SubTaskConfig, scfg *config.SourceConfig, dir string,
	first *dumpfile.Manifest) (*Dumper, *dumpfile.Manifest) {
	t.Helper()
	narrow := *cfg
	narrow.BAList = config.BAList{DoTables: []config.TableRef{{DBName: "app", TblName: "small"}}}
	if err := d.Update(t.Context(), &narrow); !errors.Is(err, unit.ErrUpdateUnsupported) {
		t.Fatalf("Update with another block-allow list = %v, want ErrUpdateUnsupported", err)
	}
	threads := *cfg
	threads.Mydumper.Threads = 8
	if err := d.Update(t.Context(), &threads); err != nil {
		t.Fatalf("Update of threads = %v", err)
	}
	if d.threads != 8 {
		t.Fatalf("threads %d after Update", d.threads)
	}
	// More readers than the pool had at Init: the next dump must get them.
	if err := os.Remove(filepath.Join(dir, dumpfile.ManifestName)); err != nil {
		t.Fatal(err)
	}
	if m := process(t, d); m.DumpID == first.DumpID || m.Rows() != first.Rows() {
		t.Fatalf("dump with 8 threads: %s, %d rows", m.DumpID, m.Rows())
	}
	d3 := newDumper(t, &narrow, scfg, dir)
	if fresh, err := d3.IsFreshTask(t.Context()); err != nil || !fresh {
		t.Fatalf("IsFreshTask after the block-allow list changed = %v, %v", fresh, err)
	}
	second := process(t, d3)
	if second.DumpID == first.DumpID || len(second.Tables) != 1 || second.Tables[0].Name != "small" {
		t.Fatalf("after the block-allow list changed: dump %s with %d tables", second.DumpID, len(second.Tables))
	}
	checkOnlyManifestFiles(t, dir, second)

	return d3, second
}
