package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// Helpers of the online schema change tests (issue 26): one source, one
// target, one dm-worker, an incremental task with `online-ddl: true` over
// oscDB, whose table t holds rows seeded identically on both sides before
// the task's start position. The target keeps its general log in
// mysql.general_log (switched on once seeded) and counts row changes per
// table (userstat), so that the tests see what the worker ran there.

const (
	oscDB     = "shop"
	oscTask   = "osc"
	oscSource = "mysql-01"
	oscWorker = "w1"
	// oscMeta is the task's meta schema on the target (the default).
	oscMeta = "dm_meta"
	// oscTableDDL is t before the online schema change.
	oscTableDDL = "CREATE TABLE " + oscDB + ".t (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL, v VARCHAR(64) NOT NULL, n INT NOT NULL)"
	// oscAlter is the change the tools make, oscAlterRe how the target's
	// general log shows it on t.
	oscAlter   = "ADD COLUMN c2 INT NOT NULL DEFAULT 7, ADD INDEX (k)"
	oscAlterRe = "(?is)^ALTER\\s+TABLE\\s+(`?" + oscDB + "`?\\.)?`?t`?\\s+ADD\\s+(COLUMN\\s+)?`?c2`?\\s.*ADD\\s+(INDEX|KEY)\\s*\\(`?k`?\\)"
	// oscProbeID is an id no writer touches: the probe row of the start.
	oscProbeID = 999_999_999
)

// oscToolTables matches the names of the tools' shadow and trash tables
// in a statement.
var oscToolTables = regexp.MustCompile("(?i)_t_(new|old|gho|ghc|del)\\b")

// oscCopy matches a statement that copies rows with INSERT/REPLACE …
// SELECT.
var oscCopy = regexp.MustCompile("(?is)^\\s*(INSERT|REPLACE)\\b.*\\bSELECT\\b")

// oscOptions shape startOSC's set-up.
type oscOptions struct {
	relay bool // the source's enable-relay
	rows  int  // rows of t seeded on both sides
	// before runs on the source after t is seeded and before the task's
	// start position is read (the statements the task never sees).
	before func(db *sql.DB)
}

// oscEnv is the online schema change cluster.
type oscEnv struct {
	t            *testing.T
	c            *cluster
	src, tgt     *mariadbtest.Instance
	srcDB, tgtDB *sql.DB
	wopts        workerOptions
	w            *workerProc
	rows         int
}

// startOSC starts the servers, seeds t, starts the worker and the task,
// and returns once a probe row written on the source reached the target.
func startOSC(t *testing.T, o oscOptions) *oscEnv {
	t.Helper()
	e := &oscEnv{t: t, c: newEtcdCluster(t), rows: o.rows,
		src: mariadbtest.Start(t, mariadbtest.Options{Name: "osc-source", Binlog: true, FastCommit: true}),
		tgt: mariadbtest.Start(t, mariadbtest.Options{Name: "osc-target", FastCommit: true,
			ExtraConfig: []string{"log_output=TABLE", "general_log=0", "userstat=1"}})}
	e.srcDB, e.tgtDB = e.src.DB(t), e.tgt.DB(t)
	seed := fmt.Sprintf("INSERT INTO %s.t SELECT seq, seq %% 1000, CONCAT('seed-', seq), 0 FROM mysql.seq_1_to_%d", oscDB, o.rows)
	for _, db := range []*sql.DB{e.srcDB, e.tgtDB} {
		mariadbtest.MustExec(t, db, "CREATE DATABASE "+oscDB, oscTableDDL, seed)
	}
	if o.before != nil {
		o.before(e.srcDB)
	}
	// What the target did before the task is none of its business.
	mariadbtest.MustExec(t, e.tgtDB, "FLUSH TABLE_STATISTICS", "TRUNCATE TABLE mysql.general_log", "SET GLOBAL general_log = ON")

	e.wopts = workerOptions{name: oscWorker, endpoints: e.c.endpoints, prefix: e.c.prefix, dataDir: t.TempDir()}
	e.w = startWorker(t, e.wopts)
	e.c.waitWorkerAlive(oscWorker)
	file, pos, _ := e.src.MasterStatus(t)
	e.c.ok("source", "create", writeFile(t, "osc-source.yaml", fmt.Sprintf(`source-id: %s
flavor: mariadb
enable-relay: %t
from: {host: 127.0.0.1, port: %d, user: root, password: ""}
checker: {check-enable: true, backoff-min: 200ms, backoff-max: 1s}
`, oscSource, o.relay, e.src.Port())), "--worker", oscWorker)
	e.c.ok("task", "start", writeFile(t, "osc-task.yaml", fmt.Sprintf(`name: %s
task-mode: incremental
online-ddl: true
target-database: {host: 127.0.0.1, port: %d, user: root, password: ""}
mysql-instances:
  - source-id: %s
    meta: {binlog-name: %s, binlog-pos: %d}
    block-allow-list: only-shop
    syncer-config-name: small
block-allow-list:
  only-shop: {do-dbs: [%s]}
syncers:
  small: {worker-count: 4, batch: 50, checkpoint-flush-interval: 1}
`, oscTask, e.tgt.Port(), oscSource, file, pos, oscDB)))
	started := time.Now()
	e.waitSubtask(60*time.Second, "the subtask syncs", subtaskDoc.syncing)
	mariadbtest.MustExec(t, e.srcDB, fmt.Sprintf("INSERT INTO %s.t (id, k, v, n) VALUES (%d, 1, 'probe', 0)", oscDB, oscProbeID))
	testutil.Eventually(t, 60*time.Second, "the probe row reaches the target", func() error {
		var n int
		if err := e.tgtDB.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM %s.t WHERE id = %d", oscDB, oscProbeID)).Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			st, err := e.subtask()
			return fmt.Errorf("no probe row; subtask %v %v", st, err)
		}
		return nil
	})
	t.Logf("the task replicates %s after its start (relay %t, %d rows in t)", time.Since(started).Round(time.Millisecond), o.relay, o.rows)
	return e
}

func (e *oscEnv) subtask() (subtaskDoc, error) { return getSubtask[subtaskDoc](e.w, oscTask) }

func (e *oscEnv) waitSubtask(d time.Duration, what string, cond func(subtaskDoc) bool) subtaskDoc {
	e.t.Helper()
	return waitSubtask(e.t, e.w, oscTask, d, what, cond)
}

// runPtOSC runs pt-online-schema-change --execute with alter on db.table
// of the MariaDB on port and returns its output; the test fails when the
// tool is missing or fails.
func runPtOSC(t *testing.T, port int, db, table, alter string, chunk int) string {
	t.Helper()
	path, err := exec.LookPath("pt-online-schema-change")
	if err != nil {
		t.Fatalf("pt-online-schema-change (Debian's percona-toolkit, scripts/install-deps.sh) is not installed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path,
		"--alter", alter, "--execute",
		"--recursion-method=none", "--no-check-replication-filters", "--no-version-check",
		// Fixed chunks, so that the copy takes a while under the writers.
		fmt.Sprintf("--chunk-size=%d", chunk), "--chunk-time=0",
		// The machine is busy with the test itself: never pause or abort
		// for load.
		"--max-load=Threads_running=1000", "--critical-load=Threads_running=2000",
		"--tries=copy_rows:50:0.2,create_triggers:20:0.5,drop_triggers:20:0.5,swap_tables:20:0.5",
		fmt.Sprintf("h=127.0.0.1,P=%d,u=root,D=%s,t=%s", port, db, table))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pt-online-schema-change on %s.%s: %v\n%s", db, table, err, out)
	}
	t.Logf("pt-online-schema-change altered %s.%s on 127.0.0.1:%d in %s", db, table, port, time.Since(start).Round(time.Millisecond))
	return string(out)
}

// oscWriters change t from several goroutines until stop: upserts,
// updates by id and by id range, deletes, over ids 1…keys, in
// transactions of one to three statements. With mirror set, each
// statement's change is applied to that table too in the same
// transaction, as gh-ost applies the binlog to its shadow table; a
// writer's transaction holds gate shared, so that the test's cut-over,
// holding it exclusively, sees no change of t in flight.
type oscWriters struct {
	db   *sql.DB
	keys int64
	seed uint64

	c2     atomic.Bool            // t has c2: write it
	mirror atomic.Pointer[string] // the shadow table that follows t, nil none
	gate   sync.RWMutex

	commits, retries, affected atomic.Int64

	stopc chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
	mu    sync.Mutex
	errs  []error // guarded by mu
}

// startOSCWriters starts n writers over ids 1…keys; stop (also in
// t.Cleanup) ends them.
func startOSCWriters(t *testing.T, db *sql.DB, n int, keys int64) *oscWriters {
	t.Helper()
	w := &oscWriters{db: db, keys: keys, seed: uint64(time.Now().UnixNano()), stopc: make(chan struct{})}
	t.Logf("writers: %d over ids 1…%d, seed %d", n, keys, w.seed)
	for i := range n {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.run(rand.New(rand.NewPCG(w.seed, uint64(i))))
		}()
	}
	t.Cleanup(func() {
		if err := w.stop(); err != nil {
			t.Errorf("writers: %v", err)
		}
	})
	return w
}

func (w *oscWriters) stop() error {
	w.once.Do(func() { close(w.stopc) })
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(w.errs...)
}

func (w *oscWriters) String() string {
	return fmt.Sprintf("%d commits (%d rows affected), %d retried", w.commits.Load(), w.affected.Load(), w.retries.Load())
}

// waitMore waits up to d until the writers committed n more transactions
// than now.
func (w *oscWriters) waitMore(t *testing.T, d time.Duration, n int64) {
	t.Helper()
	want := w.commits.Load() + n
	testutil.Eventually(t, d, fmt.Sprintf("the writers commit %d more transactions", n), func() error {
		if got := w.commits.Load(); got < want {
			return fmt.Errorf("%d of %d commits", got, want)
		}
		return nil
	})
}

func (w *oscWriters) run(rng *rand.Rand) {
	for {
		select {
		case <-w.stopc:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		n, err := w.txn(ctx, rng)
		cancel()
		switch {
		case err == nil:
			w.commits.Add(1)
			w.affected.Add(n)
		case oscRetryable(err):
			w.retries.Add(1)
		default:
			w.mu.Lock()
			w.errs = append(w.errs, err)
			w.mu.Unlock()
			return
		}
		select {
		case <-w.stopc:
			return
		case <-time.After(time.Duration(2+rng.IntN(5)) * time.Millisecond):
		}
	}
}

// oscRetryable: a deadlock or lock wait timeout with the tool's copy or
// another writer, or a table definition changed under the transaction
// (the cut-over).
func oscRetryable(err error) bool { return retryable(err) || collision(err) }

// txn runs one transaction and returns the rows its changes of t
// affected.
func (w *oscWriters) txn(ctx context.Context, rng *rand.Rand) (int64, error) {
	w.gate.RLock()
	defer w.gate.RUnlock()
	mirror := w.mirror.Load()
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	var affected int64
	for range 1 + rng.IntN(3) {
		q, args, lo, hi, del := w.statement(rng)
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return 0, errors.Join(fmt.Errorf("%s: %w", q, err), tx.Rollback())
		}
		n, _ := res.RowsAffected()
		affected += n
		if mirror == nil {
			continue
		}
		// The shadow gets t's rows as they now are, in the columns both
		// have (its own default c2).
		mq := fmt.Sprintf("REPLACE INTO %s.%s (id, k, v, n) SELECT id, k, v, n FROM %s.t WHERE id BETWEEN ? AND ?", oscDB, *mirror, oscDB)
		if del {
			mq = fmt.Sprintf("DELETE FROM %s.%s WHERE id BETWEEN ? AND ?", oscDB, *mirror)
		}
		if _, err := tx.ExecContext(ctx, mq, lo, hi); err != nil {
			return 0, errors.Join(fmt.Errorf("%s: %w", mq, err), tx.Rollback())
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return affected, nil
}

// statement is one random change of t, the id range it touches, and
// whether it deletes.
func (w *oscWriters) statement(rng *rand.Rand) (q string, args []any, lo, hi int64, del bool) {
	id := 1 + rng.Int64N(w.keys)
	v := fmt.Sprintf("w-%d", rng.IntN(1e9))
	c2 := w.c2.Load()
	t := oscDB + ".t"
	switch op := rng.IntN(20); {
	case op < 7:
		if c2 {
			return "INSERT INTO " + t + " (id, k, v, n, c2) VALUES (?, ?, ?, 0, ?) ON DUPLICATE KEY UPDATE n = n + 1, v = VALUES(v), c2 = VALUES(c2)",
				[]any{id, id % 1000, v, rng.IntN(1000)}, id, id, false
		}
		return "INSERT INTO " + t + " (id, k, v, n) VALUES (?, ?, ?, 0) ON DUPLICATE KEY UPDATE n = n + 1, v = VALUES(v)",
			[]any{id, id % 1000, v}, id, id, false
	case op < 13:
		if c2 {
			return "UPDATE " + t + " SET n = n + 1, v = ?, c2 = ? WHERE id = ?", []any{v, rng.IntN(1000), id}, id, id, false
		}
		return "UPDATE " + t + " SET n = n + 1, v = ? WHERE id = ?", []any{v, id}, id, id, false
	case op < 15:
		return "UPDATE " + t + " SET n = n + 1, k = k + 1 WHERE id BETWEEN ? AND ?", []any{id, id + 10}, id, id + 10, false
	default:
		return "DELETE FROM " + t + " WHERE id = ?", []any{id}, id, id, true
	}
}

// oscShowCreate is SHOW CREATE TABLE db.table without the table's name.
func oscShowCreate(db *sql.DB, schema, table string) (string, error) {
	var name, ddl string
	if err := db.QueryRow("SHOW CREATE TABLE "+schema+"."+table).Scan(&name, &ddl); err != nil {
		return "", fmt.Errorf("SHOW CREATE TABLE %s.%s: %w", schema, table, err)
	}
	return ddl, nil
}

// oscTables lists the tables of schema.
func oscTables(db *sql.DB, schema string) ([]string, error) {
	return oscStrings(db, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME", schema)
}

// oscTriggers lists the triggers of schema.
func oscTriggers(db *sql.DB, schema string) ([]string, error) {
	return oscStrings(db, "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? ORDER BY TRIGGER_NAME", schema)
}

// oscStrings reads the one text column of q's rows.
func oscStrings(db *sql.DB, q string, args ...any) (out []string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, rows.Close()) }()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// oscChecksum is CHECKSUM TABLE of db.table.
func oscChecksum(db *sql.DB, table string) (string, error) {
	sums, err := checksumTables(db, []string{table}, 30*time.Second)
	if err != nil {
		return "", err
	}
	for _, s := range sums {
		if !s.Valid {
			return "", fmt.Errorf("CHECKSUM TABLE %s: no such table", table)
		}
		return s.String, nil
	}
	return "", fmt.Errorf("CHECKSUM TABLE %s: no row", table)
}

// waitEqual waits up to d until the target's t has the source's rows and
// definition (SHOW CREATE TABLE); it fails with the difference and the
// subtask's status.
func (e *oscEnv) waitEqual(d time.Duration) {
	e.t.Helper()
	start := time.Now()
	err := testutil.Poll(d, func() error {
		if st, err := e.subtask(); err == nil && !st.syncing() {
			return fmt.Errorf("subtask %v", st)
		}
		want, err := oscShowCreate(e.srcDB, oscDB, "t")
		if err != nil {
			return err
		}
		got, err := oscShowCreate(e.tgtDB, oscDB, "t")
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("SHOW CREATE TABLE differs:\nsource:\n%s\ntarget:\n%s", want, got)
		}
		ws, err := oscChecksum(e.srcDB, oscDB+".t")
		if err != nil {
			return err
		}
		gs, err := oscChecksum(e.tgtDB, oscDB+".t")
		if err != nil {
			return err
		}
		if ws != gs {
			return fmt.Errorf("CHECKSUM TABLE source %s, target %s", ws, gs)
		}
		return nil
	})
	if err != nil {
		st, serr := e.subtask()
		e.t.Fatalf("the target's %s.t is not the source's within %s: %v\nsubtask %v %v", oscDB, d, err, st, serr)
	}
	q := "SELECT * FROM " + oscDB + ".t ORDER BY id"
	want, err := readRows(e.srcDB, q)
	if err != nil {
		e.t.Fatal(err)
	}
	got, err := readRows(e.tgtDB, q)
	if err != nil {
		e.t.Fatal(err)
	}
	if diff := diffRows(want, got, 8); diff != "" {
		e.t.Fatalf("%s.t: equal checksums, different rows (%d on the source, %d on the target):\n%s", oscDB, len(want), len(got), diff)
	}
	e.t.Logf("the target's %s.t equals the source's (%d rows, same SHOW CREATE TABLE) %s after the writers stopped",
		oscDB, len(want), time.Since(start).Round(time.Millisecond))
}

// checkClean requires the source and the target to hold t only in oscDB,
// no triggers, the target's t to have c2 and index k as the tools' ALTER
// made them, the target's general log (the worker's own meta schema left
// out) to show the ALTER on t exactly once, no statement naming a shadow
// or trash table and no INSERT … SELECT copy, and the target's row changes
// of t to be those of the writers, not of a copy of the table (at most
// three per row the writers affected, as safe mode may replay a change as
// a delete and an insert).
func (e *oscEnv) checkClean(w *oscWriters) {
	e.t.Helper()
	for side, db := range map[string]*sql.DB{"source": e.srcDB, "target": e.tgtDB} {
		tables, err := oscTables(db, oscDB)
		if err != nil {
			e.t.Fatal(err)
		}
		if strings.Join(tables, ",") != "t" {
			e.t.Errorf("the %s's %s has tables %q, want only t", side, oscDB, tables)
		}
		trig, err := oscTriggers(db, oscDB)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(trig) > 0 {
			e.t.Errorf("the %s's %s has triggers %q", side, oscDB, trig)
		}
	}
	if !e.hasColumn("c2") || !e.hasIndex("k") {
		e.t.Errorf("the target's %s.t lacks c2 or index k", oscDB)
	}
	e.checkGeneralLog()
	var changed int64
	err := e.tgtDB.QueryRow("SELECT ROWS_CHANGED FROM information_schema.TABLE_STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't'", oscDB).Scan(&changed)
	if err != nil {
		e.t.Fatalf("the target's TABLE_STATISTICS of %s.t: %v", oscDB, err)
	}
	limit := 3*w.affected.Load() + 10
	e.t.Logf("the target changed %d rows of %s.t; the writers affected %d (%s)", changed, oscDB, w.affected.Load(), w)
	if changed > limit {
		e.t.Errorf("the target changed %d rows of %s.t, more than 3 per row the writers affected (%d): the tool's copy reached it", changed, oscDB, limit)
	}
	if limit >= int64(e.rows) {
		e.t.Errorf("the writers affected %d rows, too many for the row count check to tell a copy of %d rows: slow them down", w.affected.Load(), e.rows)
	}
}

func (e *oscEnv) hasColumn(col string) bool {
	e.t.Helper()
	var n int
	if err := e.tgtDB.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't' AND COLUMN_NAME = ?", oscDB, col).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n == 1
}

func (e *oscEnv) hasIndex(idx string) bool {
	e.t.Helper()
	var n int
	if err := e.tgtDB.QueryRow("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't' AND INDEX_NAME = ?", oscDB, idx).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n > 0
}

// targetStatements switches the target's general log off and returns the
// statements it logged (Query and Execute) since the task started, but
// those on the worker's meta schema.
func (e *oscEnv) targetStatements() []string {
	e.t.Helper()
	mariadbtest.MustExec(e.t, e.tgtDB, "SET GLOBAL general_log = OFF")
	stmts, err := oscStrings(e.tgtDB, "SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log "+
		"WHERE command_type IN ('Query', 'Execute') ORDER BY event_time")
	if err != nil {
		e.t.Fatalf("the target's general log: %v", err)
	}
	var out []string
	for _, q := range stmts {
		out = append(out, oscNotMeta(q)...)
	}
	return out
}

// oscNotMeta splits q, as the general log shows one query (the worker
// joins a batch's statements into one, BEGIN;…;COMMIT), into its
// statements, and returns those that do not name the meta schema.
func oscNotMeta(q string) []string {
	var out []string
	for _, s := range splitStatements(q) {
		if !strings.Contains(s, oscMeta) {
			out = append(out, s)
		}
	}
	return out
}

// splitStatements splits q at the semicolons outside quotes and
// comments, trimmed, empty ones left out.
func splitStatements(q string) []string {
	var out []string
	start := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == '\\' && quote != '`' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			if end := strings.Index(q[i+2:], "*/"); end >= 0 {
				i += end + 3
			}
		case c == ';':
			if s := strings.TrimSpace(q[start:i]); s != "" {
				out = append(out, s)
			}
			start = i + 1
		}
	}
	if s := strings.TrimSpace(q[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

// checkGeneralLog: see checkClean.
func (e *oscEnv) checkGeneralLog() {
	e.t.Helper()
	stmts := e.targetStatements()
	alter := regexp.MustCompile(oscAlterRe)
	alters, writes := 0, 0
	var bad, otherAlters []string
	for _, s := range stmts {
		switch {
		case oscToolTables.MatchString(s) || oscCopy.MatchString(s):
			bad = append(bad, oscClip(s))
		case alter.MatchString(s):
			alters++
		case regexp.MustCompile("(?i)^\\s*ALTER\\b").MatchString(s):
			otherAlters = append(otherAlters, oscClip(s))
		case regexp.MustCompile("(?i)^\\s*(INSERT|REPLACE|UPDATE|DELETE)\\b.*\\b" + oscDB + "\\b").MatchString(s):
			writes++
		}
	}
	e.t.Logf("the target's general log: %d statements, %d writes of %s, %d ALTERs of t with c2", len(stmts), writes, oscDB, alters)
	if writes == 0 {
		e.t.Errorf("the target's general log shows no write of %s: it does not log the worker; it holds %q", oscDB, stmts[:min(len(stmts), 50)])
	}
	if len(bad) > 0 {
		e.t.Errorf("the target ran %d statements naming a shadow or trash table or copying rows by INSERT … SELECT, e.g. %q", len(bad), bad[:min(len(bad), 5)])
	}
	if alters != 1 {
		e.t.Errorf("the target ran the ALTER of t %d times, want once (%s)", alters, oscAlterRe)
	}
	if len(otherAlters) > 0 {
		e.t.Errorf("the target ran other ALTERs: %q", otherAlters)
	}
}

func oscClip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// onlineRecord reads the task's online-DDL record of oscDB.t on the
// target: the shadow table and its recorded statements (JSON); ok false
// when there is none.
func (e *oscEnv) onlineRecord() (shadow, stmts, cutAt string, ok bool) {
	e.t.Helper()
	err := e.tgtDB.QueryRow("SELECT shadow_table, stmts, cut_at FROM "+oscMeta+"."+oscTask+"_onlineddl WHERE schema_name = ? AND real_table = 't'", oscDB).
		Scan(&shadow, &stmts, &cutAt)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", "", false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return shadow, stmts, cutAt, true
}
