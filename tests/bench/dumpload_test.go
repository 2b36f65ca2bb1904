//go:build bench

package bench

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// Parameters of the full-data benchmark.
const (
	fullRowsEnv   = "BENCH_FULL_ROWS"   // rows in all, split over sbTables sysbench tables (default 1000000)
	fullRoundsEnv = "BENCH_FULL_ROUNDS" // rounds of the legs, the first rotating (default 3)
	fullLegsEnv   = "BENCH_FULL_LEGS"   // legs to run, comma-separated (default pipeline,mydumper,dm)
	// fullThreads is mydumper's and myloader's --threads; the task's mydumper threads are
	// the default, which is the same.
	fullThreads = config.DefaultMydumperThreads
	// fullPoolSize is the task's loader pool-size: the default (DM's).
	fullPoolSize = config.DefaultLoaderPoolSize
	// fullTimeout bounds one leg.
	fullTimeout = 30 * time.Minute
	// fullRSSLimit is the peak RSS target for the worker running the full task, in bytes.
	fullRSSLimit = 256 << 20
)

// fullSource is the full-data benchmark's source: sysbench's tables filled by `sysbench
// oltp_read_write prepare`, and what every target must hold at the end.
type fullSource struct {
	inst *mariadbtest.Instance
	rows int64 // rows in all tables
	// dataBytes is the tables' data_length + index_length on the source.
	dataBytes int64
	// want is CHECKSUM TABLE and counts is COUNT(*) of every sysbench table.
	want   map[string]string
	counts map[string]int64
}

// fullRun is one leg's measurement: one tool (or pair of tools, or the worker) loading the
// source's tables into a fresh, empty target.
type fullRun struct {
	// elapsed runs from the start of the first process (or `dmctl task start`) until the
	// target's content has been verified; done until the tools exited (or the subtask was
	// Finished); dump and load split done where the tool has phases.
	elapsed, done, dump, load time.Duration
	cpu                       time.Duration // user + system of the tool processes (the worker: during the run)
	peakRSS                   int64         // bytes: the largest peak RSS of one process of the leg
	peakRSS2                  int64         // bytes: the other process's peak RSS (the pipeline's mariadb, myloader)
	srcCPU                    time.Duration // CPU the source mariadbd used meanwhile
	tgtCPU                    time.Duration // CPU the target mariadbd used meanwhile
	dumpBytes                 int64         // size of the dump on disk (mydumper; 0 for the pipeline)
	detail                    string        // leg-specific facts for the log
}

func (r fullRun) rowsPerSec(rows int64) float64 { return float64(rows) / r.elapsed.Seconds() }

// TestFullDumpLoad fills a source with BENCH_FULL_ROWS rows (default 1,000,000) of sysbench's
// oltp schema in sbTables tables (`sysbench oltp_read_write --tables=8 --table-size=N prepare`)
// and copies them into an empty target three ways, one after the other, each into a fresh target:
//   - `mariadb-dump --single-transaction sbtest | mariadb` (both processes' peak RSS);
//   - `mydumper --threads 4` into a directory, then `myloader --threads 4`;
//   - a dm-worker process (embedded etcd) running a task with task-mode full written into etcd
//     as minimal JSON (every setting at its default: mydumper threads 4, rows 10000, loader
//     pool-size 16), timed from the put of the task's keys until the subtask is Finished.
//
// Every leg's clock stops when the target's row counts and CHECKSUM TABLE of every table equal
// the source's. BENCH_FULL_ROUNDS rounds run the legs, the first one rotating; medians are
// reported. BENCH_FULL_LEGS (comma-separated: pipeline, mydumper, dm) runs only some legs. The
// tools' peak RSS is their VmHWM sampled every hwmPeriod, the worker's its VmHWM at the end.
func TestFullDumpLoad(t *testing.T) {
	total := envInt(t, fullRowsEnv, 1_000_000)
	rounds := int(envInt(t, fullRoundsEnv, 3))
	if total < sbTables {
		t.Fatalf("%s=%d: want at least %d rows (one per table)", fullRowsEnv, total, sbTables)
	}
	names := fullLegNames(t)
	var bin binaries
	if slices.Contains(names, legDM) {
		bin = buildBinaries(t)
	}
	src := prepareFullSource(t, total/sbTables)
	work := t.TempDir()
	legs := map[string]func(round int) fullRun{
		legPipeline: func(round int) fullRun { return src.runPipeline(t, round, work) },
		legMydumper: func(round int) fullRun { return src.runMydumper(t, round, work) },
		legDM:       func(round int) fullRun { return src.runWorker(t, bin, round, work) },
	}
	runs := make(map[string][]fullRun, len(names))
	for round := range rounds {
		for k := range names {
			name := names[(round+k)%len(names)]
			runs[name] = append(runs[name], legs[name](round))
		}
	}
	record(t, "full-dump-load", fullFields(src, rounds, runs)...)
}

// The legs of the full-data benchmark, as BENCH_FULL_LEGS names them.
const (
	legPipeline = "pipeline" // mariadb-dump | mariadb
	legMydumper = "mydumper" // mydumper + myloader
	legDM       = "dm"       // dm-worker, task-mode full
)

// fullLegNames are the legs to run: BENCH_FULL_LEGS (comma-separated), all three by default.
func fullLegNames(t *testing.T) []string {
	t.Helper()
	v := os.Getenv(fullLegsEnv)
	if v == "" {
		return []string{legPipeline, legMydumper, legDM}
	}
	var out []string
	for _, name := range strings.Split(v, ",") {
		switch name = strings.TrimSpace(name); name {
		case legPipeline, legMydumper, legDM:
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		default:
			t.Fatalf("%s=%q: unknown leg %q (want %s, %s or %s)", fullLegsEnv, v, name, legPipeline, legMydumper, legDM)
		}
	}
	return out
}

// fullFields are the result row's columns: each leg's median run, and the ratios and targets
// where dm and a reference both ran.
func fullFields(src *fullSource, rounds int, runs map[string][]fullRun) []field {
	rows := src.rows
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	fields := []field{f("rows", rows), f("tables", sbTables), f("data_MB", mb(src.dataBytes)), f("rounds", rounds),
		f("threads", fullThreads), f("pool_size", fullPoolSize)}
	took := func(r fullRun) time.Duration { return r.elapsed }
	med := make(map[string]fullRun, len(runs))
	for _, name := range []string{legDM, legPipeline, legMydumper} {
		if len(runs[name]) > 0 {
			med[name] = median(runs[name], took)
			fields = append(fields, f(name+"_rows_per_s", med[name].rowsPerSec(rows)))
		}
	}
	if dm, ok := med[legDM]; ok {
		for _, ref := range []struct {
			name   string
			target float64
		}{{legPipeline, 1.5}, {legMydumper, 1.2}} { // issue 27: >= 1.2x mydumper + myloader
			if r, ok := med[ref.name]; ok {
				x := ratio(dm.rowsPerSec(rows), r.rowsPerSec(rows))
				fields = append(fields, f("ratio_vs_"+ref.name, x), f("target_vs_"+ref.name, verdict(x, ref.target)))
			}
		}
		var peak int64
		for _, r := range runs[legDM] {
			peak = max(peak, r.peakRSS)
		}
		rssVerdict := fmt.Sprintf("met(<=%dMiB)", fullRSSLimit>>20)
		if peak > fullRSSLimit {
			rssVerdict = fmt.Sprintf("MISSED(<=%dMiB)", fullRSSLimit>>20)
		}
		fields = append(fields, f("dm_peak_rss_MiB", mib(peak)), f("target_rss", rssVerdict),
			f("dm_s", dm.elapsed.Seconds()), f("dm_done_s", dm.done.Seconds()), f("dm_dump_s", dm.dump.Seconds()),
			f("dm_load_s", dm.load.Seconds()), f("dm_cpu_s", dm.cpu.Seconds()),
			f("target_cpu_s_dm", dm.tgtCPU.Seconds()), f("source_cpu_s_dm", dm.srcCPU.Seconds()))
	}
	if p, ok := med[legPipeline]; ok {
		fields = append(fields, f("pipeline_s", p.elapsed.Seconds()), f("pipeline_done_s", p.done.Seconds()),
			f("pipeline_cpu_s", p.cpu.Seconds()), f("target_cpu_s_pipeline", p.tgtCPU.Seconds()),
			f("source_cpu_s_pipeline", p.srcCPU.Seconds()),
			f("mariadb_dump_peak_rss_MiB", mib(p.peakRSS)), f("mariadb_peak_rss_MiB", mib(p.peakRSS2)))
	}
	if m, ok := med[legMydumper]; ok {
		fields = append(fields, f("mydumper_s", m.elapsed.Seconds()), f("mydumper_done_s", m.done.Seconds()),
			f("mydumper_dump_s", m.dump.Seconds()), f("myloader_s", m.load.Seconds()),
			f("mydumper_cpu_s", m.cpu.Seconds()), f("target_cpu_s_mydumper", m.tgtCPU.Seconds()),
			f("source_cpu_s_mydumper", m.srcCPU.Seconds()),
			f("mydumper_peak_rss_MiB", mib(m.peakRSS)), f("myloader_peak_rss_MiB", mib(m.peakRSS2)),
			f("mydumper_dump_MB", mb(m.dumpBytes)))
	}
	return fields
}

// fullTargetName names a leg's target instance.
func fullTargetName(leg string, round int) string { return fmt.Sprintf("full-%s-%d", leg, round) }

// startFullTarget starts a fresh, empty target for one leg, with the settings every benchmark
// target gets (serverSettings, FastCommit, binlog off).
func startFullTarget(t *testing.T, leg string, round int) *target {
	t.Helper()
	inst := startTarget(t, fullTargetName(leg, round))
	return &target{inst: inst, db: inst.DB(t)}
}

// legDir makes a fresh directory under work for one leg's files.
func legDir(t *testing.T, work, leg string, round int) string {
	t.Helper()
	dir, err := os.MkdirTemp(work, fmt.Sprintf("%s-%d-", leg, round))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// tableList is every sysbench table as schema.table, comma-separated (for ANALYZE TABLE).
func tableList() string { return strings.Join(sbTableNames(), ",") }
