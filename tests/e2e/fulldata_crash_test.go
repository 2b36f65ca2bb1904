package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// crashData creates the kill tests' tables on the source: sysbench-like
// tables with a primary key and a secondary index, and one without any key
// (a chunk loaded twice would show there as duplicate rows). rows is the
// total over all tables. DM_FULLDATA_E2E_FULL=1 makes it 1M rows in 8
// tables (the size); the default keeps `make test` short.
func crashData(t *testing.T, src *mariadbtest.Instance) (tables []string, rows int) {
	t.Helper()
	n, per := 4, 50000
	if os.Getenv("DM_FULLDATA_E2E_FULL") == "1" {
		n, per = 8, 125000
	}
	src.Exec(t, "CREATE DATABASE "+fdDB)
	for i := 1; i < n; i++ {
		name := fmt.Sprintf("%s.sbtest%d", fdDB, i)
		src.Exec(t, "CREATE TABLE "+name+" (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL, KEY k (k))")
		src.Exec(t, fmt.Sprintf("INSERT INTO %s SELECT seq, seq %% 9973, REPEAT(MD5(seq), 3), MD5(seq + 1) FROM %s.seq_1_to_%d", name, fdDB, per))
		tables = append(tables, name)
	}
	name := fdDB + ".nk"
	src.Exec(t, "CREATE TABLE "+name+" (a INT, c CHAR(120))")
	src.Exec(t, fmt.Sprintf("INSERT INTO %s SELECT seq %% 100, REPEAT(MD5(seq), 3) FROM %s.seq_1_to_%d", name, fdDB, per))
	tables = append(tables, name)
	return tables, n * per
}

// TestFullDataSurvivesKill9 kills the worker with SIGKILL 3 times during the
// dump and 5 times during the load of a task in mode full; it ends Finished
// with the target equal to the source and every chunk recorded once.
func TestFullDataSurvivesKill9(t *testing.T) {
	f := startFullData(t, mariadbtest.Options{}, "", "")
	tables, total := crashData(t, f.src)
	f.c.ok("task", "start", writeFile(t, "kill.yaml", fmt.Sprintf(`name: kill
task-mode: full
target-database: {host: 127.0.0.1, port: %d, user: root, password: ""}
mysql-instances:
  - source-id: %s
    block-allow-list: only-fd
    mydumper-config-name: chunks
    loader-config-name: pool
block-allow-list:
  only-fd: {do-dbs: [%s]}
mydumpers:
  chunks: {threads: 2, rows: 500}
loaders:
  pool: {pool-size: 2}
`, f.tgt.Port(), fdSource, fdDB)))

	// Small chunks and two connections make each phase last long enough
	// (hundreds of chunk files and transactions) for a kill to land in it.
	for i := range 3 {
		d := f.waitSubtask("kill", 2*time.Minute, "the dump runs", func(d fdDoc) bool {
			return d.Stage == "Running" && d.Unit == "Dump" || d.Unit == "Load" || d.Stage == "Finished"
		})
		if d.Unit != "Dump" {
			t.Fatalf("the dump finished before kill %d of 3 could land in it: %v", i+1, d)
		}
		time.Sleep(time.Duration(rand.IntN(100)) * time.Millisecond)
		f.kill(fmt.Sprintf("during the dump (%d of 3)", i+1))
	}
	var loaded float64
	for i := range 5 {
		d := f.waitSubtask("kill", 3*time.Minute, "the load makes progress", func(d fdDoc) bool {
			return d.Stage == "Running" && d.Unit == "Load" && d.num("chunks-done") > loaded || d.Stage == "Finished"
		})
		if d.Stage == "Finished" {
			t.Fatalf("the load finished before kill %d of 5 could land in it: %v", i+1, d)
		}
		loaded = d.num("chunks-done")
		time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
		f.kill(fmt.Sprintf("during the load (%d of 5), %v of %v chunks loaded", i+1, loaded, d.num("chunks-total")))
	}
	f.waitSubtask("kill", 5*time.Minute, "the task finishes after the kills", func(d fdDoc) bool {
		if len(d.Errors) > 0 && !d.Errors[0].Resumable {
			t.Fatalf("subtask failed: %v", d)
		}
		return d.Stage == "Finished"
	})
	f.compareTables(tables)
	var chunks, rows int64
	if err := f.tgtDB.QueryRow("SELECT COUNT(*), SUM(row_count) FROM dm_meta.load_checkpoint WHERE task = 'kill'").Scan(&chunks, &rows); err != nil {
		t.Fatal(err)
	}
	if rows != int64(total) {
		t.Errorf("chunk records: %d chunks holding %d rows, want %d rows", chunks, rows, total)
	}
	t.Logf("%d rows in %d chunks, each recorded once, after 3 kills during the dump and 5 during the load", rows, chunks)
}

// kill kills the worker with SIGKILL and starts it again on its data dir.
func (f *fullData) kill(what string) {
	f.t.Helper()
	f.t.Logf("kill -9 %s", what)
	f.killWorker()
	f.restartWorker()
}

// compareTables compares tables row by row (ordered by their first two
// columns, which identify a row in every table of crashData) and by
// CHECKSUM TABLE.
func (f *fullData) compareTables(tables []string) {
	f.t.Helper()
	for _, name := range tables {
		q := "SELECT * FROM " + name + " ORDER BY 1, 2"
		if err := f.compare(name, q, q); err != nil {
			f.t.Error(err)
		}
	}
	q := "CHECKSUM TABLE " + strings.Join(tables, ", ")
	if err := f.compare("CHECKSUM TABLE", q, q); err != nil {
		f.t.Error(err)
	}
}

// TestLoadPauseResumeAndStop pauses a load and resumes it from the chunks
// recorded in the target, then stops (deletes) a second task during its
// load: the worker removes it cleanly and keeps serving.
func TestLoadPauseResumeAndStop(t *testing.T) {
	f := startFullData(t, mariadbtest.Options{FastCommit: true}, "", "")
	tables, _ := crashData(t, f.src)
	// file is the task file of task, which copies fdDB into schema.
	file := func(task, schema string) string {
		return writeFile(t, task+".yaml", fmt.Sprintf(`name: %s
task-mode: full
target-database: {host: 127.0.0.1, port: %d, user: root, password: ""}
mysql-instances:
  - source-id: %s
    block-allow-list: only-fd
    route-rules: [rename]
    mydumper-config-name: chunks
    loader-config-name: pool
block-allow-list:
  only-fd: {do-dbs: [%s]}
routes:
  rename: {schema-pattern: %s, target-schema: %s}
mydumpers:
  chunks: {threads: 2, rows: 1000}
loaders:
  pool: {pool-size: 2}
`, task, f.tgt.Port(), fdSource, fdDB, fdDB, schema))
	}
	f.c.ok("task", "start", file("pr", fdDB))
	f.waitSubtask("pr", 2*time.Minute, "the load has loaded a chunk", func(d fdDoc) bool {
		return d.Unit == "Load" && d.num("chunks-done") > 0
	})
	f.c.ok("task", "pause", "pr")
	f.waitSubtask("pr", 30*time.Second, "the subtask pauses", func(d fdDoc) bool { return d.Stage == "Paused" })
	count := func() int {
		var n int
		if err := f.tgtDB.QueryRow("SELECT COUNT(*) FROM dm_meta.load_checkpoint WHERE task = 'pr'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	paused := count()
	testutil.Consistently(t, 2*time.Second, "no chunk is loaded while paused", func() error {
		if n := count(); n != paused {
			return fmt.Errorf("%d chunk records, %d when paused", n, paused)
		}
		return nil
	})
	f.c.ok("task", "resume", "pr")
	d := f.waitSubtask("pr", 10*time.Second, "the subtask resumes in the load unit", func(d fdDoc) bool {
		return d.Stage == "Running" || d.Stage == "Finished"
	})
	if d.Stage == "Running" && d.Unit != "Load" {
		t.Fatalf("after resume the subtask runs %s, want Load (the dump was finished): %v", d.Unit, d)
	}
	f.waitSubtask("pr", 3*time.Minute, "the task finishes", func(d fdDoc) bool { return d.Stage == "Finished" })
	f.compareTables(tables)
	t.Logf("paused with %d chunks recorded; resumed and finished", paused)

	// A second task into another schema, stopped (stage deleted) mid-load.
	f.c.ok("task", "start", file("st", "fd_copy"))
	f.waitSubtask("st", 2*time.Minute, "the second task loads", func(d fdDoc) bool { return d.Unit == "Load" || d.Stage == "Finished" })
	f.c.ok("task", "stop", "st")
	testutil.Eventually(t, 30*time.Second, "the stopped subtask is removed from the worker", func() error {
		res, err := httpDo(http.MethodGet, f.w.url("/api/v1/subtasks/st"), "")
		if err != nil {
			return err
		}
		if res.code != http.StatusNotFound {
			return fmt.Errorf("GET /api/v1/subtasks/st: %d %s", res.code, res.body)
		}
		return nil
	})
	if res, err := httpDo(http.MethodGet, f.w.url("/healthz"), ""); err != nil || res.code != http.StatusOK {
		t.Fatalf("worker unhealthy after the stop: %v %v", res, err)
	}
}

// TestPrecheckReportsEveryProblem starts a task on a source with
// binlog_format=STATEMENT and a user without REPLICATION CLIENT: the subtask
// does not start and its one error lists both problems with their fixes;
// `dmctl task check` reports the same and exits 1.
func TestPrecheckReportsEveryProblem(t *testing.T) {
	src := mariadbtest.Options{ExtraConfig: []string{"binlog_format=STATEMENT"}}
	f := startFullData(t, src, "dm_weak", "weak_pw")
	f.src.Exec(t, "CREATE USER 'dm_weak'@'127.0.0.1' IDENTIFIED BY 'weak_pw'")
	f.src.Exec(t, "GRANT REPLICATION SLAVE, SELECT, RELOAD ON *.* TO 'dm_weak'@'127.0.0.1'")
	f.src.Exec(t, "CREATE DATABASE "+fdDB)
	f.src.Exec(t, "CREATE TABLE fd.t (id INT PRIMARY KEY, v INT)")
	task := f.taskFile("pre", "all", 1000)

	out := f.c.run("task", "check", task)
	if out.code != 1 || !strings.Contains(out.stdout+out.stderr, "binlog_format") || !strings.Contains(out.stdout+out.stderr, "REPLICATION CLIENT") {
		t.Errorf("dmctl task check: exit %d, want 1 naming binlog_format and REPLICATION CLIENT:\n%s\n%s", out.code, out.stdout, out.stderr)
	}

	f.c.ok("task", "start", task)
	d := f.waitSubtask("pre", time.Minute, "the subtask stops at the precheck", func(d fdDoc) bool {
		return d.Stage == "Paused" && len(d.Errors) > 0
	})
	msg := d.Errors[0].Message
	if d.Errors[0].Code != "precheck-failed" || d.Errors[0].Resumable ||
		!strings.Contains(msg, "binlog_format") || !strings.Contains(msg, "REPLICATION CLIENT") {
		t.Fatalf("want one non-resumable precheck-failed error naming binlog_format and REPLICATION CLIENT, got %v", d)
	}
	var n int
	if err := f.tgtDB.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'fd'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the subtask wrote %d tables into the target although its precheck failed", n)
	}
	t.Logf("precheck error: %s", msg)
}
