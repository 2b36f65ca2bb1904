package dump

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestDumpBenchmark measures a dump of 8 sysbench-like tables of 125k rows
// (1M rows) with threads=4, rows=10000, next to mariadb-dump
// --single-transaction and mydumper --threads 4 on the same server. It runs
// only with DM_DUMP_BENCH=1 (it takes a minute or two).
func TestDumpBenchmark(t *testing.T) {
	if os.Getenv("DM_DUMP_BENCH") == "" {
		t.Skip("set DM_DUMP_BENCH=1 to measure the dump")
	}
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true,
		ExtraConfig: []string{"innodb_buffer_pool_size=1G"}})
	src.Exec(t, "CREATE DATABASE sbtest")
	const tables, rows = 8, 125000
	for i := 1; i <= tables; i++ {
		src.Exec(t, fmt.Sprintf("CREATE TABLE sbtest.sbtest%d (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL DEFAULT 0, "+
			"c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', KEY k_%d (k)) ENGINE=InnoDB", i, i))
		src.Exec(t, fmt.Sprintf("INSERT INTO sbtest.sbtest%d (id, k, c, pad) SELECT seq, FLOOR(RAND() * %d), "+
			"LEFT(REPEAT(CONCAT(LPAD(FLOOR(RAND() * 99999999999), 11, '0'), '-'), 11), 119), "+
			"LEFT(REPEAT(CONCAT(LPAD(FLOOR(RAND() * 99999999999), 11, '0'), '-'), 5), 59) FROM sbtest.seq_1_to_%d", i, rows, rows))
	}
	src.Exec(t, "SELECT COUNT(*) FROM sbtest.sbtest1") // warm nothing in particular; the buffer pool holds the loaded pages

	cfg, scfg := configs(src, mariadbtest.SourceUser, mariadbtest.SourcePassword, 4, 10000)
	// The machine is shared: each tool runs three times, interleaved, after
	// a warm-up; the best of three is what they can do.
	dumpArgs := append(src.ClientArgs(), "--single-transaction", "--databases", "sbtest")
	myArgs := []string{"--host", src.Host(), "--port", strconv.Itoa(src.Port()), "--user", mariadbtest.RootUser,
		"--threads", "4", "--rows", "10000", "--database", "sbtest"}
	mydumper, _ := exec.LookPath("mydumper")
	timeCommand(t, "warm-up", mariadbtest.Program(t, "mariadb-dump"), append(dumpArgs, "--result-file="+filepath.Join(t.TempDir(), "dump.sql"))...)
	best := map[string]time.Duration{}
	note := func(what string, d time.Duration) {
		if b, ok := best[what]; !ok || d < b {
			best[what] = d
		}
	}
	for range 3 {
		d := newDumper(t, cfg, scfg, t.TempDir())
		began, cpu0 := time.Now(), cpuTime()
		m := process(t, d)
		took, cpu := time.Since(began), cpuTime()-cpu0
		note("dm dump (threads 4, rows 10000)", took)
		t.Logf("dm dump: %d rows, %d chunks, %.1f MB in %v = %.0f rows/s, %.1f MB/s, CPU %v; lock held %v; peak RSS of the test process %s",
			m.Rows(), m.Chunks(), float64(m.Bytes())/1e6, took, float64(m.Rows())/took.Seconds(),
			float64(m.Bytes())/1e6/took.Seconds(), cpu.Round(time.Millisecond), m.LockHeld, peakRSS())
		if m.Rows() != tables*rows {
			t.Errorf("dumped %d rows, want %d", m.Rows(), tables*rows)
		}
		d.Close()
		note("mariadb-dump --single-transaction", timeCommand(t, "mariadb-dump --single-transaction", mariadbtest.Program(t, "mariadb-dump"),
			append(dumpArgs, "--result-file="+filepath.Join(t.TempDir(), "dump.sql"))...))
		if mydumper != "" {
			out := filepath.Join(t.TempDir(), "my")
			note("mydumper --threads 4 --rows 10000", timeCommand(t, "mydumper", mydumper, append(myArgs, "--outputdir", out)...))
			t.Logf("mydumper wrote %.1f MB", float64(dirSize(t, out))/1e6)
		}
	}
	for what, d := range best {
		t.Logf("best of 3: %-36s %v = %.0f rows/s", what, d.Round(time.Millisecond), tables*rows/d.Seconds())
	}
}

func timeCommand(t *testing.T, what, path string, args ...string) time.Duration {
	t.Helper()
	began := time.Now()
	cmd := exec.CommandContext(t.Context(), path, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s: %v\n%s", what, err, out)
		return 0
	}
	took := time.Since(began)
	t.Logf("%s: %v, CPU %v", what, took.Round(time.Millisecond), (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Round(time.Millisecond))
	return took
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS is VmHWM of this process.
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// dirSize is the size of the files in dir.
func dirSize(t *testing.T, dir string) (n int64) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			n += info.Size()
		}
	}
	return n
}
