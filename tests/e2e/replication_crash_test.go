package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/tests/tlstest"
)

// Names of the replication tests' cluster.
const (
	replSource = "mysql-01"
	replTask   = "crash"
	replWorker = "w1"
)

// replication is a source and a target MariaDB, an etcd, one dm-worker
// process bound to the source and an incremental task that replicates
// crashDB from the source's position at set-up time.
type replication struct {
	t            *testing.T
	c            *cluster
	src, tgt     *mariadbtest.Instance
	srcDB, tgtDB *sql.DB
	wopts        workerOptions // same name and data dir on every restart
	w            *workerProc   // the current process
	tls          tlstest.Files // with replOptions.tls: the certificates
}

// replOptions choose what startReplication sets up.
type replOptions struct {
	// relay is the source's enable-relay.
	relay bool
	// tls makes the source and the target accept only TLS
	// (require_secure_transport=ON) with certificates of a new tlstest CA
	// (in replication.tls); the source's from.security and the task's
	// target-database.security name sourceCA and targetCA as ssl-ca.
	tls                bool
	sourceCA, targetCA func(tlstest.Files) string
	// noWait: create the tables on the source but do not wait for them on
	// the target, for set-ups that are meant to fail.
	noWait bool
	// syncer is the task's syncer config (YAML flow mapping); empty: 4
	// workers, batches of 20, checkpoints every second.
	syncer string
}

// startReplication sets everything up through dmctl, creates crashTables
// on the source (after the task's start position, so the DDL replicates
// too) and, unless o.noWait, waits until they exist on the target.
func startReplication(t *testing.T, o replOptions) *replication {
	t.Helper()
	// Small binlog files: the workload rotates them every second or so,
	// so kills also hit the reader and the relay writer at rotations.
	srcOpts := mariadbtest.Options{Name: "source", Binlog: true, MaxBinlogSize: 256 << 10}
	tgtOpts := mariadbtest.Options{Name: "target"}
	var files tlstest.Files
	// Extra fields of the source's from and of the task's target-database.
	var fromTLS, targetTLS string
	if o.tls {
		files = tlstest.Generate(t, tlstest.Options{})
		serverTLS := &mariadbtest.TLS{CA: files.CA, Cert: files.ServerCert, Key: files.ServerKey, Require: true}
		srcOpts.Name, srcOpts.TLS = "tls-source", serverTLS
		tgtOpts.Name, tgtOpts.TLS = "tls-target", serverTLS
		fromTLS = fmt.Sprintf(", security: {ssl-ca: %q, cert-allowed-cn: [%s]}", o.sourceCA(files), tlstest.ServerCN)
		targetTLS = fmt.Sprintf(`, max-allowed-packet: 16MiB,
  session: {sql_mode: "NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION", innodb_lock_wait_timeout: "20"},
  security: {ssl-ca: %q}`, o.targetCA(files))
	}
	syncerCfg := o.syncer
	if syncerCfg == "" {
		syncerCfg = "{worker-count: 4, batch: 20, checkpoint-flush-interval: 1}"
	}
	r := &replication{t: t, src: mariadbtest.Start(t, srcOpts), tgt: mariadbtest.Start(t, tgtOpts), c: newEtcdCluster(t), tls: files}
	r.srcDB, r.tgtDB = r.src.DB(t), r.tgt.DB(t)
	r.wopts = workerOptions{name: replWorker, endpoints: r.c.endpoints, prefix: r.c.prefix, dataDir: t.TempDir()}
	r.w = startWorker(t, r.wopts)
	r.c.waitWorkerAlive(replWorker)

	file, pos, _ := r.src.MasterStatus(t)
	r.c.ok("source", "create", writeFile(t, "source.yaml", fmt.Sprintf(`source-id: %s
flavor: mariadb
enable-relay: %t
from: {host: 127.0.0.1, port: %d, user: root, password: ""%s}
checker: {check-enable: true, backoff-min: 200ms, backoff-max: 1s}
`, replSource, o.relay, r.src.Port(), fromTLS)), "--worker", replWorker)
	r.c.ok("task", "start", writeFile(t, "task.yaml", fmt.Sprintf(`name: %s
task-mode: incremental
target-database: {host: 127.0.0.1, port: %d, user: root, password: ""%s}
mysql-instances:
  - source-id: %s
    meta: {binlog-name: %s, binlog-pos: %d}
    block-allow-list: only-crash
    syncer-config-name: small
block-allow-list:
  only-crash: {do-dbs: [%s]}
syncers:
  small: %s
`, replTask, r.tgt.Port(), targetTLS, replSource, file, pos, crashDB, syncerCfg)))

	r.src.Exec(t, "CREATE DATABASE "+crashDB)
	for _, tb := range crashTables {
		r.src.Exec(t, tb.ddl)
	}
	if !o.noWait {
		testutil.Eventually(t, 30*time.Second, "the task runs and created every table on the target", func() error {
			var n int
			if err := r.tgtDB.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", crashDB).Scan(&n); err != nil {
				return err
			}
			if n != len(crashTables) {
				return fmt.Errorf("%d of %d tables on the target", n, len(crashTables))
			}
			return nil
		})
	}
	return r
}

// subtaskDoc is the part of GET /api/v1/subtasks/{task} the tests read.
type subtaskDoc struct {
	Name   string `json:"name"`
	Stage  string `json:"stage"`
	Unit   string `json:"unit"`
	Errors []struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Resumable bool   `json:"resumable"`
	} `json:"errors"`
	Progress struct {
		Binlog       string `json:"binlog"`
		Checkpoint   string `json:"checkpoint"`
		Inserts      uint64 `json:"inserts"`
		Updates      uint64 `json:"updates"`
		Deletes      uint64 `json:"deletes"`
		Transactions uint64 `json:"transactions"`
		SafeMode     bool   `json:"safe-mode"`
	} `json:"progress"`
}

// syncing reports whether the sync unit runs without errors.
func (d subtaskDoc) syncing() bool {
	return d.Stage == "Running" && d.Unit == "Sync" && len(d.Errors) == 0
}

func (d subtaskDoc) String() string {
	b, _ := json.Marshal(d)
	return string(b)
}

// subtask reads the task's subtask status from the current worker; an
// error when the worker does not answer or has no such subtask (yet).
func (r *replication) subtask() (subtaskDoc, error) { return getSubtask[subtaskDoc](r.w, replTask) }

// waitSubtask waits up to d until the subtask's status satisfies cond and
// returns that status; a timeout prints the last status read (or why none
// could be read).
func (r *replication) waitSubtask(d time.Duration, what string, cond func(subtaskDoc) bool) subtaskDoc {
	r.t.Helper()
	return waitSubtask(r.t, r.w, replTask, d, what, cond)
}

// getSubtask reads GET /api/v1/subtasks/{task} of worker w into a T; an
// error when the worker does not answer or has no such subtask (yet).
func getSubtask[T any](w *workerProc, task string) (T, error) {
	var d T
	res, err := httpDo(http.MethodGet, w.url("/api/v1/subtasks/"+task), "")
	if err != nil {
		return d, err
	}
	if res.code != http.StatusOK {
		return d, fmt.Errorf("GET /api/v1/subtasks/%s: %d %s", task, res.code, res.body)
	}
	if err := json.Unmarshal([]byte(res.body), &d); err != nil {
		return d, fmt.Errorf("GET /api/v1/subtasks/%s: %w\n%s", task, err, res.body)
	}
	return d, nil
}

// waitSubtask waits up to d until task's status on w satisfies cond and
// returns that status; a timeout prints the last status read (or why none
// could be read).
func waitSubtask[T fmt.Stringer](t *testing.T, w *workerProc, task string, d time.Duration, what string, cond func(T) bool) T {
	t.Helper()
	var ok T
	testutil.Eventually(t, d, what, func() error {
		st, err := getSubtask[T](w, task)
		if err != nil {
			return err
		}
		if !cond(st) {
			return fmt.Errorf("subtask %v", st)
		}
		ok = st
		return nil
	})
	return ok
}

// killWorker kills the worker process with SIGKILL and waits for it.
func (r *replication) killWorker() {
	r.t.Helper()
	r.w.signal(r.t, syscall.SIGKILL)
	code, err := r.w.wait(10 * time.Second)
	if err != nil {
		r.t.Fatal(err)
	}
	if code != -1 {
		r.t.Fatalf("dm-worker exited with %d before the SIGKILL", code)
	}
}

// freezeWorkerWhen runs the worker in slices of stepRun, frozen with
// SIGSTOP for stepFrozen after each, and returns, the worker frozen, at
// the first freeze at which cond holds. A state that lasts a few
// milliseconds of the worker's time (a checkpoint inside a transaction
// the worker streams in under a second) lasts for the ten times longer
// in wall time, and cond reads it while the worker writes nothing, so
// a kill that follows lands exactly there. Fails the test after d.
func (r *replication) freezeWorkerWhen(d time.Duration, what string, cond func() (bool, error)) {
	r.t.Helper()
	const stepRun, stepFrozen = 20 * time.Millisecond, 180 * time.Millisecond
	deadline := time.Now().Add(d)
	var last error
	for {
		r.w.freeze(r.t)
		ok, err := cond()
		if ok && err == nil {
			return
		}
		last = err
		if time.Now().After(deadline) {
			r.w.thaw(r.t)
			r.t.Fatalf("not within %s: %s (last error: %v)", d, what, last)
		}
		time.Sleep(stepFrozen)
		r.w.thaw(r.t)
		time.Sleep(stepRun)
	}
}

// restartWorker starts the worker again on the same data dir.
func (r *replication) restartWorker() {
	r.t.Helper()
	r.w = startWorker(r.t, r.wopts)
}

// waitCaughtUp waits until CHECKSUM TABLE of every table is the same on
// the target as on the source, for at most d, then compares every row.
func (r *replication) waitCaughtUp(d time.Duration) {
	r.t.Helper()
	want, err := checksums(r.srcDB)
	if err != nil {
		r.t.Fatalf("source checksums: %v", err)
	}
	start := time.Now()
	var got map[string]string
	err = testutil.Poll(d, func() error {
		got, err = checksums(r.tgtDB)
		if err != nil {
			return err
		}
		if !equalMaps(got, want) {
			return errors.New("checksums differ")
		}
		return nil
	})
	if err != nil {
		st, serr := r.subtask()
		r.t.Errorf("target did not catch up within %s: checksums source %v, target %v (%v); subtask %v %v",
			d, want, got, err, st, serr)
		r.compareRows()
		r.t.FailNow()
	}
	r.t.Logf("target caught up %s after the workload stopped: checksums %v", time.Since(start).Round(time.Millisecond), got)
	r.compareRows()
}

// checksums returns CHECKSUM TABLE of each of crashTables in crashDB, by
// table name.
func checksums(db *sql.DB) (map[string]string, error) { return schemaChecksums(db, crashDB) }

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// compareRows compares every table row by row in primary key order and
// reports the first differences.
func (r *replication) compareRows() {
	r.t.Helper()
	for _, tb := range crashTables {
		q := "SELECT * FROM " + crashDB + "." + tb.name + " ORDER BY " + tb.orderBy
		want, err := readRows(r.srcDB, q)
		if err != nil {
			r.t.Fatalf("source: %s: %v", q, err)
		}
		got, err := readRows(r.tgtDB, q)
		if err != nil {
			r.t.Fatalf("target: %s: %v", q, err)
		}
		if diff := diffRows(want, got, 5); diff != "" {
			r.t.Errorf("%s.%s: target differs from source (%d rows on the source, %d on the target):\n%s",
				crashDB, tb.name, len(want), len(got), diff)
			continue
		}
		r.t.Logf("%s.%s: %d rows, equal", crashDB, tb.name, len(want))
	}
}

// readRows reads every row of q as text (mariadbtest.QueryRows).
func readRows(db *sql.DB, q string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return mariadbtest.QueryRows(ctx, db, q)
}

// diffRows describes up to limit rows found on one side only; "" when
// the two lists (sorted by primary key) are equal.
func diffRows(want, got []string, limit int) string {
	if slices.Equal(want, got) {
		return ""
	}
	var b strings.Builder
	only := func(side string, rows, other []string) {
		left := map[string]int{}
		for _, row := range other {
			left[row]++
		}
		n := 0
		for _, row := range rows {
			if left[row] > 0 {
				left[row]--
				continue
			}
			if n == limit {
				b.WriteString("  ...\n")
				return
			}
			fmt.Fprintf(&b, "  only on the %s: %s\n", side, row)
			n++
		}
	}
	only("source", want, got)
	only("target", got, want)
	if b.Len() == 0 {
		b.WriteString("  same rows in another order\n")
	}
	return b.String()
}
