package e2e

import (
	"fmt"
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

// TestWhereDump: DM's mydumpers.*.where dumps only the rows it selects, in
// mode full and in mode all, where the sync unit then replicates every
// change, selected or not, as DM does.
func TestWhereDump(t *testing.T) {
	for _, mode := range []string{"full", "all"} {
		t.Run(mode, func(t *testing.T) {
			f := startFullData(t, mariadbtest.Options{FastCommit: true}, "", "")
			f.src.Exec(t, "CREATE DATABASE wh")
			f.src.Exec(t, "CREATE TABLE wh.t (id INT PRIMARY KEY, v INT, note VARCHAR(20))")
			f.src.Exec(t, "INSERT INTO wh.t SELECT seq, seq % 10, CONCAT('n', seq) FROM wh.seq_1_to_3000")
			f.src.Exec(t, "CREATE TABLE wh.nokey (v INT)")
			f.src.Exec(t, "INSERT INTO wh.nokey SELECT seq % 10 FROM wh.seq_1_to_100")
			task := writeFile(t, "wh.yaml", fmt.Sprintf(`name: wh-%s
task-mode: %s
target-database: {host: 127.0.0.1, port: %d, user: root, password: ""}
mysql-instances:
  - source-id: %s
    block-allow-list: only
    mydumper-config-name: some
block-allow-list:
  only: {do-dbs: [wh]}
mydumpers:
  some: {threads: 4, rows: 500, where: "v < 3 -- a DM user's comment"}
`, mode, mode, f.tgt.Port(), fdSource))
			f.c.ok("task", "start", task)
			want := "Finished"
			if mode == "all" {
				want = "Sync"
			}
			f.waitSubtask("wh-"+mode, time.Minute, "the task ends its load", func(d fdDoc) bool {
				if len(d.Errors) > 0 {
					t.Fatalf("subtask failed: %v", d)
				}
				return d.Stage == "Finished" && want == "Finished" || d.Stage == "Running" && d.Unit == want
			})
			if err := f.compare("wh.t", "SELECT * FROM wh.t WHERE v < 3 ORDER BY id", "SELECT * FROM wh.t ORDER BY id"); err != nil {
				t.Fatal(err)
			}
			if err := f.compare("wh.nokey", "SELECT v, COUNT(*) FROM wh.nokey WHERE v < 3 GROUP BY v ORDER BY v",
				"SELECT v, COUNT(*) FROM wh.nokey GROUP BY v ORDER BY v"); err != nil {
				t.Fatal(err)
			}
			if mode == "all" {
				// Sync replicates every change: an update of a selected row,
				// and a row outside the condition.
				f.src.Exec(t, "UPDATE wh.t SET note = 'synced' WHERE id = 10")
				f.src.Exec(t, "INSERT INTO wh.t VALUES (5001, 9, 'outside')")
				testutil.Eventually(t, 30*time.Second, "the sync unit replicates after the subset dump", func() error {
					return f.compare("wh.t", "SELECT * FROM wh.t WHERE v < 3 OR id > 5000 ORDER BY id", "SELECT * FROM wh.t ORDER BY id")
				})
			}
		})
	}
}
