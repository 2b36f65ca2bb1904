package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// TestDmctlEverydayCommands runs DM's everyday commands against a real
// worker with relay on: a DDL the target rejects stops the sync unit until
// `dmctl task handle-error TASK skip`, after which rows replicate again;
// `dmctl relay purge --inactive` removes the relay files nobody reads any
// more; `dmctl task config` shows what etcd holds.
func TestDmctlEverydayCommands(t *testing.T) {
	r := startReplication(t, replOptions{relay: true})

	// The column exists on the target already: the target rejects the DDL.
	r.tgt.Exec(t, "ALTER TABLE crash.accounts ADD COLUMN extra INT NULL")
	r.src.Exec(t, "ALTER TABLE crash.accounts ADD COLUMN extra INT NULL")
	r.waitSubtask(30*time.Second, "the subtask stops on the rejected DDL", func(d subtaskDoc) bool {
		return d.Stage == "Paused" && len(d.Errors) > 0 && d.Errors[0].Code == "sync-ddl"
	})
	out := r.c.ok("task", "handle-error", replTask, "skip").stdout
	if !strings.Contains(out, "skip recorded; subtask resumed") {
		t.Errorf("handle-error output:\n%s", out)
	}
	r.src.Exec(t, "INSERT INTO crash.accounts (id, owner, balance, flags, kind, touched, extra) VALUES (424242, 'after-skip', 1, 0, 'basic', NOW(6), 7)")
	testutil.Eventually(t, 30*time.Second, "the row written after the skipped DDL reaches the target", func() error {
		var n int
		if err := r.tgtDB.QueryRow("SELECT COUNT(*) FROM crash.accounts WHERE id = 424242 AND extra = 7").Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%d such rows on the target", n)
		}
		return nil
	})
	if d, err := r.subtask(); err != nil || !d.syncing() {
		t.Errorf("subtask after handle-error: %v (%v), want syncing", d, err)
	}
	// Nothing is stuck any more.
	res := r.c.run("task", "handle-error", replTask, "skip")
	if res.code != 1 || !strings.Contains(res.stdout, "no failed DDL to skip") {
		t.Errorf("handle-error with nothing stuck: exit %d\nstdout %s\nstderr %s", res.code, res.stdout, res.stderr)
	}

	// Rotate the source's binlog a few times; relay follows, the subtask
	// reads the newest file, so the older relay files are inactive.
	for i := 0; i < 3; i++ {
		r.src.Exec(t, "FLUSH BINARY LOGS")
		r.src.Exec(t, "INSERT INTO crash.accounts (id, owner, balance, flags, kind, touched) VALUES (?, 'rot', 1, 0, 'basic', NOW(6))", 500000+i)
	}
	file, _, _ := r.src.MasterStatus(t)
	r.waitSubtask(30*time.Second, "the subtask reads the source's newest binlog file "+file, func(d subtaskDoc) bool {
		return strings.HasPrefix(d.Progress.Checkpoint, file+":")
	})
	var purge struct {
		Source string   `json:"source"`
		Worker string   `json:"worker"`
		Purged []string `json:"purged"`
	}
	r.c.json(&purge, "relay", "purge", replSource, "--inactive")
	if purge.Source != replSource || purge.Worker != replWorker || len(purge.Purged) == 0 {
		t.Errorf("relay purge --inactive = %+v, want some files purged", purge)
	}
	for _, f := range purge.Purged {
		if f >= file {
			t.Errorf("relay purge removed %s, not older than the file in use %s", f, file)
		}
	}

	cfg := r.c.ok("task", "config", replTask).stdout
	for _, want := range []string{"# task " + replTask + ", source " + replSource, "task-mode: incremental", "do-dbs:\n  - crash"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("task config lacks %q:\n%s", want, cfg)
		}
	}
}

// TestDmctlStartTime starts an incremental task with --start-time and no
// meta in the task file: the row written before that time stays off the
// target, the rows written at and after it arrive.
func TestDmctlStartTime(t *testing.T) {
	src, tgt := mariadbtest.StartSource(t), mariadbtest.StartTarget(t)
	srcDB, tgtDB := src.DB(t), tgt.DB(t)
	c := newEtcdCluster(t)
	startWorker(t, workerOptions{name: "w1", endpoints: c.endpoints, prefix: c.prefix})
	c.waitWorkerAlive("w1")
	c.ok("source", "create", writeFile(t, "source.yaml", fmt.Sprintf(
		"source-id: mysql-01\nfrom: {host: 127.0.0.1, port: %d, user: root, password: \"\"}\n", src.Port())), "--worker", "w1")
	for _, in := range []*mariadbtest.Instance{src, tgt} {
		in.Exec(t, "CREATE DATABASE st")
		in.Exec(t, "CREATE TABLE st.t (id INT PRIMARY KEY)")
	}
	src.Exec(t, "INSERT INTO st.t VALUES (1)")
	serverNow := func() int64 {
		var n int64
		if err := srcDB.QueryRow("SELECT UNIX_TIMESTAMP()").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := serverNow()
	var at int64
	testutil.Eventually(t, 10*time.Second, "the source's clock moves to the next second", func() error {
		if at = serverNow(); at <= before {
			return fmt.Errorf("the source's clock is at %d", at)
		}
		return nil
	})
	src.Exec(t, "INSERT INTO st.t VALUES (2)")

	c.ok("task", "start", writeFile(t, "task.yaml", fmt.Sprintf(`name: st
task-mode: incremental
target-database: {host: 127.0.0.1, port: %d, user: root, password: ""}
mysql-instances:
  - source-id: mysql-01
    block-allow-list: only-st
block-allow-list:
  only-st: {do-dbs: [st]}
`, tgt.Port())), "--start-time", time.Unix(at, 0).UTC().Format(time.RFC3339))
	src.Exec(t, "INSERT INTO st.t VALUES (3)")
	ids := func() string {
		rows, err := tgtDB.Query("SELECT id FROM st.t ORDER BY id")
		if err != nil {
			return err.Error()
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var id string
			if rows.Scan(&id) == nil {
				out = append(out, id)
			}
		}
		return strings.Join(out, ",")
	}
	testutil.Eventually(t, 30*time.Second, "rows 2 and 3 (at and after --start-time) on the target, row 1 not", func() error {
		if got := ids(); got != "2,3" {
			return fmt.Errorf("rows on the target: %q", got)
		}
		return nil
	})
}
