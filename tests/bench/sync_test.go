//go:build bench

package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/syncer"
)

// Parameters of the sync benchmark.
const (
	syncRowsEnv    = "BENCH_SYNC_ROWS"    // row changes in the backlog (default 1000000)
	syncWorkersEnv = "BENCH_SYNC_WORKERS" // the sync unit's worker-count (default 16, DM's default)
	syncBatchEnv   = "BENCH_SYNC_BATCH"   // the sync unit's batch (default 100, DM's default)
	syncRoundsEnv  = "BENCH_SYNC_ROUNDS"  // rounds of the three replicators, the first rotating (default 3)
	syncMaxBinlog  = 256 << 20            // the source's max_binlog_size
	// nativeParallel is slave_parallel_threads of the parallel native run.
	nativeParallel = 4
	// syncRSSLimit bounds the sync unit's peak RSS while it catches up the backlog (issue #16).
	syncRSSLimit = 256 << 20
)

// syncParams are the sync child's parameters.
type syncParams struct {
	childCommon
	Source      config.DBConfig `json:"source"`
	Target      config.DBConfig `json:"target"`
	StartName   string          `json:"start-name"`
	StartPos    uint32          `json:"start-pos"`
	Rows        int64           `json:"rows"`
	WorkerCount int             `json:"worker-count"`
	Batch       int             `json:"batch"`
}

// catchUp is one replicator's result.
type catchUp struct {
	name      string
	elapsed   time.Duration
	startup   time.Duration // black-box dm-worker: from the process start until its sync unit runs
	targetRSS int64         // the target mariadbd's peak RSS
	child     *procUsage
	// CPU time the source and target mariadbd used during the catch-up.
	sourceCPU, targetCPU time.Duration
}

func (c catchUp) rowsPerSec(rows int64) float64 { return float64(rows) / c.elapsed.Seconds() }

// TestSyncCatchUp pre-generates a backlog of BENCH_SYNC_ROWS row changes (sysbench
// oltp_write_only on sbTables tables), then catches it up, one after the other and each into a
// fresh target holding the same initial rows, with (a) the sync unit (incremental, worker-count
// BENCH_SYNC_WORKERS, batch BENCH_SYNC_BATCH; DM's defaults 16 and 100), (b) native replication
// single-threaded and (c) native replication with slave_parallel_threads=4, optimistic; each
// target must equal the source. BENCH_SYNC_ROUNDS rounds run all three, the first one rotating,
// and the median of each is reported.
func TestSyncCatchUp(t *testing.T) {
	rows := envInt(t, syncRowsEnv, 1_000_000)
	workers, batch := envInt(t, syncWorkersEnv, 16), envInt(t, syncBatchEnv, 100)
	rounds := int(envInt(t, syncRoundsEnv, 3))
	ctx := t.Context()
	b := newSyncBacklog(t, rows)
	src, start, end, committed, want := b.src, b.start, b.end, b.committed, b.want

	work := t.TempDir()
	// The three replicators, each into a fresh target; every round runs them
	// all, the first one rotating, and the medians are reported.
	runDM := func(round int) catchUp { return b.runDM(t, round, workers, batch, work) }
	runNative := func(round, threads int) catchUp {
		name := fmt.Sprintf("native-%d", max(threads, 1))
		var extra []string
		if threads > 0 {
			extra = []string{fmt.Sprintf("slave_parallel_threads=%d", threads), "slave_parallel_mode=optimistic"}
		}
		tgt := prepareTarget(t, "target-"+name, extra...)
		cpu := startCPUMeter(t, src, tgt.inst)
		elapsed := nativeCatchUp(t, ctx, src, tgt, start, end)
		srcCPU, tgtCPU := cpu.stop(t)
		tgt.check(t, name, want)
		res := catchUp{name: name, elapsed: elapsed, targetRSS: serverPeakRSS(t, tgt.inst),
			sourceCPU: srcCPU, targetCPU: tgtCPU}
		t.Logf("round %d, %s: %v, %.0f rows/s, CPU: source %v, target %v", round, name, elapsed.Round(time.Millisecond),
			float64(committed)/elapsed.Seconds(), srcCPU, tgtCPU)
		tgt.kill(t)
		return res
	}
	replicators := []func(round int) catchUp{
		runDM,
		func(round int) catchUp { return runNative(round, 0) },
		func(round int) catchUp { return runNative(round, nativeParallel) },
	}
	runs := make([][]catchUp, len(replicators))
	for round := range rounds {
		for k := range replicators {
			i := (round + k) % len(replicators)
			runs[i] = append(runs[i], replicators[i](round))
		}
	}
	took := func(c catchUp) time.Duration { return c.elapsed }
	results := []catchUp{median(runs[0], took), median(runs[1], took), median(runs[2], took)}

	dm, single, parallel := results[0], results[1], results[2]
	rSingle := ratio(dm.rowsPerSec(committed), single.rowsPerSec(committed))
	rParallel := ratio(dm.rowsPerSec(committed), parallel.rowsPerSec(committed))
	record(t, "sync-catch-up",
		f("row_changes", committed), f("binlog_MB", mb(b.bytes)), f("rounds", rounds), f("worker_count", workers), f("batch", batch),
		f("dm_rows_per_s", dm.rowsPerSec(committed)),
		f("native1_rows_per_s", single.rowsPerSec(committed)),
		f("native4_rows_per_s", parallel.rowsPerSec(committed)),
		f("ratio_vs_native1", rSingle), f("target_vs_native1", verdict(rSingle, 1.5)),
		f("ratio_vs_native4", rParallel), f("target_vs_native4", verdict(rParallel, 1.2)),
		f("dm_s", dm.elapsed.Seconds()), f("native1_s", single.elapsed.Seconds()), f("native4_s", parallel.elapsed.Seconds()),
		f("dm_cpu_s", dm.child.CPU.Seconds()), f("dm_peak_rss_MB", mb(dm.child.PeakRSS)),
		f("dm_max_peak_rss_MiB", float64(maxPeakRSS(runs[0]))/(1<<20)), f("target_rss", rssVerdict(maxPeakRSS(runs[0]), syncRSSLimit)),
		f("target_dm_cpu_s", dm.targetCPU.Seconds()), f("target_native1_cpu_s", single.targetCPU.Seconds()),
		f("target_native4_cpu_s", parallel.targetCPU.Seconds()),
		f("source_cpu_s_dm", dm.sourceCPU.Seconds()), f("source_cpu_s_native1", single.sourceCPU.Seconds()),
		f("source_cpu_s_native4", parallel.sourceCPU.Seconds()),
		f("target_dm_peak_rss_MB", mb(dm.targetRSS)), f("target_native1_peak_rss_MB", mb(single.targetRSS)),
		f("target_native4_peak_rss_MB", mb(parallel.targetRSS)))
}

// syncBacklog is the sync benchmark's backlog on its source: the sysbench tables with their
// initial rows (loaded with sql_log_bin=0, so every target can load them itself), then
// oltp_write_only transactions in the binlog from start to end. TestStreamCatchUp reads the same
// kind of backlog.
type syncBacklog struct {
	src        *mariadbtest.Instance
	start, end binlog.Location
	// committed is the exact number of row changes between start and end.
	committed int64
	// bytes is the binlog size between start and end.
	bytes int64
	// want is CHECKSUM TABLE of every sysbench table after the backlog.
	want map[string]string
}

// newSyncBacklog starts a source and writes a backlog of at least rows row changes into it.
func newSyncBacklog(t *testing.T, rows int64) *syncBacklog {
	t.Helper()
	ctx := t.Context()
	src := startSource(t, "sync-src", syncMaxBinlog)
	srcDB := src.DB(t)
	conn := pinnedConn(t, srcDB)
	execAll(t, ctx, conn, "SET SESSION sql_log_bin = 0") // the initial rows are loaded on every target alike
	execAll(t, ctx, conn, sbPrepare()...)
	execAll(t, ctx, conn, "SET SESSION sql_log_bin = 1")
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	startFile, startPos, _ := src.MasterStatus(t)
	b := &syncBacklog{src: src, start: binlog.Location{Name: startFile, Pos: startPos}}

	began := time.Now()
	committed, err := sbWriteOnly(ctx, srcDB, rows)
	if err != nil {
		t.Fatal(err)
	}
	b.committed = committed
	b.end = quietEnd(t, src)
	b.bytes = backlogBytes(binaryLogs(t, srcDB), b.start, b.end)
	b.want = tableChecksums(t, srcDB, sbTableNames())
	t.Logf("backlog: %d row changes, %.1f MB of binlog from %s to %s, generated in %v",
		committed, mb(b.bytes), b.start, b.end, since(began))
	return b
}

// runDM catches the backlog up with the sync unit in a child process (incremental from the
// backlog start, worker-count workers, batch batch) into a fresh target, checks the target
// against the source and returns the run's measurements; work holds the child's stderr.
func (b *syncBacklog) runDM(t *testing.T, round int, workers, batch int64, work string) catchUp {
	t.Helper()
	src := b.src
	tgt := prepareTarget(t, "target-dm")
	params := syncParams{childCommon: childCommon{Timeout: 20 * time.Minute},
		Source:    config.DBConfig{Host: src.Host(), Port: src.Port(), User: mariadbtest.SourceUser, Password: mariadbtest.SourcePassword},
		Target:    config.DBConfig{Host: tgt.inst.Host(), Port: tgt.inst.Port(), User: mariadbtest.RootUser},
		StartName: b.start.Name, StartPos: b.start.Pos, Rows: b.committed,
		WorkerCount: int(workers), Batch: int(batch)}
	if p := os.Getenv(profileEnv); p != "" {
		params.CPUProfile = filepath.Join(p, fmt.Sprintf("sync-%d.cpu.pprof", round))
	}
	cpu := startCPUMeter(t, src, tgt.inst)
	rep, usage := spawnChild(t, t.Context(), "sync", params, work)
	srcCPU, tgtCPU := cpu.stop(t)
	tgt.check(t, "dm sync", b.want)
	res := catchUp{name: "dm", elapsed: rep.Elapsed, targetRSS: serverPeakRSS(t, tgt.inst),
		child: &usage, sourceCPU: srcCPU, targetCPU: tgtCPU}
	t.Logf("round %d, dm sync: %v, %.0f rows/s, child peak RSS %.1f MB, CPU: child %v, source %v, target %v; unit status %v",
		round, rep.Elapsed.Round(time.Millisecond), float64(b.committed)/rep.Elapsed.Seconds(), mb(usage.PeakRSS),
		usage.CPU.Round(time.Millisecond), srcCPU, tgtCPU, rep.Detail)
	tgt.kill(t)
	return res
}

// target is a target instance with the one pool the parent uses on it.
type target struct {
	inst *mariadbtest.Instance
	db   *sql.DB
	cpu  *cpuMeter // the run's CPU meter of source and target, where a run sets it
}

// prepareTarget starts a target and loads the initial rows the source had at the backlog start.
func prepareTarget(t *testing.T, name string, extra ...string) *target {
	t.Helper()
	inst := startTarget(t, name, extra...)
	tgt := &target{inst: inst, db: inst.DB(t)}
	execAll(t, t.Context(), tgt.db, sbPrepare()...)
	return tgt
}

// check fails the test unless every sysbench table has the source's checksum.
func (tgt *target) check(t *testing.T, who string, want map[string]string) {
	t.Helper()
	got := tableChecksums(t, tgt.db, sbTableNames())
	for tbl, sum := range want {
		if got[tbl] != sum {
			t.Errorf("%s: %s differs from the source after catching up: checksum %s, source %s", who, tbl, got[tbl], sum)
		}
	}
}

// kill closes the pool's connections while the server still answers, then kills the server so
// that its background flushing does not compete with the next measurement.
func (tgt *target) kill(t *testing.T) {
	t.Helper()
	tgt.db.SetMaxIdleConns(0)
	tgt.inst.Kill(t)
}

// runSyncChild runs a sync unit from the backlog start until it has applied every row change.
func runSyncChild(ctx context.Context, log *zap.Logger, raw json.RawMessage) (childReport, error) {
	var p syncParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return childReport{}, fmt.Errorf("sync parameters: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	u, _, _, err := newBenchSync(ctx, p, config.ValidatorConfig{}, log)
	if err != nil {
		return childReport{}, err
	}
	defer u.Close()
	var elapsed time.Duration
	err = profiled(p.CPUProfile, func() error {
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		done := make(chan unit.Result, 1)
		began := time.Now()
		go func() { done <- u.Process(runCtx) }()
		werr, returned := waitApplied(ctx, u, p.Rows, done)
		elapsed = time.Since(began)
		stop()
		if !returned {
			if res := <-done; res.Failed() {
				werr = errors.Join(werr, fmt.Errorf("sync unit: %+v", res.Errors))
			}
		}
		return werr
	})
	st := u.Status().(syncer.Status)
	return childReport{Elapsed: elapsed, Detail: map[string]any{
		"inserts": st.Inserts, "updates": st.Updates, "deletes": st.Deletes,
		"transactions": st.Transactions, "batches": st.Batches, "binlog": st.Binlog,
	}}, err
}

// waitApplied polls the unit's counters until rows row changes are committed on the target.
// returned reports whether Process's result was received from done.
func waitApplied(ctx context.Context, u *syncer.Syncer, rows int64, done <-chan unit.Result) (err error, returned bool) {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		st := u.Status().(syncer.Status)
		applied := int64(st.Inserts + st.Updates + st.Deletes)
		if applied >= rows {
			return nil, false
		}
		select {
		case <-tick.C:
		case res := <-done:
			return fmt.Errorf("sync unit stopped after %d of %d row changes: %+v", applied, rows, res), true
		case <-ctx.Done():
			return fmt.Errorf("sync unit applied only %d of %d row changes: %w", applied, rows, context.Cause(ctx)), false
		}
	}
}

// newBenchSync builds and initialises the sync unit of a sync child (and of a sync-validate
// child, whose subtask also has validator settings): incremental from p's backlog start, p's
// worker-count and batch. It returns the unit with its subtask and source configs.
func newBenchSync(ctx context.Context, p syncParams, validator config.ValidatorConfig, log *zap.Logger) (
	*syncer.Syncer, *config.SubTaskConfig, *config.SourceConfig, error) {
	cfg := config.NewSubTaskConfig()
	cfg.Name, cfg.SourceID, cfg.TaskMode = "bench", "bench-src", config.ModeIncremental
	cfg.Meta = config.Meta{BinlogName: p.StartName, BinlogPos: p.StartPos}
	cfg.TargetDatabase = p.Target
	cfg.Syncer.WorkerCount, cfg.Syncer.Batch = p.WorkerCount, p.Batch
	cfg.Validator = validator
	cfg.Adjust()
	if err := cfg.Validate(); err != nil {
		return nil, nil, nil, fmt.Errorf("subtask config: %w", err)
	}
	src := &config.SourceConfig{SourceID: cfg.SourceID, Flavor: config.FlavorMariaDB, From: p.Source}
	u, err := syncer.New(cfg, src, nil, nil, log)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := u.Init(ctx); err != nil {
		return nil, nil, nil, err
	}
	return u, cfg, src, nil
}
