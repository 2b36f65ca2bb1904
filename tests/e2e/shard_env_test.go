package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dmworker/dm-worker/ha/shardddl"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// Helpers of the shard merge tests (issue 25): two sources, each with two
// schemas of two tables (shard_1.t_1, shard_1.t_2, shard_2.t_1,
// shard_2.t_2), eight upstream tables merged by one route into shardDB.t
// on one target, one dm-worker process per source, a task in pessimistic
// shard mode.

const (
	shardTask = "shardtask"
	shardDB   = "shard_db"
	// shardKeySpace is how many ids each shard's writer uses: small, so
	// that writes keep hitting rows inserted, changed or deleted just
	// before.
	shardKeySpace = 150
	// shardIDStep separates the shards' ids: shard k owns
	// [k*shardIDStep, (k+1)*shardIDStep).
	shardIDStep = 1_000_000
	// shardProbeID and shardMarkerID are ids (of each shard) outside what
	// the writers touch, range updates included: the probe row written
	// when the task starts, the marker rows of checkHeldAndFree.
	shardProbeID  = shardKeySpace + 100
	shardMarkerID = shardKeySpace + 101
)

// shardSources are the sources' ids; source i is served by worker w(i+1).
var shardSources = [2]string{"mysql-01", "mysql-02"}

// shardTable is one upstream table of group shardDB.t.
type shardTable struct {
	src           int // index into shardSources
	schema, table string
	k             int // its index among the eight, which fixes its ids
	// c2 is set once the shard's ALTER … ADD COLUMN c2 returned: its
	// writer then writes c2; wide once its MODIFY COLUMN v VARCHAR(64)
	// returned: its writer then writes values that fit only the widened
	// column.
	c2, wide atomic.Bool
}

// name is the upstream table as SQL names it (schema.table).
func (s *shardTable) name() string { return s.schema + "." + s.table }

// member is the table as shard-ddl-lock lists it.
func (s *shardTable) member() shardddl.MemberTable {
	return shardddl.MemberTable{Source: shardSources[s.src], Table: shardddl.Table{Schema: s.schema, Name: s.table}.String()}
}

func (s *shardTable) String() string { return shardSources[s.src] + " " + s.name() }

// shardOptions shape startShardEnv's cluster.
type shardOptions struct {
	// all runs the task in mode all, over shards that hold seedRows rows
	// each before it starts (dump and load merge them into shardDB.t);
	// else it is incremental from the sources' positions after the
	// tables were created, and the test creates shardDB.t on the target.
	all      bool
	seedRows int
	// uTables adds a second group: shard_1.u_1 and shard_2.u_1 on the
	// first source only, routed to shardDB.u; the second source has no
	// table of it.
	uTables bool
	// isSharding spells the mode as DM's older `is-sharding: true`
	// instead of `shard-mode: pessimistic`.
	isSharding bool
	// workerArgs are more flags of the workers (after the harness's).
	workerArgs []string
	// optimistic runs the task in `shard-mode: optimistic` (pessimistic
	// otherwise); strict adds `strict-optimistic-shard-mode: true`.
	optimistic, strict bool
	// extraColumns are more columns of every shard (and of shardDB.t when
	// the test creates it) after shardTableDDL's, as SQL writes them after
	// a comma ("c2 INT NULL, d INT NULL").
	extraColumns string
	// onlineDDL adds `online-ddl: true` to the task.
	onlineDDL bool
}

// tableDDL is the shards' definition: shardTableDDL with extraColumns.
func (o shardOptions) tableDDL() string {
	if o.extraColumns == "" {
		return shardTableDDL
	}
	return strings.TrimSuffix(shardTableDDL, ")") + ", " + o.extraColumns + ")"
}

// shardEnv is the shard merge cluster.
type shardEnv struct {
	t      *testing.T
	c      *cluster
	src    [2]*mariadbtest.Instance
	srcDB  [2]*sql.DB
	tgt    *mariadbtest.Instance
	tgtDB  *sql.DB
	wopts  [2]workerOptions // same name and data dir on every restart
	w      [2]*workerProc   // the current processes
	procs  []*workerProc    // every process started, for their logs
	shards []*shardTable    // the eight members of shardDB.t, rollout order
	lockID string           // the lock id of shardDB.t
}

// shardTableDDL is the upstream tables' (and shardDB.t's) definition
// before the tests' DDLs.
const shardTableDDL = "(id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL, v VARCHAR(32) NOT NULL, n INT NOT NULL)"

// startShardEnv starts two sources, a target (with the general log on, to
// count the DDLs it runs), an etcd and two workers, creates the shards,
// binds mysql-0i to wi and starts shardTask in pessimistic shard mode (or
// optimistic, as o says); it returns once both subtasks sync.
func startShardEnv(t *testing.T, o shardOptions) *shardEnv {
	t.Helper()
	e := &shardEnv{t: t, c: newEtcdCluster(t),
		lockID: shardddl.LockID(shardTask, shardddl.Table{Schema: shardDB, Name: "t"})}
	for i := range e.src {
		e.src[i] = mariadbtest.Start(t, mariadbtest.Options{Name: fmt.Sprintf("shard-source-%d", i+1), Binlog: true, FastCommit: true})
		e.srcDB[i] = e.src[i].DB(t)
	}
	e.tgt = mariadbtest.Start(t, mariadbtest.Options{Name: "shard-target", FastCommit: true,
		ExtraConfig: []string{"general_log=1", "log_output=FILE", "general_log_file=general.log"}})
	e.tgtDB = e.tgt.DB(t)

	// Rollout order: the sources alternate, so that a half-synced lock
	// has members of both.
	for _, sc := range []string{"shard_1", "shard_2"} {
		for _, tb := range []string{"t_1", "t_2"} {
			for src := range e.src {
				e.shards = append(e.shards, &shardTable{src: src, schema: sc, table: tb, k: len(e.shards)})
			}
		}
	}
	for src, db := range e.srcDB {
		mariadbtest.MustExec(t, db, "CREATE DATABASE shard_1", "CREATE DATABASE shard_2")
		for _, s := range e.shards {
			if s.src == src {
				mariadbtest.MustExec(t, db, "CREATE TABLE "+s.name()+" "+o.tableDDL())
			}
		}
		if o.uTables && src == 0 {
			mariadbtest.MustExec(t, db, "CREATE TABLE shard_1.u_1 (id INT NOT NULL PRIMARY KEY, a INT NOT NULL)",
				"CREATE TABLE shard_2.u_1 (id INT NOT NULL PRIMARY KEY, a INT NOT NULL)")
		}
	}
	if o.all {
		for _, s := range e.shards {
			for n := range o.seedRows {
				mariadbtest.MustExec(t, e.srcDB[s.src], fmt.Sprintf("INSERT INTO %s (id, k, v, n) VALUES (%d, %d, 'seed-%d', 0)",
					s.name(), s.id(n), s.k, n))
			}
		}
	} else {
		mariadbtest.MustExec(t, e.tgtDB, "CREATE DATABASE "+shardDB, "CREATE TABLE "+shardDB+".t "+o.tableDDL())
		if o.uTables {
			mariadbtest.MustExec(t, e.tgtDB, "CREATE TABLE "+shardDB+".u (id INT NOT NULL PRIMARY KEY, a INT NOT NULL)")
		}
	}

	for i := range e.w {
		name := fmt.Sprintf("w%d", i+1)
		e.wopts[i] = workerOptions{name: name, endpoints: e.c.endpoints, prefix: e.c.prefix, dataDir: t.TempDir(), args: o.workerArgs}
		e.w[i] = startWorker(t, e.wopts[i])
		e.procs = append(e.procs, e.w[i])
	}
	e.waitWorkersAlive()
	var instances strings.Builder
	for i, src := range e.src {
		e.c.ok("source", "create", writeFile(t, shardSources[i]+".yaml", fmt.Sprintf(`source-id: %s
flavor: mariadb
from: {host: 127.0.0.1, port: %d, user: root, password: ""}
checker: {check-enable: true, backoff-min: 200ms, backoff-max: 1s}
`, shardSources[i], src.Port())), "--worker", e.wopts[i].name)
		meta := ""
		if !o.all {
			file, pos, _ := src.MasterStatus(t)
			meta = fmt.Sprintf("\n    meta: {binlog-name: %s, binlog-pos: %d}", file, pos)
		}
		fmt.Fprintf(&instances, `
  - source-id: %s%s
    block-allow-list: shards
    route-rules: [merge-t, merge-u, merge-schema]
    syncer-config-name: small
    mydumper-config-name: chunks
    loader-config-name: pool`, shardSources[i], meta)
	}
	mode := "incremental"
	if o.all {
		mode = "all"
	}
	shardMode := "shard-mode: pessimistic"
	if o.isSharding {
		shardMode = "is-sharding: true"
	}
	if o.optimistic {
		shardMode = "shard-mode: optimistic"
	}
	if o.strict {
		shardMode += "\nstrict-optimistic-shard-mode: true"
	}
	if o.onlineDDL {
		shardMode += "\nonline-ddl: true"
	}
	e.c.ok("task", "start", writeFile(t, "shard-task.yaml", fmt.Sprintf(`name: %s
task-mode: %s
%s
target-database: {host: 127.0.0.1, port: %d, user: root, password: ""}
mysql-instances:%s
block-allow-list:
  shards: {do-dbs: ["shard_*"]}
routes:
  merge-t: {schema-pattern: "shard_*", table-pattern: "t_*", target-schema: %s, target-table: t}
  merge-u: {schema-pattern: "shard_*", table-pattern: "u_*", target-schema: %s, target-table: u}
  merge-schema: {schema-pattern: "shard_*", target-schema: %s}
syncers:
  small: {worker-count: 4, batch: 20, checkpoint-flush-interval: 1}
mydumpers:
  chunks: {threads: 2, rows: 100}
loaders:
  pool: {pool-size: 2}
`, shardTask, mode, shardMode, e.tgt.Port(), instances.String(), shardDB, shardDB, shardDB)))
	started := time.Now()
	e.waitSyncing(60 * time.Second)
	// A subtask shows unit Sync while its precheck still runs; a row of
	// every shard on the target proves the sync units read the binlog
	// (and that the precheck saw the shards as created, before any test
	// changes them).
	for _, s := range e.shards {
		e.exec(s, fmt.Sprintf("INSERT INTO %s (id, k, v, n) VALUES (%d, %d, 'probe', 0)", s.name(), s.id(shardProbeID), s.k))
	}
	e.waitMerged(60*time.Second, nil, shardColumns(false))
	t.Logf("both subtasks replicate %s after the task start (mode %s)", time.Since(started).Round(time.Millisecond), mode)
	return e
}

// id is the shard's n-th id.
func (s *shardTable) id(n int) int64 { return int64(s.k)*shardIDStep + int64(n) }

// waitWorkersAlive waits until `dmctl worker list` shows both workers
// alive.
func (e *shardEnv) waitWorkersAlive() {
	e.t.Helper()
	testutil.Eventually(e.t, 15*time.Second, "dmctl worker list shows w1 and w2 alive", func() error {
		var doc workerListDoc
		e.c.json(&doc, "worker", "list")
		alive := 0
		for _, w := range doc.Workers {
			if w.Alive {
				alive++
			}
		}
		if alive != 2 {
			return fmt.Errorf("worker list %+v", doc.Workers)
		}
		return nil
	})
}

// shardSubtask is the part of a sharding subtask's status the tests read
// (DESIGN.md §6).
type shardSubtask struct {
	Name   string `json:"name"`
	Stage  string `json:"stage"`
	Unit   string `json:"unit"`
	Errors []struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Resumable bool   `json:"resumable"`
	} `json:"errors"`
	ShardDDL *shardDDLStatus `json:"shard-ddl"`
}

// shardDDLStatus is the subtask's "shard-ddl" object.
type shardDDLStatus struct {
	Lock       string   `json:"lock"`
	State      string   `json:"state"`
	DDLs       []string `json:"ddls"`
	WaitingFor []struct {
		Source string `json:"source"`
		Table  string `json:"table"`
	} `json:"waiting-for"`
}

func (d shardSubtask) String() string {
	b, _ := json.Marshal(d)
	return string(b)
}

// subtask reads shardTask's status on worker i.
func (e *shardEnv) subtask(i int) (shardSubtask, error) {
	return getSubtask[shardSubtask](e.w[i], shardTask)
}

// waitSubtask waits up to d until shardTask's status on worker i
// satisfies cond and returns it.
func (e *shardEnv) waitSubtask(i int, d time.Duration, what string, cond func(shardSubtask) bool) shardSubtask {
	e.t.Helper()
	return waitSubtask(e.t, e.w[i], shardTask, d, fmt.Sprintf("%s: %s", e.wopts[i].name, what), cond)
}

// waitSyncing waits up to d until both subtasks run the sync unit without
// errors.
func (e *shardEnv) waitSyncing(d time.Duration) {
	e.t.Helper()
	for i := range e.w {
		e.waitSubtask(i, d, "the subtask syncs without errors", func(s shardSubtask) bool {
			return s.Stage == "Running" && s.Unit == "Sync" && len(s.Errors) == 0
		})
	}
}

// locks lists the locks of shardTask through dmctl.
func (e *shardEnv) locks() []shardddl.LockInfo {
	e.t.Helper()
	var doc struct {
		Locks  []shardddl.LockInfo `json:"locks"`
		Errors []string            `json:"errors"`
	}
	e.c.json(&doc, "shard-ddl-lock", shardTask)
	if len(doc.Errors) > 0 {
		e.t.Fatalf("dmctl shard-ddl-lock %s: errors %v", shardTask, doc.Errors)
	}
	return doc.Locks
}

// lock returns the listing of lock id; false when it is not listed.
func (e *shardEnv) lock(id string) (shardddl.LockInfo, bool) {
	e.t.Helper()
	for _, l := range e.locks() {
		if l.ID == id {
			return l, true
		}
	}
	return shardddl.LockInfo{}, false
}

// waitLock waits up to d until lock id is listed and satisfies cond, and
// returns it.
func (e *shardEnv) waitLock(id string, d time.Duration, what string, cond func(shardddl.LockInfo) bool) shardddl.LockInfo {
	e.t.Helper()
	var got shardddl.LockInfo
	start := time.Now()
	defer func() {
		if took := time.Since(start); took > 5*time.Second {
			e.t.Logf("lock %s: %s took %s", id, what, took.Round(time.Millisecond))
		}
	}()
	testutil.Eventually(e.t, d, "lock "+id+": "+what, func() error {
		l, ok := e.lock(id)
		if !ok {
			return fmt.Errorf("not listed; locks %s", e.locksText())
		}
		if !cond(l) {
			return fmt.Errorf("lock %s", lockText(l))
		}
		got = l
		return nil
	})
	return got
}

// waitNoLock waits up to d until dmctl lists no lock of shardTask.
func (e *shardEnv) waitNoLock(d time.Duration) {
	e.t.Helper()
	testutil.Eventually(e.t, d, "dmctl shard-ddl-lock lists no lock of "+shardTask, func() error {
		if l := e.locks(); len(l) > 0 {
			return fmt.Errorf("locks %s", e.locksText())
		}
		return nil
	})
}

func (e *shardEnv) locksText() string {
	var parts []string
	for _, l := range e.locks() {
		parts = append(parts, lockText(l))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func lockText(l shardddl.LockInfo) string {
	b, _ := json.Marshal(l)
	return string(b)
}

// hasMember reports whether ms lists s.
func hasMember(ms []shardddl.MemberTable, s *shardTable) bool {
	return slices.Contains(ms, s.member())
}

// alter runs stmt (with %s for the table) on shard s.
func (e *shardEnv) alter(s *shardTable, stmt string) {
	e.t.Helper()
	q := fmt.Sprintf(stmt, s.name())
	if _, err := e.srcDB[s.src].Exec(q); err != nil {
		e.t.Fatalf("%s: %s: %v", s, q, err)
	}
}

// kill kills worker i with SIGKILL and waits for it.
func (e *shardEnv) kill(i int) {
	e.t.Helper()
	e.w[i].signal(e.t, syscall.SIGKILL)
	if code, err := e.w[i].wait(10 * time.Second); err != nil || code != -1 {
		e.t.Fatalf("kill -9 of %s: exit code %d, %v; want killed by the signal", e.wopts[i].name, code, err)
	}
	e.t.Logf("killed %s (source %s) with SIGKILL", e.wopts[i].name, shardSources[i])
}

// restart starts worker i again on its data dir.
func (e *shardEnv) restart(i int) {
	e.t.Helper()
	e.w[i] = startWorker(e.t, e.wopts[i])
	e.procs = append(e.procs, e.w[i])
	e.t.Logf("restarted %s", e.wopts[i].name)
}

// sourceIndex is the index of source id.
func sourceIndex(t *testing.T, id string) int {
	t.Helper()
	i := slices.Index(shardSources[:], id)
	if i < 0 {
		t.Fatalf("lock owner %q is none of the sources %v", id, shardSources)
	}
	return i
}

// shardColumns is the column list the comparisons read; c2 once the
// tables have it.
func shardColumns(withC2 bool) string {
	cols := "LPAD(id, 12, '0') AS id, k, v, n"
	if withC2 {
		cols += ", c2"
	}
	return cols
}

// union reads the rows of every shard of shards, sorted by id.
func (e *shardEnv) union(shards []*shardTable, cols string) ([]string, error) {
	var out []string
	for _, s := range shards {
		rows, err := readRows(e.srcDB[s.src], "SELECT "+cols+" FROM "+s.name())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
		out = append(out, rows...)
	}
	slices.Sort(out) // the zero-padded id leads every row
	return out, nil
}

// targetRows reads the target table's rows whose ids belong to shards,
// sorted by id.
func (e *shardEnv) targetRows(shards []*shardTable, cols string) ([]string, error) {
	var ranges []string
	for _, s := range shards {
		ranges = append(ranges, fmt.Sprintf("id BETWEEN %d AND %d", s.id(0), s.id(shardIDStep-1)))
	}
	return readRows(e.tgtDB, "SELECT "+cols+" FROM "+shardDB+".t WHERE "+strings.Join(ranges, " OR ")+" ORDER BY id")
}

// waitMerged waits up to d until the target table holds exactly the rows
// of shards (all eight when shards is nil), row by row, and fails with the
// difference, both subtasks' status and the locks when it does not.
func (e *shardEnv) waitMerged(d time.Duration, shards []*shardTable, cols string) {
	e.t.Helper()
	if shards == nil {
		shards = e.shards
	}
	want, err := e.union(shards, cols)
	if err != nil {
		e.t.Fatalf("union of the shards: %v", err)
	}
	start := time.Now()
	var got []string
	err = testutil.Poll(d, func() error {
		got, err = e.targetRows(shards, cols)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return errors.New("rows differ")
		}
		return nil
	})
	if err != nil {
		e.t.Errorf("the target's %s.t is not the union of %d shards within %s (%v): %d rows in the shards, %d on the target:\n%s",
			shardDB, len(shards), d, err, len(want), len(got), diffRows(want, got, 8))
		e.dumpState()
		e.t.FailNow()
	}
	e.t.Logf("the target's %s.t is the union of %d shards (%d rows) after %s",
		shardDB, len(shards), len(want), time.Since(start).Round(time.Millisecond))
}

// dumpState logs both subtasks' status and the locks, for a failure.
func (e *shardEnv) dumpState() {
	e.t.Helper()
	for i := range e.w {
		st, err := e.subtask(i)
		e.t.Logf("%s subtask: %v %v", e.wopts[i].name, st, err)
	}
	if r := e.c.run("--output", "json", "shard-ddl-lock", shardTask); r.code == 0 {
		e.t.Logf("locks: %s", r.stdout)
	} else {
		e.t.Logf("dmctl shard-ddl-lock: exit %d: %s", r.code, r.stderr)
	}
	e.logShardLines()
}

// logShardLines logs the lines of every worker process's log that mention
// a shard DDL lock, for a failure.
func (e *shardEnv) logShardLines() {
	e.t.Helper()
	re := regexp.MustCompile("(?i)shard|lock|ddl|alter")
	for _, p := range e.procs {
		b, err := os.ReadFile(p.logFile)
		if err != nil {
			e.t.Logf("%s: %v", p.logFile, err)
			continue
		}
		var lines []string
		for line := range strings.SplitSeq(string(b), "\n") {
			if re.MatchString(line) {
				lines = append(lines, line)
			}
		}
		if len(lines) > 60 {
			lines = append([]string{"..."}, lines[len(lines)-60:]...)
		}
		e.t.Logf("%s (pid %d), its log's lines about shard DDL:\n%s", p.name, p.pid, strings.Join(lines, "\n"))
	}
}

// targetColumnType is the COLUMN_TYPE of column col of the target's
// shardDB.table, "" when it has none.
func (e *shardEnv) targetColumnType(table, col string) string {
	e.t.Helper()
	var typ string
	err := e.tgtDB.QueryRow("SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND COLUMN_NAME = ?",
		shardDB, table, col).Scan(&typ)
	if errors.Is(err, sql.ErrNoRows) {
		return ""
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return typ
}

// targetHasIndex reports whether the target's shardDB.table has index idx.
func (e *shardEnv) targetHasIndex(table, idx string) bool {
	e.t.Helper()
	var n int
	if err := e.tgtDB.QueryRow("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = ?",
		shardDB, table, idx).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n > 0
}

// targetAlters returns the ALTER TABLE statements the target ran on its
// table shardDB.table, from its general log (the worker's statements on
// its meta schema, and everything else, left out), and the log lines they
// came from (with the connection id and time).
func (e *shardEnv) targetAlters(table string) (stmts, lines []string) {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.tgt.Dir(), "data", "general.log"))
	if err != nil {
		e.t.Fatalf("the target's general log: %v", err)
	}
	re := regexp.MustCompile("(?i)\\bQuery\\s+(ALTER\\s+TABLE\\s+(?:`?" + shardDB + "`?\\.)?`?" + table + "`?(?:\\s|$).*)$")
	for line := range strings.SplitSeq(string(b), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			stmts = append(stmts, strings.TrimSpace(m[1]))
			lines = append(lines, line)
		}
	}
	return stmts, lines
}

// checkAltersOnce requires the target's general log to hold, for
// shardDB.table, exactly one ALTER TABLE matching each of want (regular
// expressions, case-insensitive) and no other ALTER TABLE.
func (e *shardEnv) checkAltersOnce(table string, want ...string) {
	e.t.Helper()
	counts := make([]alterCount, len(want))
	for i, w := range want {
		counts[i] = alterCount{re: w, min: 1, max: 1}
	}
	e.checkAlters(table, counts...)
}

// alterCount is how many ALTER TABLE statements matching re (a regular
// expression, case-insensitive) the target may have run.
type alterCount struct {
	re       string
	min, max int
}

// checkAlters requires the target's general log to hold, for
// shardDB.table, between min and max ALTER TABLE statements matching each
// of want (a statement counts for the first it matches) and no other ALTER
// TABLE.
func (e *shardEnv) checkAlters(table string, want ...alterCount) {
	e.t.Helper()
	alters, lines := e.targetAlters(table)
	counts := make([]int, len(want))
	var other []string
	for _, a := range alters {
		matched := false
		for i, w := range want {
			if regexp.MustCompile("(?i)" + w.re).MatchString(a) {
				counts[i]++
				matched = true
				break
			}
		}
		if !matched {
			other = append(other, a)
		}
	}
	bad := len(other) > 0
	for i, w := range want {
		if counts[i] < w.min || counts[i] > w.max {
			bad = true
			if w.min == w.max {
				e.t.Errorf("the target ran the DDL matching %q on %s.%s %d times, want exactly %d", w.re, shardDB, table, counts[i], w.min)
			} else {
				e.t.Errorf("the target ran the DDL matching %q on %s.%s %d times, want %d to %d", w.re, shardDB, table, counts[i], w.min, w.max)
			}
		}
	}
	if len(other) > 0 {
		e.t.Errorf("the target ran other ALTERs of %s.%s than the shards' DDLs: %q", shardDB, table, other)
	}
	if bad {
		e.t.Logf("the target's general log, ALTERs of %s.%s:\n%s", shardDB, table, strings.Join(lines, "\n"))
		e.logShardLines()
	}
	e.t.Logf("the target's ALTERs of %s.%s: %q", shardDB, table, alters)
}

// comAlterTable reads the target's Com_alter_table counter.
func (e *shardEnv) comAlterTable() int64 {
	e.t.Helper()
	var name string
	var n int64
	if err := e.tgtDB.QueryRow("SHOW GLOBAL STATUS LIKE 'Com_alter_table'").Scan(&name, &n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// shardWriters run one goroutine per shard that writes small transactions
// of INSERT/UPDATE/DELETE to its table until stop; they use c2 and wide
// values once the shard's flags say its table has them.
type shardWriters struct {
	stopc chan struct{}
	wg    sync.WaitGroup
	seed  uint64

	commits atomic.Int64

	once sync.Once
	mu   sync.Mutex
	errs []error // guarded by mu
}

// startShardWriters starts a writer on each of shards; stop (also run in
// t.Cleanup) ends them.
func (e *shardEnv) startShardWriters(shards []*shardTable) *shardWriters {
	e.t.Helper()
	w := &shardWriters{stopc: make(chan struct{}), seed: uint64(time.Now().UnixNano())}
	e.t.Logf("shard writers: %d, seed %d", len(shards), w.seed)
	for _, s := range shards {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.write(e.srcDB[s.src], s, rand.New(rand.NewPCG(w.seed, uint64(s.k))))
		}()
	}
	e.t.Cleanup(func() {
		if err := w.stop(); err != nil {
			e.t.Errorf("shard writers: %v", err)
		}
	})
	return w
}

// stop ends the writers after their current transaction and returns their
// errors.
func (w *shardWriters) stop() error {
	w.once.Do(func() { close(w.stopc) })
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(w.errs...)
}

// waitCommits waits up to d until the writers committed n more
// transactions than now.
func (w *shardWriters) waitMore(t *testing.T, d time.Duration, n int64) {
	t.Helper()
	want := w.commits.Load() + n
	testutil.Eventually(t, d, fmt.Sprintf("the shard writers commit %d more transactions", n), func() error {
		if got := w.commits.Load(); got < want {
			return fmt.Errorf("%d of %d commits", got, want)
		}
		return nil
	})
}

func (w *shardWriters) write(db *sql.DB, s *shardTable, rng *rand.Rand) {
	for {
		select {
		case <-w.stopc:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := shardTxn(ctx, db, s, rng)
		cancel()
		switch {
		case err == nil:
			w.commits.Add(1)
		case retryable(err):
		default:
			w.mu.Lock()
			w.errs = append(w.errs, fmt.Errorf("%s: %w", s, err))
			w.mu.Unlock()
			return
		}
		select {
		case <-w.stopc:
			return
		case <-time.After(time.Duration(3+rng.IntN(6)) * time.Millisecond):
		}
	}
}

// retryable is a deadlock, a lock wait timeout or a table definition that
// changed under the transaction (a concurrent ALTER).
func retryable(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	return me.Number == 1213 || me.Number == 1205 || me.Number == 1412
}

// shardTxn runs one transaction of 1 to 3 statements on s.
func shardTxn(ctx context.Context, db *sql.DB, s *shardTable, rng *rand.Rand) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	for range 1 + rng.IntN(3) {
		q, args := shardStatement(s, rng)
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return errors.Join(fmt.Errorf("%s: %w", q, err), tx.Rollback())
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// shardStatement is one random change of s; it sets c2 when the table has
// it and writes values longer than 32 characters once v was widened.
func shardStatement(s *shardTable, rng *rand.Rand) (string, []any) {
	id := s.id(rng.IntN(shardKeySpace))
	v := fmt.Sprintf("v-%d-%d", s.k, rng.IntN(1e6))
	if s.wide.Load() {
		v = fmt.Sprintf("wide-%040d", rng.Int64N(1e15))
	}
	c2 := s.c2.Load()
	switch op := rng.IntN(20); {
	case op < 9:
		if c2 {
			return "INSERT INTO " + s.name() + " (id, k, v, n, c2) VALUES (?, ?, ?, 0, ?) ON DUPLICATE KEY UPDATE n = n + 1, v = VALUES(v), c2 = VALUES(c2)",
				[]any{id, s.k, v, rng.IntN(1000)}
		}
		return "INSERT INTO " + s.name() + " (id, k, v, n) VALUES (?, ?, ?, 0) ON DUPLICATE KEY UPDATE n = n + 1, v = VALUES(v)",
			[]any{id, s.k, v}
	case op < 14:
		if c2 {
			return "UPDATE " + s.name() + " SET n = n + 1, v = ?, c2 = ? WHERE id = ?", []any{v, rng.IntN(1000), id}
		}
		return "UPDATE " + s.name() + " SET n = n + 1, v = ? WHERE id = ?", []any{v, id}
	case op < 16:
		// One rows event with several rows.
		return "UPDATE " + s.name() + " SET n = n + 1 WHERE id BETWEEN ? AND ?", []any{id, id + 10}
	default:
		return "DELETE FROM " + s.name() + " WHERE id = ?", []any{id}
	}
}
