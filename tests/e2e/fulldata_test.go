package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/tests/typestest"
)

// Names of the full-data tests' cluster.
const (
	fdSource = "mysql-01"
	fdWorker = "w1"
	fdDB     = "fd"
	fdMerged = "fd_merged"
)

// fullData is the replication tests' set-up (a source and a target
// MariaDB, an etcd, one dm-worker process bound to the source), for tasks in
// modes full and all.
type fullData struct{ *replication }

// startFullData starts the servers and the worker and creates the source
// (connecting as user/password; "" = root; extra are more lines of the
// source file).
func startFullData(t *testing.T, srcOpts mariadbtest.Options, user, password string, extra ...string) *fullData {
	t.Helper()
	return startFullDataTo(t, srcOpts, mariadbtest.Options{}, user, password, extra...)
}

// startFullDataTo is startFullData with the target's options too.
func startFullDataTo(t *testing.T, srcOpts, tgtOpts mariadbtest.Options, user, password string, extra ...string) *fullData {
	t.Helper()
	srcOpts.Name, srcOpts.Binlog, tgtOpts.Name = "source", true, "target"
	f := &fullData{&replication{t: t, src: mariadbtest.Start(t, srcOpts), tgt: mariadbtest.Start(t, tgtOpts), c: newEtcdCluster(t)}}
	f.srcDB, f.tgtDB = f.src.DB(t), f.tgt.DB(t)
	f.wopts = workerOptions{name: fdWorker, endpoints: f.c.endpoints, prefix: f.c.prefix, dataDir: t.TempDir()}
	f.w = startWorker(t, f.wopts)
	f.c.waitWorkerAlive(fdWorker)
	if user == "" {
		user = mariadbtest.RootUser
	}
	f.c.ok("source", "create", writeFile(t, "source.yaml", fmt.Sprintf(`source-id: %s
flavor: mariadb
from: {host: 127.0.0.1, port: %d, user: %s, password: %q}
checker: {check-enable: true, backoff-min: 200ms, backoff-max: 1s}
%s`, fdSource, f.src.Port(), user, password, strings.Join(append(extra, ""), "\n"))), "--worker", fdWorker)
	return f
}

// taskFile writes a task file for task in mode with the full-data tests'
// rules: only fdDB, orders_* merged into fdMerged.orders, small chunks.
func (f *fullData) taskFile(task, mode string, rows int) string {
	return writeFile(f.t, task+".yaml", fmt.Sprintf(`name: %s
task-mode: %s
target-database: {host: 127.0.0.1, port: %d, user: root, password: ""}
mysql-instances:
  - source-id: %s
    block-allow-list: only-fd
    route-rules: [merge-orders, merge-orders-schema]
    syncer-config-name: small
    mydumper-config-name: chunks
    loader-config-name: pool
block-allow-list:
  only-fd: {do-dbs: [%s]}
routes:
  merge-orders: {schema-pattern: %s, table-pattern: "orders_*", target-schema: %s, target-table: orders}
  merge-orders-schema: {schema-pattern: %s, target-schema: %s}
syncers:
  small: {worker-count: 4, batch: 50, checkpoint-flush-interval: 1}
mydumpers:
  chunks: {threads: 4, rows: %d}
loaders:
  pool: {pool-size: 4}
`, task, mode, f.tgt.Port(), fdSource, fdDB, fdDB, fdMerged, fdDB, fdDB, rows))
}

// waitSubtask waits up to d until task's status satisfies cond.
func (f *fullData) waitSubtask(task string, d time.Duration, what string, cond func(fdDoc) bool) fdDoc {
	f.t.Helper()
	return waitSubtask(f.t, f.w, task, d, what, cond)
}

// fdDoc is the subtask status the full-data tests read.
type fdDoc struct {
	Name   string `json:"name"`
	Stage  string `json:"stage"`
	Unit   string `json:"unit"`
	Errors []struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Resumable bool   `json:"resumable"`
	} `json:"errors"`
	Progress map[string]any `json:"progress"`
}

func (d fdDoc) String() string {
	b, _ := json.Marshal(d)
	return string(b)
}

// num is a numeric progress field (0 when absent).
func (d fdDoc) num(name string) float64 {
	v, _ := d.Progress[name].(float64)
	return v
}

// createFullDataTables creates the nine tables of the full-data tests on
// the source and fills them: every type, large BLOBs, no key, a composite
// text key, a unique key only, two shards merged by a route, a name that
// needs quoting, and a bigger table split into many chunks (seqRows rows).
func createFullDataTables(t *testing.T, src *mariadbtest.Instance, seqRows int) {
	t.Helper()
	src.Exec(t, "CREATE DATABASE "+fdDB)
	src.Exec(t, typestest.DDL(fdDB))
	ctx := context.Background()
	conn, err := src.DB(t).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// USE: the seq_1_to_N sequence tables need a current database.
	stmts := append([]string{typestest.SQLMode, "USE " + fdDB}, typestest.Inserts(fdDB)...)
	stmts = append(stmts,
		"CREATE TABLE fd.big (id INT PRIMARY KEY, b LONGBLOB, t LONGTEXT)",
		"INSERT INTO fd.big SELECT seq, RANDOM_BYTES(1024), REPEAT('é', 300000) FROM seq_1_to_3",
		"UPDATE fd.big SET b = REPEAT(CONCAT(X'00FF09', '\\\\', X'0A0D'), 400000) WHERE id = 2",
		"CREATE TABLE fd.nokey (a INT, b VARCHAR(20), c DOUBLE)",
		"INSERT INTO fd.nokey SELECT seq % 100, IF(seq % 7 = 0, NULL, CONCAT('v\\t', seq % 13)), seq / 3 FROM seq_1_to_3000",
		"CREATE TABLE fd.ck (k1 VARCHAR(10), k2 INT, v TEXT, PRIMARY KEY (k1, k2)) DEFAULT CHARSET=utf8mb4",
		"INSERT INTO fd.ck SELECT CONCAT('ключ', seq % 17), seq, REPEAT('ß', seq % 50) FROM seq_1_to_5000",
		"CREATE TABLE fd.uk (id INT NOT NULL, v VARCHAR(30), UNIQUE KEY (id))",
		"INSERT INTO fd.uk SELECT seq * 3, CONCAT('u', seq) FROM seq_1_to_2500",
		"CREATE TABLE fd.orders_1 (id INT PRIMARY KEY, qty INT, note VARCHAR(40))",
		"CREATE TABLE fd.orders_2 (id INT PRIMARY KEY, qty INT, note VARCHAR(40))",
		"INSERT INTO fd.orders_1 SELECT seq * 2, seq % 9, 'one' FROM seq_1_to_4000",
		"INSERT INTO fd.orders_2 SELECT seq * 2 + 1, seq % 11, 'two' FROM seq_1_to_4000",
		// Names that need quoting everywhere: a backtick, a space, a dot, a dash.
		"CREATE TABLE fd.`we``ird tab.le` (`k ey` VARCHAR(20) PRIMARY KEY, `v-al` INT) DEFAULT CHARSET=utf8mb4",
		"INSERT INTO fd.`we``ird tab.le` SELECT CONCAT('ключ ', seq), seq FROM seq_1_to_2500",
		"CREATE TABLE fd.seq (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT, s VARCHAR(64), KEY (v))",
		fmt.Sprintf("INSERT INTO fd.seq (v, s) SELECT seq %% 1000, MD5(seq) FROM seq_1_to_%d", seqRows),
	)
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", clip(q), err)
		}
	}
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// fdCompare is one comparison of the full-data tests: rows of the source
// query against rows of the target query.
type fdCompare struct{ name, source, target string }

// fdComparisons lists what must be equal between source and target.
var fdComparisons = []fdCompare{
	{"types", "SELECT * FROM fd.types ORDER BY id", "SELECT * FROM fd.types ORDER BY id"},
	{"big", "SELECT * FROM fd.big ORDER BY id", "SELECT * FROM fd.big ORDER BY id"},
	{"nokey", "SELECT * FROM fd.nokey ORDER BY a, b, c", "SELECT * FROM fd.nokey ORDER BY a, b, c"},
	{"ck", "SELECT * FROM fd.ck ORDER BY k1, k2", "SELECT * FROM fd.ck ORDER BY k1, k2"},
	{"uk", "SELECT * FROM fd.uk ORDER BY id", "SELECT * FROM fd.uk ORDER BY id"},
	{"orders", "SELECT * FROM fd.orders_1 UNION ALL SELECT * FROM fd.orders_2 ORDER BY id", "SELECT * FROM fd_merged.orders ORDER BY id"},
	{"seq", "SELECT * FROM fd.seq ORDER BY id", "SELECT * FROM fd.seq ORDER BY id"},
	{"weird", "SELECT * FROM fd.`we``ird tab.le` ORDER BY 1", "SELECT * FROM fd.`we``ird tab.le` ORDER BY 1"},
}

// fdChecksumTables are compared with CHECKSUM TABLE too (same name on both
// sides).
var fdChecksumTables = []string{"fd.types", "fd.big", "fd.nokey", "fd.ck", "fd.uk", "fd.seq", "fd.`we``ird tab.le`"}

// compareFullData compares every table row by row and by CHECKSUM TABLE;
// it returns the first difference (nil when equal).
func (f *fullData) compareFullData() error {
	for _, c := range fdComparisons {
		if err := f.compare(c.name, c.source, c.target); err != nil {
			return err
		}
	}
	q := "CHECKSUM TABLE " + strings.Join(fdChecksumTables, ", ")
	return f.compare("CHECKSUM TABLE", q, q)
}

// compare reads source query sq on the source and tq on the target and
// returns their first differences (nil when the rows are equal).
func (f *fullData) compare(what, sq, tq string) error {
	want, err := readRows(f.srcDB, sq)
	if err != nil {
		return fmt.Errorf("source %s: %w", what, err)
	}
	got, err := readRows(f.tgtDB, tq)
	if err != nil {
		return fmt.Errorf("target %s: %w", what, err)
	}
	if diff := diffRows(want, got, 5); diff != "" {
		return fmt.Errorf("%s: target differs (%d rows on the source, %d on the target):\n%s", what, len(want), len(got), diff)
	}
	return nil
}

// TestFullModeCopiesEveryTable runs a task in mode full: the subtask goes
// Dump → Load → Finished and the target equals the source, every column
// type, large BLOBs, a table without a key and a routed merge included.
func TestFullModeCopiesEveryTable(t *testing.T) {
	f := startFullData(t, mariadbtest.Options{FastCommit: true}, "", "")
	createFullDataTables(t, f.src, 20000)
	f.c.ok("task", "start", f.taskFile("full1", "full", 1000))

	units := map[string]bool{}
	f.waitSubtask("full1", 3*time.Minute, "the full task finishes", func(d fdDoc) bool {
		units[d.Unit] = true
		if len(d.Errors) > 0 {
			t.Fatalf("subtask failed: %v", d)
		}
		return d.Stage == "Finished"
	})
	if err := f.compareFullData(); err != nil {
		t.Fatal(err)
	}
	if !units["Load"] {
		t.Errorf("status never showed the Load unit (saw %v)", units)
	}
	var chunks, rows int64
	if err := f.tgtDB.QueryRow("SELECT COUNT(*), COALESCE(SUM(row_count), 0) FROM dm_meta.load_checkpoint WHERE task = 'full1'").Scan(&chunks, &rows); err != nil {
		t.Fatal(err)
	}
	if want := int64(5 + 3 + 3000 + 5000 + 2500 + 8000 + 2500 + 20000); rows != want {
		t.Errorf("load records: %d chunks with %d rows, want %d rows", chunks, rows, want)
	}
	t.Logf("full mode: %d chunks, %d rows; units seen %v", chunks, rows, units)
	out := f.c.ok("task", "status", "full1")
	if !strings.Contains(out.stdout, "Finished") {
		t.Errorf("dmctl task status does not show Finished:\n%s", out.stdout)
	}
}

// TestAllModeHandsOverToSync runs a task in mode all while a workload
// writes to the source: the dump's snapshot, the load and sync from the
// snapshot's location (in safe mode) end with the target equal to the
// source, with the sync unit reading the source itself and through the
// relay.
func TestAllModeHandsOverToSync(t *testing.T) {
	for _, relay := range []bool{false, true} {
		t.Run(fmt.Sprintf("relay=%t", relay), func(t *testing.T) {
			f := startFullData(t, mariadbtest.Options{FastCommit: true}, "", "", fmt.Sprintf("enable-relay: %t", relay))
			createFullDataTables(t, f.src, 60000)
			w := startFDWorkload(t, f.srcDB)
			f.c.ok("task", "start", f.taskFile("all1", "all", 2000))

			var sawDump bool
			f.waitSubtask("all1", 3*time.Minute, "the all task reaches Sync", func(d fdDoc) bool {
				if len(d.Errors) > 0 {
					t.Fatalf("subtask failed: %v", d)
				}
				sawDump = sawDump || d.Unit == "Dump" || d.Unit == "Load"
				return d.Stage == "Running" && d.Unit == "Sync"
			})
			time.Sleep(time.Second) // writes keep coming while sync runs
			n := w.stop()
			if n == 0 {
				t.Fatal("the workload wrote nothing")
			}
			testutil.Eventually(t, 2*time.Minute, "the target equals the source after the workload", f.compareFullData)
			t.Logf("all mode: %d workload transactions during dump, load and sync; dump/load seen in status: %v", n, sawDump)
		})
	}
}

// fdWorkload writes to fd.seq, fd.ck and fd.orders_1 until stopped.
type fdWorkload struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	n      atomic.Int64
	err    error
}

func startFDWorkload(t *testing.T, db *sql.DB) *fdWorkload {
	ctx, cancel := context.WithCancel(context.Background())
	w := &fdWorkload{cancel: cancel}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for i := 1; ctx.Err() == nil; i++ {
			stmts := []string{
				fmt.Sprintf("INSERT INTO fd.seq (v, s) VALUES (%d, 'w%d')", i%1000, i),
				fmt.Sprintf("UPDATE fd.seq SET s = CONCAT(s, '+') WHERE id = %d", 1+(i*7919)%5000),
				fmt.Sprintf("DELETE FROM fd.seq WHERE id = %d", 5000+(i*104729)%10000),
				fmt.Sprintf("REPLACE INTO fd.ck VALUES ('w%d', %d, 'x')", i%50, i),
				fmt.Sprintf("UPDATE fd.orders_1 SET qty = qty + 1 WHERE id = %d", 2*(1+i%4000)),
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				break
			}
			for _, q := range stmts {
				if _, err = tx.ExecContext(ctx, q); err != nil {
					break
				}
			}
			if err == nil {
				err = tx.Commit()
			} else {
				_ = tx.Rollback()
			}
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
					w.err = err
					t.Errorf("workload: %v", err)
				}
				break
			}
			w.n.Add(1)
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

// stop ends the workload and returns the number of committed transactions.
func (w *fdWorkload) stop() int64 {
	w.cancel()
	w.wg.Wait()
	return w.n.Load()
}

// TestMinimalJSONAllMode: a master other than dmctl writes a task in mode
// all as minimal JSON (no block-allow list, mydumper, loader or
// meta-schema): the defaults apply, every non-system schema is copied and
// the subtask goes on syncing.
func TestMinimalJSONAllMode(t *testing.T) {
	f := startFullData(t, mariadbtest.Options{FastCommit: true}, "", "")
	createFullDataTables(t, f.src, 5000)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for key, value := range map[string]string{
		"/task/config/" + fdSource + "/min": fmt.Sprintf(`{"name":"min","source-id":%q,"task-mode":"all",`+
			`"target-database":{"host":"127.0.0.1","port":%d,"user":"root"}}`, fdSource, f.tgt.Port()),
		"/stage/subtask/" + fdSource + "/min": `{"expect":"Running"}`,
	} {
		if _, err := f.c.direct.Put(ctx, f.c.prefix+key, value); err != nil {
			t.Fatal(err)
		}
	}
	f.waitSubtask("min", 2*time.Minute, "the minimal task reaches Sync", func(d fdDoc) bool {
		if len(d.Errors) > 0 {
			t.Fatalf("subtask failed: %v", d)
		}
		return d.Unit == "Sync" && d.Stage == "Running"
	})
	f.src.Exec(t, "INSERT INTO fd.seq (v, s) VALUES (1, 'after the load')")
	// Without routes the shards keep their names.
	q := "SELECT * FROM fd.orders_1 ORDER BY id"
	testutil.Eventually(t, time.Minute, "the target equals the source", func() error {
		if err := f.compare("orders_1", q, q); err != nil {
			return err
		}
		q := "CHECKSUM TABLE " + strings.Join(fdChecksumTables, ", ")
		return f.compare("CHECKSUM TABLE", q, q)
	})
}
