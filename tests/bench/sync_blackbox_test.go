//go:build bench

package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// Parameters of the black-box sync benchmark (defaults: issue #16's run).
const (
	bbSecondsEnv   = "BENCH_BB_SECONDS"    // sysbench --time (default 30)
	bbThreadsEnv   = "BENCH_BB_THREADS"    // sysbench --threads (default 4)
	bbTablesEnv    = "BENCH_BB_TABLES"     // sysbench --tables (default 4)
	bbTableSizeEnv = "BENCH_BB_TABLE_SIZE" // sysbench --table-size (default 50000)
	bbRoundsEnv    = "BENCH_BB_ROUNDS"     // rounds of the three replicators, the first rotating (default 3)
	// bbBusyEnv, when set to 1, keeps one extra busy-looping process running during the runs.
	bbBusyEnv = "BENCH_BB_BUSY"
	bbTask    = "bench-bb"
	// bbMarker is the table whose one row, written last on the source, ends every catch-up.
	bbMarker  = sbSchema + ".bench_marker"
	bbTimeout = 20 * time.Minute
	// bbConverge bounds the wait for the target's content after the marker row arrived.
	bbConverge = 2 * time.Minute
)

// bbSettings are the my.cnf lines of every server of the black-box run (with FastCommit:
// innodb_flush_log_at_trx_commit=2).
var bbSettings = []string{"innodb_buffer_pool_size=256M", "innodb_log_file_size=128M"}

// bbBacklog is the black-box run's source: sysbench's tables prepared by sysbench, then an
// oltp_write_only run and the marker row in the binlog from start.
type bbBacklog struct {
	src    *mariadbtest.Instance
	start  binlog.Location
	tables []string
	seed   []string           // statements that create the schema and tables on a target
	rows   map[string][][]any // each sysbench table's rows at the backlog start
	txns   int64
	bytes  int64
	want   map[string]string // CHECKSUM TABLE of every table after the backlog
	// prepMarker, when set, is a table whose one row the source wrote right after sysbench's
	// prepare (TestSyncFromPos4); waitDone then also times its arrival, into prepared by
	// target name.
	prepMarker string
	prepared   map[string][]time.Duration
	// syncer, when set, is the task's syncer section (JSON); else the defaults apply.
	syncer map[string]any
	// taskAfterStart (TestSyncFromPos4) starts the worker with only its source and bound in
	// etcd and writes the subtask config and stage once it serves /healthz, as an operator
	// starts a task on a running worker: the run is then also timed from that write (the
	// counterpart of native's START SLAVE on a running server), into fromTask by target
	// name, and the target's CPU until the prepare's marker row into prepCPU.
	taskAfterStart bool
	taskAt         []time.Duration // per round: the subtask write, since the process start
	prepCPU        map[string][]time.Duration
}

// TestSyncBlackBox is issue #16's black-box run: sysbench prepares BENCH_BB_TABLES tables of
// BENCH_BB_TABLE_SIZE rows on a source, runs oltp_write_only with BENCH_BB_THREADS threads for
// BENCH_BB_SECONDS seconds and a marker row is written last. Then, BENCH_BB_ROUNDS times each,
// the first one rotating, each into a fresh target holding the initial rows: (a) a real
// dm-worker process whose source, bound, subtask (incremental from the backlog start, default
// syncer settings) and stage are written into etcd before it starts, timed from the process's
// start; (b) native replication single-threaded and (c) with slave_parallel_threads=4,
// optimistic, timed from START SLAVE; each until the marker row is on the target, whose every
// table must then have the source's CHECKSUM TABLE.
func TestSyncBlackBox(t *testing.T) {
	if _, err := exec.LookPath("sysbench"); err != nil {
		t.Skipf("sysbench is not installed (bash scripts/install-deps.sh --bench): %v", err)
	}
	rounds := int(envInt(t, bbRoundsEnv, 3))
	bin := buildBinaries(t)
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	b := newBBBacklog(t)
	if os.Getenv(bbBusyEnv) == "1" {
		startBusy(t)
	}
	work := t.TempDir()
	replicators := []func(round int) catchUp{
		func(round int) catchUp { return b.runWorker(t, bin, cli, etcd, round, work) },
		func(round int) catchUp { return b.runNative(t, round, 0) },
		func(round int) catchUp { return b.runNative(t, round, nativeParallel) },
	}
	runs := make([][]catchUp, len(replicators))
	for round := range rounds {
		for k := range replicators {
			i := (round + k) % len(replicators)
			runs[i] = append(runs[i], replicators[i](round))
		}
	}
	took := func(c catchUp) time.Duration { return c.elapsed }
	dm, single, parallel := median(runs[0], took), median(runs[1], took), median(runs[2], took)
	rSingle := ratio(single.elapsed.Seconds(), dm.elapsed.Seconds())
	rParallel := ratio(parallel.elapsed.Seconds(), dm.elapsed.Seconds())
	record(t, "sync-black-box",
		f("transactions", b.txns), f("row_changes", 4*b.txns), f("binlog_MB", mb(b.bytes)), f("tables", len(b.tables)),
		f("rounds", rounds), f("busy_process", os.Getenv(bbBusyEnv) == "1"),
		f("ratio_vs_native1", rSingle), f("target_vs_native1", verdict(rSingle, 1.5)),
		f("ratio_vs_native4", rParallel), f("target_vs_native4", verdict(rParallel, 1.2)),
		f("dm_s", dm.elapsed.Seconds()), f("native1_s", single.elapsed.Seconds()), f("native4_s", parallel.elapsed.Seconds()),
		f("dm_startup_s", dm.startup.Seconds()),
		f("dm_cpu_s", dm.child.CPU.Seconds()), f("dm_peak_rss_MB", mb(dm.child.PeakRSS)),
		f("target_dm_cpu_s", dm.targetCPU.Seconds()), f("target_native1_cpu_s", single.targetCPU.Seconds()),
		f("target_native4_cpu_s", parallel.targetCPU.Seconds()),
		f("source_cpu_s_dm", dm.sourceCPU.Seconds()), f("source_cpu_s_native1", single.sourceCPU.Seconds()))
}

// newBBBacklog starts the source, has sysbench prepare and run on it, writes the marker row
// and reads what every target needs.
func newBBBacklog(t *testing.T) *bbBacklog {
	t.Helper()
	ctx := t.Context()
	tables, size := envInt(t, bbTablesEnv, 4), envInt(t, bbTableSizeEnv, 50000)
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "bb-src", Binlog: true, FastCommit: true, ExtraConfig: bbSettings})
	db := src.DB(t)
	execAll(t, ctx, db, "CREATE DATABASE "+sbSchema)
	sb := func(cmd string, extra ...string) string {
		args := append([]string{"oltp_write_only", "--db-driver=mysql", "--mysql-host=" + src.Host(),
			"--mysql-port=" + strconv.Itoa(src.Port()), "--mysql-user=" + mariadbtest.RootUser, "--mysql-password=",
			"--mysql-db=" + sbSchema, fmt.Sprintf("--tables=%d", tables), fmt.Sprintf("--table-size=%d", size)}, extra...)
		out, err := exec.CommandContext(ctx, "sysbench", append(args, cmd)...).CombinedOutput()
		if err != nil {
			t.Fatalf("sysbench %s: %v\n%s", cmd, err, out)
		}
		return string(out)
	}
	began := time.Now()
	sb("prepare")
	execAll(t, ctx, db, "CREATE TABLE "+bbMarker+" (id INT NOT NULL PRIMARY KEY, note VARCHAR(64) NOT NULL) ENGINE=InnoDB")
	b := &bbBacklog{src: src, rows: map[string][][]any{}}
	for i := 1; i <= int(tables); i++ {
		b.tables = append(b.tables, fmt.Sprintf("%s.sbtest%d", sbSchema, i))
	}
	b.seed = append([]string{"CREATE DATABASE " + sbSchema}, createStatements(t, db, b.allTables())...)
	for _, tbl := range b.tables {
		b.rows[tbl] = tableRows(t, db, tbl)
	}
	file, pos, _ := src.MasterStatus(t)
	b.start = binlog.Location{Name: file, Pos: pos}
	prepared := since(began)
	out := sb("run", fmt.Sprintf("--threads=%d", envInt(t, bbThreadsEnv, 4)),
		fmt.Sprintf("--time=%d", envInt(t, bbSecondsEnv, 30)), "--report-interval=0")
	m := regexp.MustCompile(`transactions:\s+(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("sysbench run printed no transaction count:\n%s", out)
	}
	b.txns, _ = strconv.ParseInt(m[1], 10, 64)
	execAll(t, ctx, db, "INSERT INTO "+bbMarker+" VALUES (1, 'written last')")
	end := quietEnd(t, src)
	b.bytes = backlogBytes(binaryLogs(t, db), b.start, end)
	b.want = tableChecksums(t, db, b.allTables())
	t.Logf("black-box backlog: sysbench prepared %d tables of %d rows in %v; %d transactions (%d row changes), "+
		"%.1f MB of binlog from %s to %s", tables, size, prepared, b.txns, 4*b.txns, mb(b.bytes), b.start, end)
	return b
}

// createStatements returns SHOW CREATE TABLE of each table.
func createStatements(t *testing.T, db *sql.DB, tables []string) []string {
	t.Helper()
	out := make([]string, 0, len(tables))
	for _, tbl := range tables {
		var name, create string
		if err := db.QueryRowContext(t.Context(), "SHOW CREATE TABLE "+tbl).Scan(&name, &create); err != nil {
			t.Fatalf("SHOW CREATE TABLE %s: %v", tbl, err)
		}
		out = append(out, strings.Replace(create, "CREATE TABLE `", "CREATE TABLE "+sbSchema+".`", 1))
	}
	return out
}

// tableRows reads every row of a sysbench table.
func tableRows(t *testing.T, db *sql.DB, tbl string) [][]any {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT id, k, c, pad FROM "+tbl+" ORDER BY id")
	if err != nil {
		t.Fatalf("read %s: %v", tbl, err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		var id, k int64
		var c, pad string
		if err := rows.Scan(&id, &k, &c, &pad); err != nil {
			t.Fatalf("read %s: %v", tbl, err)
		}
		out = append(out, []any{id, k, c, pad})
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read %s: %v", tbl, err)
	}
	return out
}

// target starts a fresh target with the run's settings plus extra and loads the tables as
// they were at the backlog start.
func (b *bbBacklog) target(t *testing.T, name string, extra ...string) *target {
	t.Helper()
	inst := mariadbtest.Start(t, mariadbtest.Options{Name: name, FastCommit: true,
		ExtraConfig: append(append([]string(nil), bbSettings...), extra...)})
	tgt := &target{inst: inst, db: inst.DB(t)}
	execAll(t, t.Context(), tgt.db, b.seed...)
	const perInsert = 2000
	for _, tbl := range b.tables {
		rows := b.rows[tbl]
		for lo := 0; lo < len(rows); lo += perInsert {
			chunk := rows[lo:min(lo+perInsert, len(rows))]
			args := make([]any, 0, 4*len(chunk))
			for _, r := range chunk {
				args = append(args, r...)
			}
			q := "INSERT INTO " + tbl + " (id, k, c, pad) VALUES " + strings.TrimSuffix(strings.Repeat("(?,?,?,?),", len(chunk)), ",")
			if _, err := tgt.db.ExecContext(t.Context(), q, args...); err != nil {
				t.Fatalf("load %s into %s: %v", tbl, name, err)
			}
		}
	}
	return tgt
}

// waitDone polls the target every 10 ms until the marker row is there, then CHECKSUM TABLE of
// every table until each equals the source's, and returns the times since began of both. A
// parallel applier may commit the marker before other rows, so only the content says it is done;
// the clock stops when a checksum round that finds the content equal ends. poll, when set, runs
// every 100 ms while the marker is awaited.
func (b *bbBacklog) waitDone(t *testing.T, tgt *target, began time.Time, poll func()) (marker, done time.Duration) {
	t.Helper()
	if b.prepMarker != "" {
		testutil.Eventually(t, bbTimeout, "the prepare's marker row arrives on "+tgt.inst.Name(), func() error {
			var n int
			if err := tgt.db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+b.prepMarker).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("no prepare marker row yet")
			}
			return nil
		})
		b.prepared[tgt.inst.Name()] = append(b.prepared[tgt.inst.Name()], time.Since(began))
		if b.prepCPU != nil && tgt.cpu != nil {
			_, cpu := tgt.cpu.stop(t)
			b.prepCPU[tgt.inst.Name()] = append(b.prepCPU[tgt.inst.Name()], cpu)
		}
	}
	lastPoll := time.Time{}
	testutil.Eventually(t, bbTimeout, "the marker row arrives on "+tgt.inst.Name(), func() error {
		if poll != nil && time.Since(lastPoll) >= 100*time.Millisecond {
			lastPoll = time.Now()
			poll()
		}
		var n int
		if err := tgt.db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+bbMarker).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("no marker row yet")
		}
		return nil
	})
	marker = time.Since(began)
	testutil.Eventually(t, bbConverge, "every table of "+tgt.inst.Name()+" has the source's checksum", func() error {
		got := tableChecksums(t, tgt.db, b.allTables())
		for tbl, sum := range b.want {
			if got[tbl] != sum {
				return fmt.Errorf("%s: checksum %s, source %s", tbl, got[tbl], sum)
			}
		}
		return nil
	})
	return marker, time.Since(began)
}

// runNative catches the backlog up with native replication (threads > 0:
// slave_parallel_threads, optimistic) into a fresh target, timed from START SLAVE.
func (b *bbBacklog) runNative(t *testing.T, round, threads int) catchUp {
	t.Helper()
	ctx := t.Context()
	name := fmt.Sprintf("native-%d", max(threads, 1))
	var extra []string
	if threads > 0 {
		extra = []string{fmt.Sprintf("slave_parallel_threads=%d", threads), "slave_parallel_mode=optimistic"}
	}
	tgt := b.target(t, "bb-target-"+name, extra...)
	execAll(t, ctx, tgt.db, fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='%s', "+
		"MASTER_PASSWORD='%s', MASTER_LOG_FILE='%s', MASTER_LOG_POS=%d, MASTER_USE_GTID=no", b.src.Host(), b.src.Port(),
		mariadbtest.SourceUser, mariadbtest.SourcePassword, b.start.Name, b.start.Pos))
	cpu := startCPUMeter(t, b.src, tgt.inst)
	tgt.cpu = cpu
	began := time.Now()
	execAll(t, ctx, tgt.db, "START SLAVE")
	marker, elapsed := b.waitDone(t, tgt, began, nil)
	srcCPU, tgtCPU := cpu.stop(t)
	execAll(t, ctx, tgt.db, "STOP SLAVE")
	res := catchUp{name: name, elapsed: elapsed, targetRSS: serverPeakRSS(t, tgt.inst), sourceCPU: srcCPU, targetCPU: tgtCPU}
	t.Logf("round %d, %s: %v (marker row at %v), CPU: source %v, target %v", round, name, elapsed.Round(time.Millisecond),
		marker.Round(time.Millisecond), srcCPU, tgtCPU)
	tgt.kill(t)
	return res
}

// runWorker catches the backlog up with a fresh dm-worker process into a fresh target. The
// source config, bound, subtask config and stage are in etcd (under a prefix of the round's)
// before the worker starts; the clock starts when the process is started.
func (b *bbBacklog) runWorker(t *testing.T, bin binaries, cli *clientv3.Client, etcd *etcdtest.Cluster, round int, work string) catchUp {
	t.Helper()
	ctx := t.Context()
	tgt := b.target(t, "bb-target-dm")
	prefix := fmt.Sprintf("/bench-bb-%d", round)
	kvs := b.taskKVs(t, tgt.inst)
	if !b.taskAfterStart {
		putKVs(t, cli, prefix, kvs...)
	} else {
		putKVs(t, cli, prefix, kvs[:2]...) // source config and bound
	}
	dataDir := filepath.Join(work, fmt.Sprintf("dm-%d", round))
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cpu := startCPUMeter(t, b.src, tgt.inst)
	tgt.cpu = cpu
	began := time.Now()
	w := startWorker(t, bin, benchWorker, strings.Join(etcd.Endpoints(), ","), prefix, dataDir)
	healthy := time.Since(began)
	if b.taskAfterStart {
		b.taskAt = append(b.taskAt, since(began))
		putKVs(t, cli, prefix, kvs[2:]...) // subtask config and stage
	}
	var prof *profiler
	if p := os.Getenv(profileEnv); p != "" {
		prof = startProfiler(ctx, w, p, fmt.Sprintf("bb-%d", round))
	}
	var syncing time.Duration // when the subtask was first seen running its sync unit
	marker, elapsed := b.waitDone(t, tgt, began, func() {
		if syncing == 0 {
			if d, found, err := w.subtask(ctx, bbTask); err == nil && found && d.Unit == "Sync" && d.Stage == "Running" {
				syncing = time.Since(began)
			}
		}
	})
	srcCPU, tgtCPU := cpu.stop(t)
	workerCPU, err := procCPU(w.pidString())
	if err != nil {
		t.Fatal(err)
	}
	hwm, err := vmHWM(w.pidString())
	if err != nil {
		t.Fatalf("peak RSS of dm-worker: %v", err)
	}
	d, _, _ := w.subtask(ctx, bbTask)
	if prof != nil {
		files, err := prof.stop()
		if err != nil {
			t.Errorf("CPU profile of dm-worker: %v", err)
		}
		t.Logf("round %d, dm-worker: CPU profiles: go tool pprof -top %s", round, strings.Join(files, " "))
	}
	w.stop(t)
	if dir := os.Getenv(profileEnv); dir != "" {
		// The log beside the profiles: its timestamps are the run's timeline.
		if log, err := os.ReadFile(w.logFile); err == nil {
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("bb-%d.log", round)), log, 0o644)
		}
	}
	res := catchUp{name: "dm", elapsed: elapsed, startup: syncing, targetRSS: serverPeakRSS(t, tgt.inst),
		child: &procUsage{CPU: workerCPU, PeakRSS: hwm * 1024}, sourceCPU: srcCPU, targetCPU: tgtCPU}
	t.Logf("round %d, dm-worker: %v (healthz at %v, sync unit running at %v, marker row at %v), CPU: worker %v, source %v, "+
		"target %v; peak RSS %.1f MB; progress %s", round, elapsed.Round(time.Millisecond), healthy.Round(time.Millisecond),
		syncing.Round(time.Millisecond), marker.Round(time.Millisecond), workerCPU, srcCPU, tgtCPU, mb(hwm*1024), d.Progress)
	tgt.kill(t)
	return res
}

// taskKVs are the black-box run's source config, bound, subtask config and stage (in this
// order) as minimal JSON (every other field takes its default), keys without the prefix.
func (b *bbBacklog) taskKVs(t *testing.T, tgt *mariadbtest.Instance) [][2]string {
	t.Helper()
	js := func(v any) string {
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	type m = map[string]any
	kvs := [][2]string{
		{"/source/config/" + benchSourceID, js(m{"source-id": benchSourceID, "from": m{"host": b.src.Host(), "port": b.src.Port(),
			"user": mariadbtest.SourceUser, "password": mariadbtest.SourcePassword}})},
		{"/source/bound/" + benchWorker, js(m{"source": benchSourceID, "worker": benchWorker})},
		{"/task/config/" + benchSourceID + "/" + bbTask, js(m{"name": bbTask, "source-id": benchSourceID, "task-mode": "incremental",
			"meta":            m{"binlog-name": b.start.Name, "binlog-pos": b.start.Pos},
			"target-database": m{"host": tgt.Host(), "port": tgt.Port(), "user": mariadbtest.RootUser, "password": ""}})},
		{"/stage/subtask/" + benchSourceID + "/" + bbTask, js(m{"expect": "Running", "source": benchSourceID, "task": bbTask})},
	}
	if b.syncer != nil {
		var task map[string]any
		if err := json.Unmarshal([]byte(kvs[2][1]), &task); err != nil {
			t.Fatal(err)
		}
		task["syncer"] = b.syncer
		kvs[2][1] = js(task)
	}
	return kvs
}

// putKVs writes kvs under prefix.
func putKVs(t *testing.T, cli *clientv3.Client, prefix string, kvs ...[2]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, kv := range kvs {
		if _, err := cli.Put(ctx, prefix+kv[0], kv[1]); err != nil {
			t.Fatalf("put %s: %v", prefix+kv[0], err)
		}
	}
}

// startBusy runs a busy-looping shell for the rest of the test: the "another process busy" case.
func startBusy(t *testing.T) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a busy process: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

// allTables are the sysbench tables and the marker table(s).
func (b *bbBacklog) allTables() []string {
	out := append(slices.Clip(b.tables), bbMarker)
	if b.prepMarker != "" {
		out = append(out, b.prepMarker)
	}
	return out
}
