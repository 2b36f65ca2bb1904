package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// fkDB is the schema of DM's foreign_key case (testdata/foreign_key).
const fkDB = "foreign_key"

// fkTables are the tables prepare.sql leaves (t7 and t8 are dropped).
var fkTables = []string{"t1", "t2", "t3", "t4", "t5", "t6", "t9", "t10", "t11", "t12", "t13", "t14"}

// fkRound is one run of increment.sql: base @b for its keys and @p, a key
// an earlier round (or prepare.sql) left in t3, t9, t12 and t13.
func fkRound(r int) (base, prev int) {
	base = 10000 * (r + 1)
	if r == 0 {
		return base, 5
	}
	return base, 10000*r + 5
}

// TestForeignKeyCascades is DM's foreign_key case run against MariaDB: the
// source's ON DELETE/UPDATE CASCADE and SET NULL change child rows without
// writing them to the binlog, RESTRICT keys see the order of deletes, and
// some changes are made with foreign_key_checks off. In modes all and
// incremental, with relay on and off, the worker is killed with SIGKILL
// between rounds of increments (while it applies them), more rounds are
// written while it is down, and it restarts in safe mode over everything
// since its checkpoint (checkpoint-flush-interval is longer than the
// test). Every table must end equal to the source's.
func TestForeignKeyCascades(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		relay bool
	}{{"all", false}, {"all", true}, {"incremental", false}, {"incremental", true}} {
		t.Run(fmt.Sprintf("%s/relay=%t", tc.mode, tc.relay), func(t *testing.T) {
			f := startFullData(t, mariadbtest.Options{FastCommit: true}, "", "", fmt.Sprintf("enable-relay: %t", tc.relay))
			file, pos, _ := f.src.MasterStatus(t)
			if tc.mode == "all" {
				fkSQL(t, f.src, "prepare.sql", "")
			}
			f.c.ok("task", "start", writeFile(t, "fk.yaml", fmt.Sprintf(`name: fk
task-mode: %s
target-database: {host: 127.0.0.1, port: %d, user: root, password: ""}
mysql-instances:
  - source-id: %s
    meta: {binlog-name: %s, binlog-pos: %d}
    block-allow-list: only-fk
    syncer-config-name: parallel
block-allow-list:
  only-fk: {do-dbs: [%s]}
syncers:
  parallel: {worker-count: 4, batch: 20, checkpoint-flush-interval: 600}
`, tc.mode, f.tgt.Port(), fdSource, file, pos, fkDB)))
			if tc.mode == "incremental" {
				fkSQL(t, f.src, "prepare.sql", "")
			}
			f.waitSubtask("fk", 2*time.Minute, "the task syncs", func(d fdDoc) bool {
				if len(d.Errors) > 0 {
					t.Fatalf("subtask failed: %v", d)
				}
				return d.Stage == "Running" && d.Unit == "Sync"
			})
			fkWaitEqual(t, f, "after prepare.sql")

			round := 0
			write := func(n int) {
				for ; n > 0; n-- {
					base, prev := fkRound(round)
					fkSQL(t, f.src, "increment.sql", fmt.Sprintf("SET @b = %d, @p = %d;", base, prev))
					round++
				}
			}
			// Rounds while the worker runs; kill it once it has applied
			// some, likely in the middle of the rest.
			write(4)
			testutil.Eventually(t, time.Minute, "the target has some of the increments", func() error {
				var n int
				if err := f.tgtDB.QueryRow("SELECT COUNT(*) FROM foreign_key.t1 WHERE id >= 10000").Scan(&n); err != nil {
					return err
				}
				if n == 0 {
					return fmt.Errorf("no increment on the target yet")
				}
				return nil
			})
			f.killWorker()
			write(2)
			behind := fkReplayStretch(t, f.tgtDB)
			f.restartWorker()
			write(2)
			fkWaitEqual(t, f, fmt.Sprintf("after %d rounds and a kill -9 (restart in safe mode from %s)", round, behind))
			d := f.waitSubtask("fk", 10*time.Second, "the task still syncs", func(d fdDoc) bool { return true })
			if d.Stage != "Running" || len(d.Errors) > 0 {
				t.Errorf("subtask %v, want Running without errors", d)
			}
		})
	}
}

// fkSQL runs testdata/foreign_key/name on the source with the mariadb
// client, after the statements in pre (user variables).
func fkSQL(t *testing.T, src *mariadbtest.Instance, name, pre string) {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", "foreign_key", name))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mariadbtest.Program(t, "mariadb"), src.ClientArgs()...)
	cmd.Stdin = strings.NewReader(pre + "\nsource " + path + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mariadb %s: %v\n%s", name, err, out)
	}
}

// fkReplayStretch returns the saved checkpoint and the highest safe point
// of the task on the target, and fails unless the safe point is past the
// checkpoint: the restart then replays that stretch, cascades included, in
// safe mode.
func fkReplayStretch(t *testing.T, tgt *sql.DB) string {
	t.Helper()
	var cpName, spName string
	var cpPos, spPos uint32
	if err := tgt.QueryRow("SELECT binlog_name, binlog_pos FROM dm_meta.syncer_checkpoint WHERE task = 'fk'").Scan(&cpName, &cpPos); err != nil {
		t.Fatalf("read the checkpoint: %v", err)
	}
	if err := tgt.QueryRow("SELECT binlog_name, binlog_pos FROM dm_meta.syncer_safe_point WHERE task = 'fk' "+
		"ORDER BY binlog_name DESC, binlog_pos DESC LIMIT 1").Scan(&spName, &spPos); err != nil {
		t.Fatalf("read the safe points: %v", err)
	}
	if spName < cpName || spName == cpName && spPos <= cpPos {
		t.Fatalf("safe point %s:%d is not past checkpoint %s:%d: the restart would replay nothing", spName, spPos, cpName, cpPos)
	}
	return fmt.Sprintf("checkpoint %s:%d to safe point %s:%d", cpName, cpPos, spName, spPos)
}

// fkWaitEqual waits until CHECKSUM TABLE of every table of the case is the
// same on the target as on the source, then compares every row.
func fkWaitEqual(t *testing.T, f *fullData, what string) {
	t.Helper()
	names := make([]string, len(fkTables))
	for i, tb := range fkTables {
		names[i] = fkDB + "." + tb
	}
	want, err := checksumTables(f.srcDB, names, 10*time.Second)
	if err != nil {
		t.Fatalf("source checksums: %v", err)
	}
	var got map[string]sql.NullString
	err = testutil.Poll(time.Minute, func() error {
		if got, err = checksumTables(f.tgtDB, names, 10*time.Second); err != nil {
			return err
		}
		for name, sum := range want {
			if got[name] != sum {
				return fmt.Errorf("%s: checksum %v on the target, %v on the source", name, got[name], sum)
			}
		}
		return nil
	})
	var diffs []string
	for _, tb := range fkTables {
		q := "SELECT * FROM " + fkDB + "." + tb + " ORDER BY id"
		src, serr := readRows(f.srcDB, q)
		tgt, terr := readRows(f.tgtDB, q)
		if serr != nil || terr != nil {
			t.Fatalf("%s: source %v, target %v", q, serr, terr)
		}
		if d := diffRows(src, tgt, 5); d != "" {
			diffs = append(diffs, fmt.Sprintf("%s.%s (%d rows on the source, %d on the target):\n%s", fkDB, tb, len(src), len(tgt), d))
		}
	}
	if err != nil || len(diffs) > 0 {
		st, serr := getSubtask[fdDoc](f.w, "fk")
		t.Fatalf("%s: the target differs from the source (%v):\n%s\nsubtask %v %v", what, err, strings.Join(diffs, ""), st, serr)
	}
	t.Logf("%s: the %d tables are equal on source and target", what, len(fkTables))
}
