//go:build bench

package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// Parameters of the sync-from-position-4 benchmark. The defaults are the short run (sysbench
// runs 10 s, so one round of the three replicators takes about a minute); the outside check of
// issue 27 is BENCH_P4_SECONDS=30.
const (
	p4SecondsEnv   = "BENCH_P4_SECONDS"    // sysbench --time (default 10; the outside check: 30)
	p4ThreadsEnv   = "BENCH_P4_THREADS"    // sysbench --threads (default 4)
	p4TablesEnv    = "BENCH_P4_TABLES"     // sysbench --tables (default 4)
	p4TableSizeEnv = "BENCH_P4_TABLE_SIZE" // sysbench --table-size (default 50000)
	p4RoundsEnv    = "BENCH_P4_ROUNDS"     // rounds of the three replicators, the first rotating (default 3)
	// p4SyncerEnv, when set, is the task's syncer section as JSON (e.g. {"worker-count":4});
	// else the task has none and the defaults apply.
	p4SyncerEnv = "BENCH_P4_SYNCER"
	// p4Prepared is the table whose one row the source writes right after sysbench's prepare.
	p4Prepared = sbSchema + ".bench_prepared"
)

// TestSyncFromPos4 is issue 27's outside check of the sync unit: a source whose binlog starts
// empty (RESET MASTER) gets the sysbench schema, sysbench's prepare of BENCH_P4_TABLES tables
// of BENCH_P4_TABLE_SIZE rows (CREATE TABLE, multi-row INSERTs, CREATE INDEX), a marker row in
// p4Prepared, an oltp_write_only run of BENCH_P4_THREADS threads for BENCH_P4_SECONDS seconds
// and a marker row written last. Then, BENCH_P4_ROUNDS times each, the first one rotating,
// each from the first binlog file at position 4 into a fresh, empty target: a real dm-worker
// process with its source and bound in etcd, whose task (incremental, meta at that position,
// default syncer settings) and stage are written once it serves /healthz, timed from the
// process start and from that write (native's START SLAVE on a running server); native
// replication single-threaded and with slave_parallel_threads=4, optimistic; each until the
// last marker row is there and every table has the source's CHECKSUM TABLE. The time until
// the prepare's marker row arrives, and the target's CPU until then, are the prepare part.
func TestSyncFromPos4(t *testing.T) {
	if _, err := exec.LookPath("sysbench"); err != nil {
		t.Skipf("sysbench is not installed (bash scripts/install-deps.sh --bench): %v", err)
	}
	rounds := int(envInt(t, p4RoundsEnv, 3))
	bin := buildBinaries(t)
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	b := p4Backlog(t)
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
	itself := func(d time.Duration) time.Duration { return d }
	prepDM := median(b.prepared["bb-target-dm"], itself)
	prepSingle := median(b.prepared["bb-target-native-1"], itself)
	prepParallel := median(b.prepared[fmt.Sprintf("bb-target-native-%d", nativeParallel)], itself)
	rSingle := ratio(single.elapsed.Seconds(), dm.elapsed.Seconds())
	rParallel := ratio(parallel.elapsed.Seconds(), dm.elapsed.Seconds())
	rPrep := ratio(prepSingle.Seconds(), prepDM.Seconds())
	// The same from the subtask's write into etcd on the running worker, native's START SLAVE.
	var fromTask, prepFromTask []time.Duration
	for i, c := range runs[0] {
		fromTask = append(fromTask, c.elapsed-b.taskAt[i])
		prepFromTask = append(prepFromTask, b.prepared["bb-target-dm"][i]-b.taskAt[i])
	}
	dmTask, prepDMTask := median(fromTask, itself), median(prepFromTask, itself)
	rPrepTask := ratio(prepSingle.Seconds(), prepDMTask.Seconds())
	prepCPU := func(name string) float64 { return median(b.prepCPU[name], itself).Seconds() }
	var peak int64
	for _, c := range runs[0] {
		peak = max(peak, c.child.PeakRSS)
	}
	record(t, "sync-from-pos4",
		f("tables", len(b.tables)), f("table_size", envInt(t, p4TableSizeEnv, 50000)),
		f("run_s", envInt(t, p4SecondsEnv, 10)), f("transactions", b.txns), f("binlog_MB", mb(b.bytes)),
		f("rounds", rounds), f("busy_process", os.Getenv(bbBusyEnv) == "1"), f("syncer", cmp.Or(os.Getenv(p4SyncerEnv), "default")),
		f("ratio_vs_native1", rSingle), f("target_vs_native1", verdict(rSingle, 1.5)),
		f("ratio_vs_native4", rParallel), f("target_vs_native4", verdict(rParallel, 1.5)),
		f("prepare_ratio_vs_native1", rPrep), f("target_prepare_vs_native1", verdict(rPrep, 1.0)),
		f("dm_s", dm.elapsed.Seconds()), f("native1_s", single.elapsed.Seconds()), f("native4_s", parallel.elapsed.Seconds()),
		f("dm_prepare_s", prepDM.Seconds()), f("native1_prepare_s", prepSingle.Seconds()),
		f("native4_prepare_s", prepParallel.Seconds()),
		f("dm_from_task_s", dmTask.Seconds()), f("dm_prepare_from_task_s", prepDMTask.Seconds()),
		f("prepare_ratio_vs_native1_from_task", rPrepTask), f("task_put_after_start_s", median(b.taskAt, itself).Seconds()),
		f("target_dm_prepare_cpu_s", prepCPU("bb-target-dm")), f("target_native1_prepare_cpu_s", prepCPU("bb-target-native-1")),
		f("target_native4_prepare_cpu_s", prepCPU(fmt.Sprintf("bb-target-native-%d", nativeParallel))),
		f("dm_cpu_s", dm.child.CPU.Seconds()), f("dm_peak_rss_MB", mb(peak)),
		f("target_dm_cpu_s", dm.targetCPU.Seconds()), f("target_native1_cpu_s", single.targetCPU.Seconds()),
		f("target_native4_cpu_s", parallel.targetCPU.Seconds()))
}

// p4Backlog starts the source, writes the whole backlog from an empty binlog and reads the
// source's checksums. The targets start empty: everything they get comes from the binlog.
func p4Backlog(t *testing.T) *bbBacklog {
	t.Helper()
	ctx := t.Context()
	tables, size := envInt(t, p4TablesEnv, 4), envInt(t, p4TableSizeEnv, 50000)
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "p4-src", Binlog: true, FastCommit: true, ExtraConfig: bbSettings})
	db := src.DB(t)
	execAll(t, ctx, db, "RESET MASTER")
	first := binaryLogs(t, db)[0].name
	execAll(t, ctx, db, "CREATE DATABASE "+sbSchema,
		"CREATE TABLE "+bbMarker+" (id INT NOT NULL PRIMARY KEY, note VARCHAR(64) NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE "+p4Prepared+" (id INT NOT NULL PRIMARY KEY, note VARCHAR(64) NOT NULL) ENGINE=InnoDB")
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
	execAll(t, ctx, db, "INSERT INTO "+p4Prepared+" VALUES (1, 'after prepare')")
	prepared := since(began)
	file, pos, _ := src.MasterStatus(t)
	prepEnd := binlog.Location{Name: file, Pos: pos}
	b := &bbBacklog{src: src, start: binlog.Location{Name: first, Pos: 4}, rows: map[string][][]any{},
		prepMarker: p4Prepared, prepared: map[string][]time.Duration{}, taskAfterStart: true,
		prepCPU: map[string][]time.Duration{}}
	if raw := os.Getenv(p4SyncerEnv); raw != "" {
		if err := json.Unmarshal([]byte(raw), &b.syncer); err != nil {
			t.Fatalf("%s=%q: %v", p4SyncerEnv, raw, err)
		}
	}
	for i := 1; i <= int(tables); i++ {
		b.tables = append(b.tables, fmt.Sprintf("%s.sbtest%d", sbSchema, i))
	}
	out := sb("run", fmt.Sprintf("--threads=%d", envInt(t, p4ThreadsEnv, 4)),
		fmt.Sprintf("--time=%d", envInt(t, p4SecondsEnv, 10)), "--report-interval=0")
	m := regexp.MustCompile(`transactions:\s+(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("sysbench run printed no transaction count:\n%s", out)
	}
	b.txns, _ = strconv.ParseInt(m[1], 10, 64)
	execAll(t, ctx, db, "INSERT INTO "+bbMarker+" VALUES (1, 'written last')")
	end := quietEnd(t, src)
	logs := binaryLogs(t, db)
	b.bytes = backlogBytes(logs, b.start, end)
	b.want = tableChecksums(t, db, b.allTables())
	t.Logf("backlog from %s: sysbench prepared %d tables of %d rows in %v (%.1f MB of binlog, to %s); "+
		"%d transactions; %.1f MB of binlog in all, to %s; %s", b.start, tables, size, prepared,
		mb(backlogBytes(logs, b.start, prepEnd)), prepEnd, b.txns, mb(b.bytes), end, strings.Join(b.allTables(), ","))
	return b
}
