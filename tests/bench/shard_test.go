//go:build bench

package bench

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// Parameters of the shard-merge benchmarks (issue #25).
const (
	shardRowsEnv   = "BENCH_SHARD_ROWS"   // row changes in the catch-up backlog (default 300000)
	shardRoundsEnv = "BENCH_SHARD_ROUNDS" // rounds of the merged and the separate run, the first alternating (default 3)
	// shardSourcesEnv is the topology: 1 (default) = one source with 2 schemas × 4 tables and one
	// worker; 2 = two sources with 2 schemas × 2 tables each and one worker per source.
	shardSourcesEnv = "BENCH_SHARD_SOURCES"
	shardLocksEnv   = "BENCH_SHARD_LOCKS" // shard DDL locks of the latency benchmark (default 20)
	// shardIsolationEnv, when set (READ-COMMITTED, ...), is the targets' transaction-isolation
	// (default: the server's, REPEATABLE-READ): an experiment on the target's gap locks.
	shardIsolationEnv = "BENCH_SHARD_TARGET_ISOLATION"
	// shardModeEnv is the merged run's shard-mode (default pessimistic; optimistic too).
	shardModeEnv = "BENCH_SHARD_MODE"

	shardTask = "bench-shard"
	// shardCount is the number of upstream shard tables, whatever the topology.
	shardCount     = 8
	shardTableSize = 25000
	// Shard g's ids lie in (g*shardStride, (g+1)*shardStride), so the shards' rows never collide
	// in the merged table (extend-column is not built): its initial rows are base+1..base+size,
	// the rows of multi-row inserts base+shardFresh+1 onwards.
	shardStride = 10_000_000
	shardFresh  = 5_000_000
	// shardMultiRows is the size of a multi-row INSERT and of a range UPDATE of the backlog.
	shardMultiRows = 10
	shardWriters   = 8
	shardMerged    = "merged.sbtest"
	shardTimeout   = 20 * time.Minute
	// shardPoll is how often the catch-up polls the workers' counters.
	shardPoll = 10 * time.Millisecond
	// shardDDLPoll is how often the latency benchmark polls the target's information_schema.
	shardDDLPoll = 5 * time.Millisecond
	// shardDDLTableSize is the size of each shard of the latency benchmark.
	shardDDLTableSize = 1000
	// Targets of issue #25.
	shardMergeRatioTarget = 0.9
	shardDDLP99Target     = time.Second
	// shardOwnerRan is the worker's log message when it ran a lock's DDL on the target.
	shardOwnerRan = "shard DDL lock: ran the DDL on the target as its owner"
	// shardHeld is its log message when it holds a table until the table's lock resolves.
	shardHeld = "shard DDL: table held until its lock resolves"
)

// shardTable is one upstream shard.
type shardTable struct {
	src           int // index of its source
	schema, table string
	base          int64        // ids are base+1 ... base+shardStride-1
	fresh         atomic.Int64 // fresh ids handed out to multi-row inserts so far
}

func (s *shardTable) name() string { return s.schema + "." + s.table }

// shardSource is one source of the shard benchmarks and the worker it is bound to.
type shardSource struct {
	inst   *mariadbtest.Instance
	db     *sql.DB
	id     string // source-id
	worker string // name of the worker it is bound to
	start  binlog.Location
}

// shardSetup is the sources and shards of one shard benchmark.
type shardSetup struct {
	sources []*shardSource
	shards  []*shardTable
	size    int64 // initial rows per shard
	// After the backlog: the exact row changes in it, and each shard's CHECKSUM TABLE and
	// content aggregate (shardAggregate) on its source.
	committed int64
	checksum  map[string]string
	aggregate map[string]string
}

// shardMode reads BENCH_SHARD_MODE.
func shardMode(t *testing.T) string {
	switch m := os.Getenv(shardModeEnv); m {
	case "", "pessimistic":
		return "pessimistic"
	case "optimistic":
		return m
	default:
		t.Fatalf("%s=%q: want pessimistic or optimistic", shardModeEnv, m)
		return ""
	}
}

// shardSourceCount reads BENCH_SHARD_SOURCES.
func shardSourceCount(t *testing.T) int {
	t.Helper()
	n := int(envInt(t, shardSourcesEnv, 1))
	if n != 1 && n != 2 {
		t.Fatalf("%s=%d: want 1 (one source, 2 schemas × 4 tables) or 2 (2 sources × 2 schemas × 2 tables)", shardSourcesEnv, n)
	}
	return n
}

// shardCreate is the CREATE TABLE of a shard, and of the merged table (sysbench's schema).
func shardCreate(table string) string {
	return "CREATE TABLE " + table + " (id INT NOT NULL AUTO_INCREMENT, k INT NOT NULL DEFAULT 0, " +
		"c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', PRIMARY KEY (id), KEY k_1 (k)) ENGINE=InnoDB"
}

// shardFill inserts shard s's initial rows into table (the shard itself, or the merged table),
// deterministically from the Sequence engine of database db, so no data crosses the wire.
func shardFill(s *shardTable, table, db string, size int64) string {
	return fmt.Sprintf("INSERT INTO %s (id, k, c, pad) SELECT %d + seq, (seq * 7919) %% %d + 1, "+
		"LEFT(REPEAT(MD5(%d + seq), 4), 119), LEFT(REPEAT(MD5(-(%d + seq)), 2), 59) FROM %s.seq_1_to_%d",
		table, s.base, size, s.base, s.base, db, size)
}

// newShardSetup starts the sources of a topology of n sources and creates the 8 shards with
// size initial rows each (sql_log_bin=0: every target loads them itself), then notes each
// source's binlog end, where the subtasks start.
func newShardSetup(t *testing.T, n int, size int64) *shardSetup {
	t.Helper()
	ctx := t.Context()
	st := &shardSetup{size: size}
	perSchema := shardCount / n / 2
	for i := range n {
		inst := startSource(t, fmt.Sprintf("shard-src-%d", i+1), syncMaxBinlog)
		src := &shardSource{inst: inst, db: inst.DB(t), id: fmt.Sprintf("%s-%d", benchSourceID, i+1),
			worker: fmt.Sprintf("%s-%d", benchWorker, i+1)}
		st.sources = append(st.sources, src)
		conn := pinnedConn(t, src.db)
		execAll(t, ctx, conn, "SET SESSION sql_log_bin = 0")
		for j := range 2 {
			schema := fmt.Sprintf("shard_%d", 2*i+j+1)
			execAll(t, ctx, conn, "CREATE DATABASE "+schema)
			for k := range perSchema {
				s := &shardTable{src: i, schema: schema, table: fmt.Sprintf("sbtest%d", k+1), base: int64(len(st.shards)) * shardStride}
				st.shards = append(st.shards, s)
				execAll(t, ctx, conn, shardCreate(s.name()), shardFill(s, s.name(), schema, size))
			}
		}
		execAll(t, ctx, conn, "SET SESSION sql_log_bin = 1")
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}
		file, pos, _ := inst.MasterStatus(t)
		src.start = binlog.Location{Name: file, Pos: pos}
	}
	return st
}

// shardTxn is one statement of a backlog transaction.
type shardTxn = benchStmt

// writeBacklog runs sysbench-like transactions on random shards from shardWriters connections
// until at least rows row changes are committed, then reads what the checks need. Three in four
// transactions are oltp_write_only's (UPDATE k by id, UPDATE c by id, DELETE by id and INSERT of
// the deleted id); the fourth is a multi-row INSERT of shardMultiRows new rows, a range UPDATE of
// shardMultiRows rows and a multi-row DELETE of 5 rows inserted 5 multi-row inserts earlier.
// The row changes are counted exactly (the rows each statement affected).
func (st *shardSetup) writeBacklog(t *testing.T, rows int64) {
	t.Helper()
	ctx := t.Context()
	began := time.Now()
	var done atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, shardWriters)
	for w := range shardWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 25))
			for done.Load() < rows {
				s := st.shards[rng.IntN(len(st.shards))]
				n, err := shardExec(ctx, st.sources[s.src].db, s, st.backlogTxn(rng, s))
				if err != nil {
					errc <- err
					return
				}
				done.Add(n)
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	st.committed = done.Load()
	var bytes int64
	for _, src := range st.sources {
		end := quietEnd(t, src.inst)
		bytes += backlogBytes(binaryLogs(t, src.db), src.start, end)
	}
	st.readExpected(t)
	t.Logf("shard backlog: %d row changes on %d shards of %d sources, %.1f MB of binlog, written in %v",
		st.committed, len(st.shards), len(st.sources), mb(bytes), since(began))
}

// backlogTxn draws one backlog transaction on shard s.
func (st *shardSetup) backlogTxn(rng *rand.Rand, s *shardTable) []shardTxn {
	tbl := s.name()
	id := func() int64 { return s.base + 1 + rng.Int64N(st.size) }
	if rng.IntN(4) != 0 {
		del := id()
		return []shardTxn{
			{"UPDATE " + tbl + " SET k = k + 1 WHERE id = ?", []any{id()}},
			{"UPDATE " + tbl + " SET c = ? WHERE id = ?", []any{sbString(rng, 120), id()}},
			{"DELETE FROM " + tbl + " WHERE id = ?", []any{del}},
			{"INSERT INTO " + tbl + " (id, k, c, pad) VALUES (?, ?, ?, ?)", []any{del, id() - s.base, sbString(rng, 120), sbString(rng, 60)}},
		}
	}
	first := s.base + shardFresh + s.fresh.Add(shardMultiRows) - shardMultiRows + 1
	args := make([]any, 0, 4*shardMultiRows)
	for i := range int64(shardMultiRows) {
		args = append(args, first+i, id()-s.base, sbString(rng, 120), sbString(rng, 60))
	}
	lo := s.base + 1 + rng.Int64N(st.size-shardMultiRows+1)
	txn := []shardTxn{
		{"INSERT INTO " + tbl + " (id, k, c, pad) VALUES " + strings.TrimSuffix(strings.Repeat("(?,?,?,?),", shardMultiRows), ","), args},
		{"UPDATE " + tbl + " SET k = k + 1 WHERE id BETWEEN ? AND ?", []any{lo, lo + shardMultiRows - 1}},
	}
	if old := first - 5*shardMultiRows; old > s.base+shardFresh {
		txn = append(txn, shardTxn{"DELETE FROM " + tbl + " WHERE id BETWEEN ? AND ?", []any{old, old + 4}})
	}
	return txn
}

// shardExec runs one transaction and returns the row changes it committed; deadlocks and lock
// wait timeouts are retried.
func shardExec(ctx context.Context, db *sql.DB, s *shardTable, txn []shardTxn) (int64, error) {
	n, err := execRetry(ctx, db, txn, 20)
	if err != nil {
		return 0, fmt.Errorf("backlog transaction on %s: %w", s.name(), err)
	}
	return n, nil
}

// shardAggregate is an order-independent digest of the rows of table whose id lies in
// (lo, hi), over the columns cols: count, and the sum and XOR of each row's CRC32.
func shardAggregate(t *testing.T, db *sql.DB, table string, lo, hi int64, cols []string) string {
	t.Helper()
	vals := make([]string, len(cols))
	for i, c := range cols {
		vals[i] = "IFNULL(" + c + ", '-')"
	}
	row := "CONCAT_WS('|', " + strings.Join(vals, ", ") + ")"
	q := fmt.Sprintf("SELECT COUNT(*), COALESCE(SUM(CRC32(%s)), 0), COALESCE(BIT_XOR(CRC32(%s)), 0) FROM %s WHERE id > %d AND id < %d",
		row, row, table, lo, hi)
	var n, sum, xor int64
	if err := db.QueryRowContext(t.Context(), q).Scan(&n, &sum, &xor); err != nil {
		t.Fatalf("%s: %v", clip(q), err)
	}
	return fmt.Sprintf("rows=%d sum=%d xor=%d", n, sum, xor)
}

var shardColumns = []string{"id", "k", "c", "pad"}

// readExpected reads every shard's CHECKSUM TABLE and aggregate on its source.
func (st *shardSetup) readExpected(t *testing.T) {
	t.Helper()
	st.checksum, st.aggregate = map[string]string{}, map[string]string{}
	for _, s := range st.shards {
		db := st.sources[s.src].db
		maps.Copy(st.checksum, tableChecksums(t, db, []string{s.name()}))
		st.aggregate[s.name()] = shardAggregate(t, db, s.name(), s.base, s.base+shardStride, shardColumns)
	}
}

// target starts a fresh target holding the shards' initial rows: merged, all of them in
// merged.sbtest; otherwise each shard in a table of its own name.
func (st *shardSetup) target(t *testing.T, name string, merged bool) *target {
	t.Helper()
	var extra []string
	if iso := os.Getenv(shardIsolationEnv); iso != "" {
		extra = append(extra, "transaction-isolation="+iso)
	}
	inst := startTarget(t, name, extra...)
	tgt := &target{inst: inst, db: inst.DB(t)}
	ctx := t.Context()
	if merged {
		execAll(t, ctx, tgt.db, "CREATE DATABASE merged", shardCreate(shardMerged))
		for _, s := range st.shards {
			execAll(t, ctx, tgt.db, shardFill(s, shardMerged, "merged", st.size))
		}
		return tgt
	}
	made := map[string]bool{}
	for _, s := range st.shards {
		if !made[s.schema] {
			execAll(t, ctx, tgt.db, "CREATE DATABASE "+s.schema)
			made[s.schema] = true
		}
		execAll(t, ctx, tgt.db, shardCreate(s.name()), shardFill(s, s.name(), s.schema, st.size))
	}
	return tgt
}

// check fails the test unless the target holds every shard's rows: merged, each shard's id
// range of merged.sbtest has the shard's aggregate and the table nothing else; otherwise each
// table has its shard's CHECKSUM TABLE.
func (st *shardSetup) check(t *testing.T, tgt *target, merged bool, cols []string) {
	t.Helper()
	if !merged {
		got := tableChecksums(t, tgt.db, slices.Collect(maps.Keys(st.checksum)))
		for tbl, sum := range st.checksum {
			if got[tbl] != sum {
				t.Errorf("%s differs from the source after catching up: checksum %s, source %s", tbl, got[tbl], sum)
			}
		}
		return
	}
	var total int64
	for _, s := range st.shards {
		want := st.aggregate[s.name()]
		if got := shardAggregate(t, tgt.db, shardMerged, s.base, s.base+shardStride, cols); got != want {
			t.Errorf("the rows of %s in %s differ from the shard: %s, shard %s", s.name(), shardMerged, got, want)
		}
		var n int64
		if _, err := fmt.Sscanf(want, "rows=%d", &n); err != nil {
			t.Fatal(err)
		}
		total += n
	}
	var n int64
	if err := tgt.db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+shardMerged).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != total {
		t.Errorf("%s holds %d rows, the shards %d", shardMerged, n, total)
	}
}

// putTask writes, under prefix, every source's config, its bound to its worker, and the
// subtask of the task into tgt (incremental from the source's start, default syncer settings,
// the shards' schemas selected) with its stage Running, as minimal JSON. merged routes every
// shard to merged.sbtest with shard-mode pessimistic; otherwise there are no routes.
func (st *shardSetup) putTask(t *testing.T, cli *clientv3.Client, prefix string, tgt *mariadbtest.Instance, merged bool) {
	t.Helper()
	js := func(v any) string {
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	type m = map[string]any
	keys := ha.Keys{Prefix: prefix}
	var ops []clientv3.Op
	for _, src := range st.sources {
		sub := m{"name": shardTask, "source-id": src.id, "task-mode": "incremental",
			"meta":             m{"binlog-name": src.start.Name, "binlog-pos": src.start.Pos},
			"target-database":  m{"host": tgt.Host(), "port": tgt.Port(), "user": mariadbtest.RootUser, "password": ""},
			"block-allow-list": m{"do-dbs": []string{"shard_*"}}}
		if n := os.Getenv("BENCH_SHARD_WORKER_COUNT"); n != "" {
			wc, err := strconv.Atoi(n)
			if err != nil {
				t.Fatalf("BENCH_SHARD_WORKER_COUNT=%q: %v", n, err)
			}
			sub["syncer"] = m{"worker-count": wc}
		}
		if merged {
			sub["shard-mode"] = shardMode(t)
			sub["route-rules"] = []m{{"schema-pattern": "shard_*", "table-pattern": "sbtest*", "target-schema": "merged", "target-table": "sbtest"}}
		}
		ops = append(ops,
			clientv3.OpPut(keys.SourceConfig(src.id), js(m{"source-id": src.id, "flavor": "mariadb", "enable-relay": false,
				"from": m{"host": src.inst.Host(), "port": src.inst.Port(), "user": mariadbtest.SourceUser, "password": mariadbtest.SourcePassword}})),
			clientv3.OpPut(keys.Bound(src.worker), js(m{"source": src.id, "worker": src.worker})),
			clientv3.OpPut(keys.SubTaskConfig(src.id, shardTask), js(sub)),
			clientv3.OpPut(keys.SubTaskStage(src.id, shardTask), js(m{"expect": "Running", "source": src.id, "task": shardTask})))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatalf("put the shard benchmark's task under %s: %v", prefix, err)
	}
}

// startWorkers starts one worker per source under prefix, with its data under work.
func (st *shardSetup) startWorkers(t *testing.T, bin binaries, etcd *etcdtest.Cluster, prefix, work string, extra ...string) []*workerProc {
	t.Helper()
	var ws []*workerProc
	for _, src := range st.sources {
		dataDir := filepath.Join(work, src.worker)
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, startWorker(t, bin, src.worker, strings.Join(etcd.Endpoints(), ","), prefix, dataDir, extra...))
	}
	return ws
}

// shardProgress is the part of a subtask's sync progress the shard benchmarks read.
type shardProgress struct {
	Binlog       string `json:"binlog"`
	Inserts      int64  `json:"inserts"`
	Updates      int64  `json:"updates"`
	Deletes      int64  `json:"deletes"`
	DDLs         int64  `json:"ddls"`
	Transactions int64  `json:"transactions"`
	Batches      int64  `json:"batches"`
	SafeMode     bool   `json:"safe-mode"`
}

// shardSubtask is the part of GET /api/v1/subtasks/{task} the shard benchmarks read.
type shardSubtask struct {
	Stage  string `json:"stage"`
	Unit   string `json:"unit"`
	Errors []struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Resumable bool   `json:"resumable"`
	} `json:"errors"`
	Progress shardProgress   `json:"progress"`
	ShardDDL json.RawMessage `json:"shard-ddl"`
}

// shardStatus reads the shard task's subtask on w; a non-resumable error fails the test.
func shardStatus(t *testing.T, w *workerProc) (shardSubtask, error) {
	t.Helper()
	var d shardSubtask
	code, body, err := httpGet(t.Context(), w.url("/api/v1/subtasks/"+shardTask))
	switch {
	case err != nil:
		return d, err
	case code != http.StatusOK:
		return d, fmt.Errorf("GET /api/v1/subtasks/%s on %s: %d %s", shardTask, w.name, code, clip(string(body)))
	}
	if err := json.Unmarshal(body, &d); err != nil {
		return d, fmt.Errorf("GET /api/v1/subtasks/%s on %s: %w\n%s", shardTask, w.name, err, clip(string(body)))
	}
	for _, e := range d.Errors {
		if !e.Resumable {
			t.Fatalf("subtask %s on %s failed: %s: %s", shardTask, w.name, e.Code, e.Message)
		}
	}
	return d, nil
}

// shardCatchUp is one timed catch-up of the backlog.
type shardCatchUp struct {
	elapsed time.Duration // from starting the workers until every row change is applied
	startup time.Duration // from starting the workers until every sync unit reads the binlog
	// The workers' CPU time and largest peak RSS (VmHWM), the target's and the sources' CPU.
	workerCPU, targetCPU, sourceCPU time.Duration
	peakRSS                         int64
	transactions, batches           int64
	// retries and pauses are the workers' batch retries after a lock conflict on the target and
	// the subtask's pauses (each followed by an automatic resume), from their logs.
	retries, pauses int
}

func (c shardCatchUp) rowsPerSec(rows int64) float64 { return float64(rows) / c.elapsed.Seconds() }

// runCatchUp catches the backlog up into a fresh target with fresh workers (one per source)
// whose task is in etcd under a prefix of the run's before they start; the clock runs from the
// start of the first worker until the workers' applied counters (inserts + updates + deletes,
// counted after each batch commits) reach the backlog's row changes and the target's content
// equals the shards' (contentDiff). The target is then checked.
func (st *shardSetup) runCatchUp(t *testing.T, bin binaries, cli *clientv3.Client, etcd *etcdtest.Cluster, merged bool, round int, work string) shardCatchUp {
	t.Helper()
	kind := map[bool]string{true: "merged", false: "separate"}[merged]
	tgt := st.target(t, "shard-target-"+kind, merged)
	prefix := fmt.Sprintf("/bench-shard-%s-%d", kind, round)
	st.putTask(t, cli, prefix, tgt.inst, merged)
	srcCPU0 := st.sourcesCPU(t)
	tgtCPU0 := serverCPU(t, tgt.inst)
	began := time.Now()
	ws := st.startWorkers(t, bin, etcd, prefix, filepath.Join(work, fmt.Sprintf("%s-%d", kind, round)))
	var profs []*profiler
	if p := os.Getenv(profileEnv); p != "" {
		for _, w := range ws {
			profs = append(profs, startProfiler(t.Context(), w, p, fmt.Sprintf("shard-%s-%d-%s", kind, round, w.name)))
		}
	}
	var res shardCatchUp
	var last []shardSubtask
	deadline := time.Now().Add(shardTimeout)
	for {
		var applied int64
		reading := 0
		last = last[:0]
		for _, w := range ws {
			d, err := shardStatus(t, w)
			if err != nil {
				if time.Now().After(deadline) {
					t.Fatal(err)
				}
				continue
			}
			last = append(last, d)
			applied += d.Progress.Inserts + d.Progress.Updates + d.Progress.Deletes
			if d.Stage == "Running" && d.Unit == "Sync" && d.Progress.Binlog != "" {
				reading++
			}
		}
		if res.startup == 0 && reading == len(ws) {
			res.startup = time.Since(began)
		}
		if applied >= st.committed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s catch-up: %d of %d row changes applied after %v; subtasks %+v", kind, applied, st.committed, shardTimeout, last)
		}
		time.Sleep(shardPoll)
	}
	res.elapsed = time.Since(began)
	// The counters count every batch committed, so a replay after a pause (a batch that lost
	// its lock conflicts LockConflictAttempts times pauses the subtask, which resumes from its
	// checkpoint) counts some changes twice: the content decides, and when it is not there yet
	// the clock runs on until a check finds it.
	for first := true; ; first = false {
		diff := st.contentDiff(t, tgt, merged)
		if diff == "" {
			if !first {
				res.elapsed = time.Since(began)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s catch-up: the target still differs after %v: %s", kind, shardTimeout, diff)
		}
		time.Sleep(shardPoll)
	}
	res.targetCPU = serverCPU(t, tgt.inst) - tgtCPU0
	res.sourceCPU = st.sourcesCPU(t) - srcCPU0
	for _, d := range last {
		res.transactions += d.Progress.Transactions
		res.batches += d.Progress.Batches
	}
	for _, w := range ws {
		cpu, err := procCPU(w.pidString())
		if err != nil {
			t.Fatal(err)
		}
		hwm, err := vmHWM(w.pidString())
		if err != nil {
			t.Fatalf("peak RSS of %s: %v", w.name, err)
		}
		res.workerCPU += cpu
		res.peakRSS = max(res.peakRSS, hwm*1024)
	}
	for _, p := range profs {
		files, err := p.stop()
		if err != nil {
			t.Errorf("CPU profile of dm-worker: %v", err)
		}
		t.Logf("round %d, %s: CPU profiles: go tool pprof -top %s", round, kind, strings.Join(files, " "))
	}
	for _, w := range ws {
		w.stop(t)
		res.retries += countLogLines(t, w, "batch aborted by the target; retrying")
		res.pauses += countLogLines(t, w, "subtask failed")
	}
	st.check(t, tgt, merged, shardColumns)
	if res.retries > 0 {
		t.Logf("round %d, %s: the target's latest detected deadlock:\n%s", round, kind, latestDeadlock(t, tgt.db))
	}
	t.Logf("round %d, %s: %v, %.0f rows/s (sync units reading at %v), CPU: workers %v, target %v, sources %v; "+
		"peak RSS %.1f MiB; %d transactions in %d batches (counters, replays included); %d batch retries after lock conflicts, %d pauses",
		round, kind, res.elapsed.Round(time.Millisecond), res.rowsPerSec(st.committed), res.startup.Round(time.Millisecond),
		res.workerCPU, res.targetCPU, res.sourceCPU, mib(res.peakRSS), res.transactions, res.batches, res.retries, res.pauses)
	tgt.kill(t)
	return res
}

// contentDiff compares every shard's aggregate (shardAggregate over shardColumns) with its
// id range of the target's merged table, or of its own table; "" when all are equal. Both
// kinds of target get the same 8 range queries over the same rows.
func (st *shardSetup) contentDiff(t *testing.T, tgt *target, merged bool) string {
	t.Helper()
	for _, s := range st.shards {
		table := s.name()
		if merged {
			table = shardMerged
		}
		if got, want := shardAggregate(t, tgt.db, table, s.base, s.base+shardStride, shardColumns), st.aggregate[s.name()]; got != want {
			return fmt.Sprintf("%s in %s: %s, source %s", s.name(), table, got, want)
		}
	}
	return ""
}

// countLogLines counts the lines of w's log that contain msg.
func countLogLines(t *testing.T, w *workerProc, msg string) int {
	t.Helper()
	raw, err := os.ReadFile(w.logFile)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(raw), msg)
}

// latestDeadlock is the LATEST DETECTED DEADLOCK section of the server's InnoDB status.
func latestDeadlock(t *testing.T, db *sql.DB) string {
	t.Helper()
	var typ, name, status string
	if err := db.QueryRowContext(t.Context(), "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		t.Fatalf("SHOW ENGINE INNODB STATUS: %v", err)
	}
	i := strings.Index(status, "LATEST DETECTED DEADLOCK")
	if i < 0 {
		return "(none)"
	}
	rest := status[i:]
	if j := strings.Index(rest, "\nTRANSACTIONS\n"); j > 0 {
		rest = rest[:j]
	}
	if len(rest) > 6000 {
		rest = rest[:6000] + "..."
	}
	return rest
}

// sourcesCPU is the CPU time all sources' mariadbd used so far.
func (st *shardSetup) sourcesCPU(t *testing.T) time.Duration {
	t.Helper()
	var sum time.Duration
	for _, src := range st.sources {
		sum += serverCPU(t, src.inst)
	}
	return sum
}

// TestShardMergeCatchUp is issue #25's throughput benchmark: a backlog of BENCH_SHARD_ROWS
// row changes (sysbench-like point and multi-row INSERTs, UPDATEs and DELETEs, see
// writeBacklog) on 8 shard tables, caught up by real dm-worker processes with their task in
// etcd (a) merged into one target table merged.sbtest with shard-mode pessimistic and (b) into
// 8 target tables of the shards' names, no routes, no shard mode. BENCH_SHARD_ROUNDS rounds run
// both, the first alternating, each into a fresh target holding the initial rows; the medians
// are reported, with merged/separate rows/s against the 0.9×.
func TestShardMergeCatchUp(t *testing.T) {
	rows := envInt(t, shardRowsEnv, 300_000)
	rounds := int(envInt(t, shardRoundsEnv, 3))
	load0 := loadAvg(t)
	bin := buildBinaries(t)
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	st := newShardSetup(t, shardSourceCount(t), shardTableSize)
	st.writeBacklog(t, rows)
	work := t.TempDir()
	runs := [2][]shardCatchUp{} // merged, separate
	for round := range rounds {
		for k := range 2 {
			i := (round + k) % 2
			runs[i] = append(runs[i], st.runCatchUp(t, bin, cli, etcd, i == 0, round, work))
		}
	}
	took := func(c shardCatchUp) time.Duration { return c.elapsed }
	merged, separate := median(runs[0], took), median(runs[1], took)
	r := ratio(merged.rowsPerSec(st.committed), separate.rowsPerSec(st.committed))
	var peak int64
	for _, c := range slices.Concat(runs[0], runs[1]) {
		peak = max(peak, c.peakRSS)
	}
	each := func(cs []shardCatchUp) string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = fmt.Sprintf("%.0f", c.rowsPerSec(st.committed))
		}
		return strings.Join(out, "/")
	}
	conflicts := func(cs []shardCatchUp) string {
		var retries, pauses int
		for _, c := range cs {
			retries, pauses = retries+c.retries, pauses+c.pauses
		}
		return fmt.Sprintf("%d/%d", retries, pauses)
	}
	// On a shared machine CPU time varies less than wall time: the CPU (workers + target) each
	// case spent on the backlog, median of the rounds, separate over merged.
	cpu := func(c shardCatchUp) time.Duration { return c.workerCPU + c.targetCPU }
	mergedCPU, separateCPU := cpu(median(runs[0], cpu)), cpu(median(runs[1], cpu))
	record(t, "shard-merge-catch-up",
		f("row_changes", st.committed), f("sources", len(st.sources)), f("shards", len(st.shards)), f("rounds", rounds),
		f("merged_rows_per_s", merged.rowsPerSec(st.committed)), f("separate_rows_per_s", separate.rowsPerSec(st.committed)),
		f("ratio", r), f("target", verdict(r, shardMergeRatioTarget)),
		f("cpu_ratio", ratio(separateCPU.Seconds(), mergedCPU.Seconds())),
		f("merged_cpu_s", mergedCPU.Seconds()), f("separate_cpu_s", separateCPU.Seconds()),
		f("merged_each", each(runs[0])), f("separate_each", each(runs[1])),
		f("merged_s", merged.elapsed.Seconds()), f("separate_s", separate.elapsed.Seconds()),
		f("merged_startup_s", merged.startup.Seconds()), f("separate_startup_s", separate.startup.Seconds()),
		f("merged_worker_cpu_s", merged.workerCPU.Seconds()), f("separate_worker_cpu_s", separate.workerCPU.Seconds()),
		f("merged_target_cpu_s", merged.targetCPU.Seconds()), f("separate_target_cpu_s", separate.targetCPU.Seconds()),
		f("merged_batches", merged.batches), f("separate_batches", separate.batches),
		f("merged_peak_rss_MiB", mib(merged.peakRSS)), f("separate_peak_rss_MiB", mib(separate.peakRSS)),
		f("max_peak_rss_MiB", mib(peak)),
		f("merged_retries_pauses", conflicts(runs[0])), f("separate_retries_pauses", conflicts(runs[1])),
		f("target_isolation", cmp.Or(os.Getenv(shardIsolationEnv), "default")),
		f("cpus", 2), f("loadavg_start", load0), f("loadavg_end", loadAvg(t)))
}

// TestShardDDLLatency is issue #25's lock latency benchmark: 8 shards of shardDDLTableSize rows
// merged into merged.sbtest by real dm-worker processes (task in etcd, shard-mode pessimistic),
// then BENCH_SHARD_LOCKS locks one after the other: `ALTER TABLE … ADD COLUMN cN INT` on every
// shard in turn, each ALTER but the last followed by an INSERT on that shard that uses cN (held
// until the lock resolves). The latency of a lock runs from the return of the last shard's
// ALTER (it is then in the binlog) until cN is on the target, seen by polling
// information_schema.COLUMNS every 5 ms, and, as a second reading, until the time stamp of the
// worker's log line saying it ran the DDL. The next lock starts once no subtask shows shard-ddl
// (the held rows re-synced). At the end the target must hold the union of the shards and have
// run exactly one ALTER TABLE per lock.
func TestShardDDLLatency(t *testing.T) {
	locks := int(envInt(t, shardLocksEnv, 20))
	load0 := loadAvg(t)
	bin := buildBinaries(t)
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	st := newShardSetup(t, shardSourceCount(t), shardDDLTableSize)
	tgt := st.target(t, "shard-ddl-target", true)
	prefix := "/bench-shard-ddl"
	st.putTask(t, cli, prefix, tgt.inst, true)
	ws := st.startWorkers(t, bin, etcd, prefix, t.TempDir(), "--log-format", "json")
	ctx := t.Context()
	shares := prefix + "/shardddl/" + shardTask + "/merged/sbtest/share/"
	testutil.Eventually(t, time.Minute, "every sync unit reads the binlog and every source published its share", func() error {
		for _, w := range ws {
			d, err := shardStatus(t, w)
			if err != nil {
				return err
			}
			if d.Stage != "Running" || d.Unit != "Sync" || d.Progress.Binlog == "" {
				return fmt.Errorf("%s: %+v", w.name, d)
			}
		}
		resp, err := cli.Get(ctx, shares, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		if resp.Count != int64(len(st.sources)) {
			return fmt.Errorf("%d shares under %s, want %d", resp.Count, shares, len(st.sources))
		}
		return nil
	})
	alters0 := comAlterTable(t, tgt.db)
	var polled, resolved []time.Duration
	lastALTER := make([]time.Time, locks)
	var alterTook []time.Duration
	for n := 1; n <= locks; n++ {
		col := fmt.Sprintf("c%d", n)
		for i, s := range st.shards {
			db := st.sources[s.src].db
			q := fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s INT", s.name(), col)
			sent := time.Now()
			execAll(t, ctx, db, q)
			if i == len(st.shards)-1 {
				lastALTER[n-1] = time.Now()
				alterTook = append(alterTook, lastALTER[n-1].Sub(sent))
				break
			}
			id := s.base + shardFresh + s.fresh.Add(1)
			execAll(t, ctx, db, fmt.Sprintf("INSERT INTO %s (id, k, c, pad, %s) VALUES (%d, %d, 'held', 'held', %d)", s.name(), col, id, n, n))
		}
		seen := waitColumn(t, tgt.db, ws, col, lastALTER[n-1])
		polled = append(polled, seen.Sub(lastALTER[n-1]))
		testutil.Eventually(t, time.Minute, "no subtask shows a shard DDL lock after "+col, func() error {
			for _, w := range ws {
				d, err := shardStatus(t, w)
				if err != nil {
					return err
				}
				if len(d.ShardDDL) > 0 && string(d.ShardDDL) != "null" {
					return fmt.Errorf("%s: shard-ddl %s", w.name, d.ShardDDL)
				}
			}
			return nil
		})
		resolved = append(resolved, time.Since(lastALTER[n-1]))
		t.Logf("lock %d: %s on the target %v after the last shard's ALTER returned (that ALTER took %v); no lock shown after %v",
			n, col, polled[n-1].Round(time.Millisecond), alterTook[n-1].Round(time.Millisecond), resolved[n-1].Round(time.Millisecond))
	}
	cols := slices.Clone(shardColumns)
	for n := 1; n <= locks; n++ {
		cols = append(cols, fmt.Sprintf("c%d", n))
	}
	st.readExpectedColumns(t, cols)
	testutil.Eventually(t, time.Minute, shardMerged+" holds the union of the shards", func() error {
		for _, s := range st.shards {
			want := st.aggregate[s.name()]
			if got := shardAggregate(t, tgt.db, shardMerged, s.base, s.base+shardStride, cols); got != want {
				return fmt.Errorf("%s in %s: %s, shard %s", s.name(), shardMerged, got, want)
			}
		}
		return nil
	})
	if got := comAlterTable(t, tgt.db) - alters0; got != int64(locks) {
		t.Errorf("the target ran %d ALTER TABLE for %d locks; want exactly one each", got, locks)
	}
	var peak int64
	for _, w := range ws {
		hwm, err := vmHWM(w.pidString())
		if err != nil {
			t.Fatal(err)
		}
		peak = max(peak, hwm*1024)
	}
	for _, w := range ws {
		w.stop(t)
	}
	last := st.shards[len(st.shards)-1]
	ran := logTimes(t, ws, shardOwnerRan, "", locks)
	held := logTimes(t, ws, shardHeld, "`"+last.schema+"`.`"+last.table+"`", locks)
	var fromLog, toHeld, heldToRan []time.Duration
	for n := 1; n <= locks; n++ {
		col := fmt.Sprintf("c%d", n)
		r, ok := ran[col]
		if !ok {
			continue
		}
		fromLog = append(fromLog, r.Sub(lastALTER[n-1]))
		if h, ok := held[col]; ok {
			toHeld = append(toHeld, h.Sub(lastALTER[n-1]))
			heldToRan = append(heldToRan, r.Sub(h))
			t.Logf("lock %d, from the worker logs: the last shard held %v after its ALTER returned, the owner ran the DDL %v after that",
				n, h.Sub(lastALTER[n-1]).Round(time.Millisecond), r.Sub(h).Round(time.Millisecond))
		}
	}
	if len(fromLog) != locks {
		t.Errorf("the workers' logs say %q for %d of %d locks", shardOwnerRan, len(fromLog), locks)
	}
	p99 := percentile(polled, 0.99)
	record(t, "shard-ddl-latency",
		f("locks", locks), f("sources", len(st.sources)), f("shards", len(st.shards)),
		f("p50_ms", ms(percentile(polled, 0.5))), f("p99_ms", ms(p99)), f("max_ms", ms(slices.Max(polled))),
		f("target", durationVerdict(p99, shardDDLP99Target)),
		f("log_p50_ms", ms(percentile(fromLog, 0.5))), f("log_p99_ms", ms(percentile(fromLog, 0.99))),
		f("last_held_p50_ms", ms(percentile(toHeld, 0.5))), f("held_to_ran_p50_ms", ms(percentile(heldToRan, 0.5))),
		f("held_to_ran_p99_ms", ms(percentile(heldToRan, 0.99))),
		f("released_p50_ms", ms(percentile(resolved, 0.5))), f("released_p99_ms", ms(percentile(resolved, 0.99))),
		f("last_alter_p50_ms", ms(percentile(alterTook, 0.5))),
		f("peak_rss_MiB", mib(peak)), f("cpus", 2), f("loadavg_start", load0), f("loadavg_end", loadAvg(t)))
}

// waitColumn polls the target's information_schema.COLUMNS every shardDDLPoll until
// merged.sbtest has column col and returns when it saw it; the workers' subtasks are checked for
// errors every 100 ms meanwhile.
func waitColumn(t *testing.T, db *sql.DB, ws []*workerProc, col string, since time.Time) time.Time {
	t.Helper()
	checked := time.Now()
	for {
		var c int
		if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM information_schema.COLUMNS "+
			"WHERE TABLE_SCHEMA = 'merged' AND TABLE_NAME = 'sbtest' AND COLUMN_NAME = ?", col).Scan(&c); err != nil {
			t.Fatalf("read the columns of %s: %v", shardMerged, err)
		}
		if c == 1 {
			return time.Now()
		}
		if time.Since(checked) >= 100*time.Millisecond {
			checked = time.Now()
			for _, w := range ws {
				_, _ = shardStatus(t, w) // fails the test on a non-resumable error
			}
		}
		if time.Since(since) > time.Minute {
			t.Fatalf("no column %s on %s a minute after the last shard's ALTER", col, shardMerged)
		}
		time.Sleep(shardDDLPoll)
	}
}

// readExpectedColumns reads every shard's aggregate over cols on its source.
func (st *shardSetup) readExpectedColumns(t *testing.T, cols []string) {
	t.Helper()
	st.aggregate = map[string]string{}
	for _, s := range st.shards {
		st.aggregate[s.name()] = shardAggregate(t, st.sources[s.src].db, s.name(), s.base, s.base+shardStride, cols)
	}
}

// comAlterTable is the target's Com_alter_table counter.
func comAlterTable(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var name string
	var n int64
	if err := db.QueryRowContext(t.Context(), "SHOW GLOBAL STATUS LIKE 'Com_alter_table'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// logTimes reads the workers' JSON logs and returns, per added column cN (1 <= N <= locks), the
// time stamp of the line with message msg whose ddls add that column (and, when table is set,
// whose table is table).
func logTimes(t *testing.T, ws []*workerProc, msg, table string, locks int) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	for _, w := range ws {
		raw, err := os.ReadFile(w.logFile)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(raw)) {
			if !strings.Contains(line, msg) {
				continue
			}
			var rec struct {
				TS    string   `json:"ts"`
				Msg   string   `json:"msg"`
				Table string   `json:"table"`
				DDLs  []string `json:"ddls"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("log line of %s: %v\n%s", w.name, err, line)
			}
			if rec.Msg != msg || (table != "" && rec.Table != table) {
				continue
			}
			ts, err := time.Parse("2006-01-02T15:04:05.000Z0700", rec.TS)
			if err != nil {
				t.Fatalf("time stamp of a log line of %s: %v\n%s", w.name, err, line)
			}
			for n := 1; n <= locks; n++ {
				col := fmt.Sprintf("c%d", n)
				for _, d := range rec.DDLs {
					if strings.Contains(d, "`"+col+"`") {
						out[col] = ts
					}
				}
			}
		}
	}
	return out
}

// loadAvg is the machine's 1-minute load average (/proc/loadavg): the benchmarks share the
// machine, so their rows say how busy it was.
func loadAvg(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatalf("read /proc/loadavg: %v", err)
	}
	return strings.Fields(string(raw))[0]
}

// percentile is the nearest-rank percentile p (0 < p <= 1) of ds; 0 when ds is empty.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[max(0, int(math.Ceil(p*float64(len(s))))-1)]
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// durationVerdict says whether a duration stays below its target.
func durationVerdict(got, limit time.Duration) string {
	if got < limit {
		return fmt.Sprintf("met(<%v)", limit)
	}
	return fmt.Sprintf("MISSED(<%v,over_by_%.0f%%)", limit, 100*(float64(got)/float64(limit)-1))
}
