//go:build bench

package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// serverSettings are the my.cnf lines every benchmark server gets, source and targets alike, on
// top of mariadbtest's defaults and FastCommit (innodb_flush_log_at_trx_commit=2,
// sync_binlog=0): the same durability and cache sizes on every side of a comparison.
var serverSettings = []string{
	"innodb_buffer_pool_size=512M",
	"innodb_log_file_size=256M",
}

// startSource starts a binlog source for a benchmark.
func startSource(t *testing.T, name string, maxBinlog int64) *mariadbtest.Instance {
	t.Helper()
	return mariadbtest.Start(t, mariadbtest.Options{Name: name, Binlog: true, FastCommit: true,
		MaxBinlogSize: maxBinlog, ExtraConfig: serverSettings})
}

// startTarget starts a target with the common settings plus extra.
func startTarget(t *testing.T, name string, extra ...string) *mariadbtest.Instance {
	t.Helper()
	return mariadbtest.Start(t, mariadbtest.Options{Name: name, FastCommit: true,
		ExtraConfig: append(append([]string(nil), serverSettings...), extra...)})
}

// serverPID is the process id of an instance's mariadbd, from its pid file.
func serverPID(t *testing.T, inst *mariadbtest.Instance) string {
	t.Helper()
	pid, err := os.ReadFile(filepath.Join(inst.Dir(), "mariadbd.pid"))
	if err != nil {
		t.Fatalf("read pid of %s: %v", inst.Name(), err)
	}
	return strings.TrimSpace(string(pid))
}

// serverPeakRSS is the peak RSS (VmHWM) of an instance's mariadbd in bytes.
func serverPeakRSS(t *testing.T, inst *mariadbtest.Instance) int64 {
	t.Helper()
	kb, err := vmHWM(serverPID(t, inst))
	if err != nil {
		t.Fatalf("peak RSS of %s: %v", inst.Name(), err)
	}
	return kb * 1024
}

// userHZ is the unit of utime and stime in /proc/<pid>/stat (USER_HZ, 100 on Linux/amd64).
const userHZ = 100

// serverCPU is the user + system CPU time an instance's mariadbd has used so far.
func serverCPU(t *testing.T, inst *mariadbtest.Instance) time.Duration {
	t.Helper()
	cpu, err := procCPU(serverPID(t, inst))
	if err != nil {
		t.Fatalf("CPU time of %s: %v", inst.Name(), err)
	}
	return cpu
}

// procCPU is the user + system CPU time process pid has used so far, from /proc/<pid>/stat.
func procCPU(pid string) (time.Duration, error) {
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name: state is the 1st, utime the 12th, stime the 13th.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%s/stat %q", pid, stat)
	}
	var ticks int64
	for _, s := range fields[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%s/stat field %q: %w", pid, s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// cpuMeter measures the CPU time two instances use over a span.
type cpuMeter struct {
	a, b       *mariadbtest.Instance
	aCPU, bCPU time.Duration
}

func startCPUMeter(t *testing.T, a, b *mariadbtest.Instance) *cpuMeter {
	t.Helper()
	return &cpuMeter{a: a, b: b, aCPU: serverCPU(t, a), bCPU: serverCPU(t, b)}
}

// stop returns the CPU time each instance used since startCPUMeter.
func (m *cpuMeter) stop(t *testing.T) (a, b time.Duration) {
	t.Helper()
	return serverCPU(t, m.a) - m.aCPU, serverCPU(t, m.b) - m.bCPU
}

// vmHWM reads VmHWM (kB) from /proc/<pid>/status.
func vmHWM(pid string) (int64, error) {
	b, err := testutil.ProcStatusBytes(pid, "VmHWM")
	return b >> 10, err
}

// binlogFile is one row of SHOW BINARY LOGS.
type binlogFile struct {
	name string
	size int64
}

// binaryLogs lists the source's binlog files, oldest first.
func binaryLogs(t *testing.T, db *sql.DB) []binlogFile {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SHOW BINARY LOGS")
	if err != nil {
		t.Fatalf("SHOW BINARY LOGS: %v", err)
	}
	defer rows.Close()
	var out []binlogFile
	for rows.Next() {
		var b binlogFile
		if err := rows.Scan(&b.name, &b.size); err != nil {
			t.Fatalf("SHOW BINARY LOGS: %v", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("SHOW BINARY LOGS: %v", err)
	}
	return out
}

// totalSize sums the sizes of files.
func totalSize(files []binlogFile) int64 {
	var n int64
	for _, f := range files {
		n += f.size
	}
	return n
}

// backlogBytes is the number of binlog bytes between two locations of the source.
func backlogBytes(files []binlogFile, from, to binlog.Location) int64 {
	var n int64
	for _, f := range files {
		lo, hi := int64(0), f.size
		if f.name == from.Name {
			lo = int64(from.Pos)
		}
		if f.name == to.Name {
			hi = int64(to.Pos)
		}
		in := binlog.Location{Name: f.name}.Compare(binlog.Location{Name: from.Name}) >= 0 &&
			binlog.Location{Name: f.name}.Compare(binlog.Location{Name: to.Name}) <= 0
		if in && hi > lo {
			n += hi - lo
		}
	}
	return n
}

// quietEnd waits until the source's binlog end stays put for a moment (MariaDB writes
// Binlog_checkpoint events in the background after a rotation) and returns it.
func quietEnd(t *testing.T, src *mariadbtest.Instance) binlog.Location {
	t.Helper()
	const quiet = time.Second
	var last binlog.Location
	since := time.Now()
	testutil.Eventually(t, time.Minute, fmt.Sprintf("the binlog of %s stops growing for %s after the workload", src.Name(), quiet), func() error {
		file, pos, _ := src.MasterStatus(t)
		if cur := (binlog.Location{Name: file, Pos: pos}); cur != last {
			last, since = cur, time.Now()
		}
		if moved := time.Since(since); moved < quiet {
			return fmt.Errorf("binlog end %s, moved %s ago", last, moved.Round(time.Millisecond))
		}
		return nil
	})
	return last
}

// dirBinlogBytes sums the sizes of the binlog files (named like the source's) under dir.
func dirBinlogBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasPrefix(d.Name(), "mariadb-bin.") || strings.HasSuffix(d.Name(), ".index") {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	if err != nil {
		t.Fatalf("size of the binlog files in %s: %v", dir, err)
	}
	return n
}

// pinnedConn is one connection of db for session settings such as sql_log_bin.
func pinnedConn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// execAll runs statements on conn, failing the test on the first error.
func execAll(t *testing.T, ctx context.Context, conn interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", clip(s), err)
		}
	}
}

func clip(s string) string {
	if len(s) > 160 {
		return s[:160] + "..."
	}
	return s
}

// tableChecksums returns CHECKSUM TABLE of each table.
func tableChecksums(t *testing.T, db *sql.DB, tables []string) map[string]string {
	t.Helper()
	out := make(map[string]string, len(tables))
	for _, tbl := range tables {
		var name string
		var sum sql.NullString
		if err := db.QueryRowContext(t.Context(), "CHECKSUM TABLE "+tbl).Scan(&name, &sum); err != nil {
			t.Fatalf("CHECKSUM TABLE %s: %v", tbl, err)
		}
		out[tbl] = fmt.Sprintf("%v:%s", sum.Valid, sum.String)
	}
	return out
}
