package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// Issue 16's acceptance (many tasks per worker): the subtasks of a worker
// writing to one target share one bounded budget of connections to it.

// Sizes of the test.
const (
	cbTasks = 40
	// cbLimit is the worker's default target-connection-limit; cbMargin
	// the target connections of the test and the harness on top of it
	// (up to 4), plus server threads of connections the worker closed
	// that the server has not ended yet: it ends them asynchronously, so
	// Max_used_connections may count a few of them beside the new ones
	// (runs saw 67-69).
	cbLimit  = dbconn.DefaultTargetConnectionLimit
	cbMargin = 12
	// cbWrites is how long the writers run; cbConverge bounds the wait for
	// the target to equal the source after they stop.
	cbWrites   = 30 * time.Second
	cbConverge = 2 * time.Minute
	cbKeys     = 300
)

// cbStatus is the part of the worker status the test reads.
type cbStatus struct {
	Subtasks []struct {
		Name   string `json:"name"`
		Stage  string `json:"stage"`
		Unit   string `json:"unit"`
		Errors []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
		TargetConns *dbconn.TargetConnections `json:"target-connections"`
	} `json:"subtasks"`
	SourceConns *dbconn.SourceConnections `json:"source-connections"`
}

// cbPeaks are the highest numbers the status showed while the test ran.
type cbPeaks struct {
	mu                         sync.Mutex
	open, waiting, taskWaiting int // guarded by mu
	tasksWaiting, notRunning   int // guarded by mu
	lastProblem                string
}

func (p *cbPeaks) record(st cbStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tasksWaiting := 0
	for _, s := range st.Subtasks {
		if s.Stage != "Running" || len(s.Errors) > 0 {
			p.notRunning++
			p.lastProblem = fmt.Sprintf("%s: stage %s unit %s errors %+v", s.Name, s.Stage, s.Unit, s.Errors)
		}
		if tc := s.TargetConns; tc != nil {
			p.open, p.waiting, p.taskWaiting = max(p.open, tc.Open), max(p.waiting, tc.Waiting), max(p.taskWaiting, tc.TaskWaiting)
			if tc.TaskWaiting > 0 {
				tasksWaiting++
			}
		}
	}
	p.tasksWaiting = max(p.tasksWaiting, tasksWaiting)
}

// TestManyTasksShareTargetConnections runs 40 incremental tasks of one
// source, read through the relay, into one target with MariaDB's default
// max_connections (151), each task with its own database under writes and
// the default syncer worker-count (16: 40 pools of 20 connections would
// want 800). Every database must end equal to the source, the target must
// never see more than the worker's limit (64) plus the test's own
// connections, and no task may be paused by an error on the way.
func TestManyTasksShareTargetConnections(t *testing.T) {
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "cb-source", Binlog: true, FastCommit: true})
	tgt := mariadbtest.Start(t, mariadbtest.Options{Name: "cb-target", FastCommit: true,
		ExtraConfig: []string{"max_connections=151"}}) // MariaDB's default; the harness raises it
	srcDB, tgtDB := src.DB(t), tgt.DB(t)
	srcDB.SetMaxOpenConns(cbTasks + 4)
	tgtDB.SetMaxOpenConns(2)
	c := newEtcdCluster(t)
	// The default keepalive TTL: 40 busy tasks on two shared cores may keep
	// the worker from renewing a 2s lease in time.
	w := startWorker(t, workerOptions{name: "w1", endpoints: c.endpoints, prefix: c.prefix, args: []string{"--keepalive-ttl", "10s"}})
	c.waitWorkerAlive("w1")

	began := time.Now()
	set := cbSet{tasks: cbTasks, from: `{host: 127.0.0.1, port: %d, user: root, password: ""}`, flavor: "mariadb"}
	set.start(t, c, src, tgt)
	set.createTables(t, src, tgtDB, time.Minute)
	t.Logf("%d tasks running with their tables after %s", cbTasks, time.Since(began).Round(time.Millisecond))

	peaks := &cbPeaks{}
	stopSampler := cbSample(t, w, peaks)
	commits := set.write(t, srcDB, cbTasks, cbWrites)
	t.Logf("writers stopped after %s: %d transactions on %d databases", cbWrites, commits, cbTasks)

	stopped := time.Now()
	set.waitEqual(t, srcDB, tgtDB, cbConverge)
	stopSampler()
	t.Logf("every database equal %s after the writers stopped", time.Since(stopped).Round(time.Millisecond))

	cbCheckAfter(t, w, tgt, peaks)
	// The tasks read the relay, not the source: the relay is the source's
	// one binlog reader.
	if n := src.QueryString(t, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'"); n != "1" {
		t.Errorf("%s binlog readers on the source, want 1 (the relay)", n)
	}
}

func cbDB(i int) string { return fmt.Sprintf("cb_%03d", i) }

// cbSet is a set of incremental tasks of one source (cb-src, relay on)
// into one target, task i replicating database cbDB(i).
type cbSet struct {
	tasks int
	// from is the source's from block, with %d for the port; flavor ""
	// leaves the flavor for the worker to detect.
	from, flavor string
}

// start creates the source and the tasks with dmctl, every task starting
// at the source's current position.
func (s cbSet) start(t *testing.T, c *cluster, src, tgt *mariadbtest.Instance) {
	t.Helper()
	file, pos, _ := src.MasterStatus(t)
	flavor := ""
	if s.flavor != "" {
		flavor = "flavor: " + s.flavor + "\n"
	}
	c.ok("source", "create", writeFile(t, "source.yaml", fmt.Sprintf(`source-id: cb-src
%senable-relay: true
from: `+s.from+`
checker: {check-enable: true, backoff-min: 200ms, backoff-max: 1s}
`, flavor, src.Port())), "--worker", "w1")
	files := make([]string, s.tasks)
	for i := range files {
		files[i] = writeFile(t, "task.yaml", fmt.Sprintf(`name: %s
task-mode: incremental
target-database: {host: 127.0.0.1, port: %d, user: root, password: ""}
mysql-instances:
  - source-id: cb-src
    meta: {binlog-name: %s, binlog-pos: %d}
    block-allow-list: only
block-allow-list:
  only: {do-dbs: [%s]}
`, cbDB(i), tgt.Port(), file, pos, cbDB(i)))
	}
	// cbStarters dmctl processes at a time: one after the other, 200 took
	// over a minute on two busy cores.
	results := make([]dmctlResult, s.tasks)
	next := make(chan int)
	var wg sync.WaitGroup
	for range cbStarters {
		wg.Go(func() {
			for i := range next {
				// dmctl's etcd timeout below runDmctl's 30s: on two busy
				// cores (the test pinned to one beside a busy loop) etcd
				// took more than the cluster's usual 10s to answer.
				results[i] = runDmctl(t, "--etcd-endpoints", c.endpoints, "--etcd-prefix", c.prefix, "--timeout", "25s",
					"task", "start", files[i])
			}
		})
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Fatalf("dmctl task start %s: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", cbDB(i), r.code, r.stdout, r.stderr)
		}
	}
}

// cbStarters is how many dmctl task start run at once.
const cbStarters = 4

// createTables creates every task's database and table on the source and
// waits up to d until every one is on the target.
func (s cbSet) createTables(t *testing.T, src *mariadbtest.Instance, tgtDB *sql.DB, d time.Duration) {
	t.Helper()
	for i := range s.tasks {
		src.Exec(t, "CREATE DATABASE "+cbDB(i))
		src.Exec(t, "CREATE TABLE "+cbDB(i)+".t (id INT PRIMARY KEY, n BIGINT NOT NULL, note VARCHAR(64) NULL, KEY (n))")
	}
	testutil.Eventually(t, d, "every task created its table on the target", func() error {
		var n int
		err := tgtDB.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA LIKE 'cb\\_%'").Scan(&n)
		if err == nil && n != s.tasks {
			err = fmt.Errorf("%d of %d tables", n, s.tasks)
		}
		return err
	})
}

// cbSample reads the worker's status every 200ms into peaks until the
// returned function is called.
func cbSample(t *testing.T, w *workerProc, peaks *cbPeaks) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			res, err := httpDo(http.MethodGet, w.url("/api/v1/status"), "")
			if err != nil || res.code != http.StatusOK {
				continue // a busy worker; the next sample counts
			}
			var st cbStatus
			if json.Unmarshal([]byte(res.body), &st) == nil {
				peaks.record(st)
			}
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// write runs writers writers for d, writer w on the databases i with
// i % writers == w in turn: small transactions of upserts, updates and
// deletes on random keys. It returns the commits.
func (s cbSet) write(t *testing.T, db *sql.DB, writers int, d time.Duration) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d+time.Minute)
	defer cancel()
	deadline := time.Now().Add(d)
	var (
		commits atomic.Int64
		wg      sync.WaitGroup
		mu      sync.Mutex
		failed  []error
	)
	writers = min(writers, s.tasks)
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			var mine []int
			for i := w; i < s.tasks; i += writers {
				mine = append(mine, i)
			}
			for n := 0; time.Now().Before(deadline); n++ {
				i := mine[n%len(mine)]
				if err := cbTxn(ctx, db, cbDB(i), rng); err != nil && !collision(err) {
					mu.Lock()
					failed = append(failed, fmt.Errorf("writer of %s: %w", cbDB(i), err))
					mu.Unlock()
					return
				}
				commits.Add(1)
				time.Sleep(time.Duration(2+rng.IntN(8)) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(failed...); err != nil {
		t.Fatal(err)
	}
	return commits.Load()
}

// cbTxn is one transaction of 1 to 3 random changes of schema.t.
func cbTxn(ctx context.Context, db *sql.DB, schema string, rng *rand.Rand) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for range 1 + rng.IntN(3) {
		id := 1 + rng.IntN(cbKeys)
		var q string
		var args []any
		switch op := rng.IntN(10); {
		case op < 5:
			q, args = "INSERT INTO "+schema+".t (id, n, note) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE n = n + VALUES(n), note = VALUES(note)",
				[]any{id, rng.IntN(1000), randomText(rng)}
		case op < 8:
			q, args = "UPDATE "+schema+".t SET n = n * 2 + ?, note = NULL WHERE id BETWEEN ? AND ?", []any{rng.IntN(10), id, id + 2}
		default:
			q, args = "DELETE FROM "+schema+".t WHERE id = ?", []any{id}
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return errors.Join(err, tx.Rollback())
		}
	}
	return tx.Commit()
}

// waitEqual waits up to d until CHECKSUM TABLE of every database's table
// is the same on the target as on the source.
func (s cbSet) waitEqual(t *testing.T, srcDB, tgtDB *sql.DB, d time.Duration) {
	t.Helper()
	names := make([]string, s.tasks)
	for i := range names {
		names[i] = cbDB(i) + ".t"
	}
	want, err := checksumTables(srcDB, names, 30*time.Second)
	if err != nil {
		t.Fatalf("source: %v", err)
	}
	testutil.Eventually(t, d, "every database on the target equals the source", func() error {
		got, err := checksumTables(tgtDB, names, 30*time.Second)
		if err != nil {
			return err
		}
		var differ []string
		for name, sum := range want {
			if got[name] != sum {
				differ = append(differ, name)
			}
		}
		if len(differ) > 0 {
			return fmt.Errorf("%d tables differ: %v", len(differ), differ)
		}
		return nil
	})
}

// cbCheckAfter checks what the run left: the target's peak of
// connections, every task running without errors and never paused by one,
// and no refusal by the target.
func cbCheckAfter(t *testing.T, w *workerProc, tgt *mariadbtest.Instance, peaks *cbPeaks) {
	t.Helper()
	maxUsed, err := strconv.Atoi(tgt.QueryString(t, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'Max_used_connections'"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("connections the target accepted in all: %s", tgt.QueryString(t, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'Connections'"))
	peaks.mu.Lock()
	t.Logf("target Max_used_connections %d (limit %d + margin %d); status peaks: worker open %d, waiting %d, one task waiting %d, tasks waiting at once %d",
		maxUsed, cbLimit, cbMargin, peaks.open, peaks.waiting, peaks.taskWaiting, peaks.tasksWaiting)
	if peaks.notRunning > 0 {
		t.Errorf("%d samples of a subtask not running or with errors; last: %s", peaks.notRunning, peaks.lastProblem)
	}
	if peaks.open > cbLimit {
		t.Errorf("status showed %d open connections to the target, over the limit %d", peaks.open, cbLimit)
	}
	peaks.mu.Unlock()
	if maxUsed > cbLimit+cbMargin {
		t.Errorf("the target saw %d connections at once; want at most the limit %d + %d", maxUsed, cbLimit, cbMargin)
	}
	var st cbStatus
	res, err := httpDo(http.MethodGet, w.url("/api/v1/status"), "")
	if err != nil || json.Unmarshal([]byte(res.body), &st) != nil {
		t.Fatalf("GET /api/v1/status: %v %s", err, res.body)
	}
	if len(st.Subtasks) != cbTasks {
		t.Errorf("status lists %d subtasks, want %d", len(st.Subtasks), cbTasks)
	}
	for _, s := range st.Subtasks {
		if s.Stage != "Running" || s.Unit != "Sync" || len(s.Errors) > 0 || s.TargetConns == nil || s.TargetConns.Limit != cbLimit {
			t.Errorf("subtask %s: stage %s unit %s errors %+v target-connections %+v; want Running in Sync without errors, limit %d",
				s.Name, s.Stage, s.Unit, s.Errors, s.TargetConns, cbLimit)
		}
	}
	logText, err := os.ReadFile(w.logFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"subtask failed", "auto-resumed", "Too many connections"} {
		if n := strings.Count(string(logText), bad); n > 0 {
			t.Errorf("the worker log has %d lines with %q; want none (no pause/resume)", n, bad)
		}
	}
	metrics := get(t, w, "/metrics").body
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "dm_worker_auto_resumes_total") || strings.HasPrefix(line, "dm_worker_target_connections_") {
			t.Log(line)
		}
	}
}
