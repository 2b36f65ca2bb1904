package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// TestIncrementalResumesFromFullTask is a DM user's habit: a task in mode
// full copies the data, then a task of the same name in mode incremental,
// with no meta in its file, replicates from where the dump's snapshot
// ended, so the writes made during and after the dump arrive and the
// target ends equal to the source. An incremental task without meta and
// without checkpoints is refused by dmctl, naming what to give.
func TestIncrementalResumesFromFullTask(t *testing.T) {
	f := startFullData(t, mariadbtest.Options{FastCommit: true}, "", "")
	createFullDataTables(t, f.src, 2000)
	w := startFDWorkload(t, f.srcDB)
	f.c.ok("task", "start", f.taskFile("habit", "full", 500))
	f.waitSubtask("habit", 2*time.Minute, "the full task finishes", func(d fdDoc) bool {
		if len(d.Errors) > 0 {
			t.Fatalf("subtask failed: %v", d)
		}
		return d.Stage == "Finished"
	})
	time.Sleep(300 * time.Millisecond) // writes after the full task ended
	if n := w.stop(); n == 0 {
		t.Fatal("the workload wrote nothing")
	}
	f.c.ok("task", "stop", "habit")

	incr := f.taskFile("habit", "incremental", 500) // no meta
	dry := f.c.ok("task", "start", incr, "--dry-run")
	if !strings.Contains(dry.stderr, "have no meta: they resume from the task's checkpoints") {
		t.Errorf("--dry-run of an incremental task without meta: stderr %q", dry.stderr)
	}
	f.c.ok("task", "start", incr)
	f.waitSubtask("habit", time.Minute, "the incremental task syncs", func(d fdDoc) bool {
		if len(d.Errors) > 0 {
			t.Fatalf("subtask failed: %v", d)
		}
		return d.Stage == "Running" && d.Unit == "Sync"
	})
	testutil.Eventually(t, time.Minute, "the target equals the source", f.compareFullData)

	r := f.c.run("task", "start", f.taskFile("fresh", "incremental", 500))
	if r.code != 1 || !strings.Contains(r.stderr, "source(s) "+fdSource+" have no meta") ||
		!strings.Contains(r.stderr, "holds no checkpoint of the task") || !strings.Contains(r.stderr, "--start-time") {
		t.Errorf("incremental without meta or checkpoints: exit %d, stderr %s", r.code, r.stderr)
	}
	r = f.c.run("task", "start", f.taskFile("habit2", "incremental", 500), "--remove-meta")
	if r.code != 1 || !strings.Contains(r.stderr, "which --remove-meta deletes") {
		t.Errorf("incremental without meta and --remove-meta: exit %d, stderr %s", r.code, r.stderr)
	}
}
