package load

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// TestLoadBenchmark loads 1M sysbench-like rows (8 tables of 125k: id INT
// PRIMARY KEY, k INT with a secondary index, c CHAR(120), pad CHAR(60))
// into a fresh durable target per run, with pool-size 16 and 4. It runs
// only with DM_LOAD_BENCH=1 (DM_LOAD_BENCH_ROWS changes the rows per
// table); the numbers are in the package doc.
func TestLoadBenchmark(t *testing.T) {
	if os.Getenv("DM_LOAD_BENCH") != "1" {
		t.Skip("set DM_LOAD_BENCH=1 to run the load benchmark")
	}
	perTable := 125000
	if v := os.Getenv("DM_LOAD_BENCH_ROWS"); v != "" {
		var err error
		if perTable, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true,
		ExtraConfig: []string{"innodb_buffer_pool_size=1G"}})
	e := &env{src: src, srcDB: src.PlainDB(t)}
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE sbtest")
	var tables []filter.TableName
	for i := 1; i <= 8; i++ {
		name := fmt.Sprintf("sbtest%d", i)
		tables = append(tables, tn("sbtest", name))
		mariadbtest.MustExec(t, e.srcDB, "CREATE TABLE sbtest."+name+" (id INT NOT NULL, k INT NOT NULL DEFAULT 0, "+
			"c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', PRIMARY KEY (id), KEY k_1 (k))",
			fmt.Sprintf("INSERT INTO sbtest.%s SELECT seq, FLOOR(1 + RAND() * %d), "+
				"LEFT(CONCAT_WS('-', MD5(RAND()), MD5(RAND()), MD5(RAND()), MD5(RAND())), 120), "+
				"LEFT(CONCAT_WS('-', MD5(RAND()), MD5(RAND())), 60) FROM sbtest.seq_1_to_%d", name, perTable, perTable))
	}
	dir := t.TempDir()
	began := time.Now()
	m := e.dumpTables(t, dir, "bench", "dump-bench", 10000, tables...)
	t.Logf("dump (test helper, one reader): %d rows, %d chunks, %.1f MB in %v", m.Rows(), m.Chunks(), float64(m.Bytes())/1e6, time.Since(began).Round(time.Millisecond))

	repeat := 3
	if v := os.Getenv("DM_LOAD_BENCH_REPEAT"); v != "" {
		var err error
		if repeat, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	for _, run := range []benchRun{
		{pool: 16, method: methodLoadData}, {pool: 4, method: methodLoadData},
		{pool: 16, method: methodInsert}, {pool: 4, method: methodInsert},
		{pool: 4, method: methodLoadData, session: map[string]string{"unique_checks": "0"}},
		{pool: 4, method: methodLoadData, indexAfter: true},
	} {
		var times, cpus []time.Duration
		for range repeat {
			took, cpu := e.benchLoad(t, run, dir, m, perTable)
			times, cpus = append(times, took), append(cpus, cpu)
		}
		slices.Sort(times)
		slices.Sort(cpus)
		med := times[len(times)/2]
		t.Logf("BENCH %s: median %v = %.0f rows/s, CPU (target server + unit) median %v, over %d runs %v", run, med.Round(time.Millisecond),
			float64(m.Rows())/med.Seconds(), cpus[len(cpus)/2].Round(time.Millisecond), repeat, times)
	}
}

// benchRun is one configuration of TestLoadBenchmark.
type benchRun struct {
	pool    int
	method  int32
	session map[string]string
	// indexAfter: the target tables are created without their secondary
	// index, which is added after the load (the time includes it).
	indexAfter bool
}

func (r benchRun) String() string {
	s := fmt.Sprintf("%s pool-size %d", []string{"LOAD DATA", "INSERT"}[r.method], r.pool)
	if r.session != nil {
		s += fmt.Sprintf(" session %v", r.session)
	}
	if r.indexAfter {
		s += " secondary index after the data"
	}
	return s
}

// benchLoad loads the dump in dir into a fresh durable target and returns
// how long it took and the CPU time the target server and this process
// used meanwhile (less sensitive than the time to other work on the
// machine).
func (e *env) benchLoad(t *testing.T, run benchRun, dir string, m *dumpfile.Manifest, perTable int) (took, cpu time.Duration) {
	dst := mariadbtest.Start(t, mariadbtest.Options{Name: "target", ExtraConfig: []string{"innodb_buffer_pool_size=1G"}})
	defer dst.Stop(t)
	e.dst, e.dstDB = dst, dst.PlainDB(t)
	cfg, srcCfg := e.configs("bench", config.ModeFull, run.pool)
	keep := false
	cfg.Loader.CleanupDumpFile = &keep
	cfg.TargetDatabase.Session = run.session
	if run.indexAfter {
		mariadbtest.MustExec(t, e.dstDB, "CREATE DATABASE sbtest")
		for _, tb := range m.Tables {
			mariadbtest.MustExec(t, e.dstDB, "CREATE TABLE sbtest."+tb.Name+" (id INT NOT NULL, k INT NOT NULL DEFAULT 0, "+
				"c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', PRIMARY KEY (id))")
		}
	}
	l := newLoader(t, cfg, srcCfg, dir, nil)
	defer l.Close()
	l.method.Store(run.method)
	began, cpuBefore := time.Now(), cpuTime(t, dst)
	requireOK(t, process(t, l))
	if run.indexAfter {
		for _, tb := range m.Tables {
			mariadbtest.MustExec(t, e.dstDB, "ALTER TABLE sbtest."+tb.Name+" ADD KEY k_1 (k)")
		}
	}
	took, cpu = time.Since(began), cpuTime(t, dst)-cpuBefore
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%s: %d rows in %v = %.0f rows/s (%.1f MB/s), CPU %v; Go heap in use %.1f MiB", run, m.Rows(), took.Round(time.Millisecond),
		float64(m.Rows())/took.Seconds(), float64(m.Bytes())/1e6/took.Seconds(), cpu.Round(time.Millisecond), float64(ms.HeapInuse)/(1<<20))
	if n := queryInt(t, e.dstDB, "SELECT COUNT(*) FROM sbtest.sbtest8"); n != int64(perTable) {
		t.Fatalf("sbtest8: %d rows on the target, want %d", n, perTable)
	}
	return took, cpu
}

// cpuTime is the user+system CPU time of the target's mariadbd and of this
// process so far.
func cpuTime(t *testing.T, dst *mariadbtest.Instance) time.Duration {
	t.Helper()
	pid, err := os.ReadFile(filepath.Join(dst.Dir(), "mariadbd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	stat, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which ends with ')'): utime and
	// stime are the 12th and 13th, in clock ticks (100 per second).
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	self := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return time.Duration(ut+st)*10*time.Millisecond + self
}
