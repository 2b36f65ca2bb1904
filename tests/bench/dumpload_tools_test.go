//go:build bench

package bench

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// sysbenchThreads is `sysbench prepare`'s --threads: the tables are filled in parallel.
const sysbenchThreads = 4

// prepareFullSource starts the source and fills sbtest with `sysbench oltp_read_write
// --tables=sbTables --table-size=perTable prepare`, then reads what every target must hold.
func prepareFullSource(t *testing.T, perTable int64) *fullSource {
	t.Helper()
	prog, err := exec.LookPath("sysbench")
	if err != nil {
		t.Fatalf("sysbench is not installed (%v): run `bash scripts/install-deps.sh --bench` (make bench does)", err)
	}
	inst := startSource(t, "full-src", syncMaxBinlog)
	db := inst.DB(t)
	execAll(t, t.Context(), db, "CREATE DATABASE "+sbSchema)
	began := time.Now()
	args := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=" + inst.Host(),
		"--mysql-port=" + strconv.Itoa(inst.Port()), "--mysql-user=" + mariadbtest.RootUser, "--mysql-password=",
		"--mysql-db=" + sbSchema, fmt.Sprintf("--tables=%d", sbTables), fmt.Sprintf("--table-size=%d", perTable),
		fmt.Sprintf("--threads=%d", sysbenchThreads), "prepare"}
	run := runTool(t, t.Context(), prog, args)
	s := &fullSource{inst: inst, want: tableChecksums(t, db, sbTableNames()), counts: tableCounts(t, db)}
	for _, n := range s.counts {
		s.rows += n
	}
	if s.rows != perTable*sbTables {
		t.Fatalf("sysbench prepare filled %d rows, want %d", s.rows, perTable*sbTables)
	}
	execAll(t, t.Context(), db, "ANALYZE TABLE "+tableList())
	if err := db.QueryRowContext(t.Context(), "SELECT SUM(data_length + index_length) FROM information_schema.tables "+
		"WHERE table_schema = ?", sbSchema).Scan(&s.dataBytes); err != nil {
		t.Fatalf("size of %s on the source: %v", sbSchema, err)
	}
	t.Logf("source: sysbench prepare of %d tables x %d rows in %v (sysbench %v); %.1f MB of data and indexes",
		sbTables, perTable, since(began), run.elapsed.Round(time.Millisecond), mb(s.dataBytes))
	return s
}

// tableCounts returns COUNT(*) of every sysbench table.
func tableCounts(t *testing.T, db *sql.DB) map[string]int64 {
	t.Helper()
	out := make(map[string]int64, sbTables)
	for _, tbl := range sbTableNames() {
		var n int64
		if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+tbl).Scan(&n); err != nil {
			t.Fatalf("SELECT COUNT(*) FROM %s: %v", tbl, err)
		}
		out[tbl] = n
	}
	return out
}

// verify fails the test unless every sysbench table of tgt has the source's row count and
// CHECKSUM TABLE; who names the leg.
func (s *fullSource) verify(t *testing.T, tgt *target, who string) {
	t.Helper()
	counts := tableCounts(t, tgt.db)
	sums := tableChecksums(t, tgt.db, sbTableNames())
	for _, tbl := range sbTableNames() {
		if counts[tbl] != s.counts[tbl] || sums[tbl] != s.want[tbl] {
			t.Errorf("%s: %s differs from the source after the load: %d rows, checksum %s; source %d rows, checksum %s",
				who, tbl, counts[tbl], sums[tbl], s.counts[tbl], s.want[tbl])
		}
	}
}

// runPipeline copies sbtest with `mariadb-dump --single-transaction --databases sbtest | mariadb`
// into a fresh target.
func (s *fullSource) runPipeline(t *testing.T, round int, work string) fullRun {
	t.Helper()
	dumpProg, cliProg := mariadbtest.Program(t, "mariadb-dump"), mariadbtest.Program(t, "mariadb")
	tgt := startFullTarget(t, "pipeline", round)
	ctx, cancel := context.WithTimeout(t.Context(), fullTimeout)
	defer cancel()
	dump := exec.CommandContext(ctx, dumpProg, "--no-defaults", "--protocol=TCP", "-h", s.inst.Host(),
		"-P", strconv.Itoa(s.inst.Port()), "-u", mariadbtest.SourceUser, "-p"+mariadbtest.SourcePassword,
		"--single-transaction", "--databases", sbSchema)
	load := exec.CommandContext(ctx, cliProg, "--no-defaults", "--protocol=TCP", "-h", tgt.inst.Host(),
		"-P", strconv.Itoa(tgt.inst.Port()), "-u", mariadbtest.RootUser)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var dumpErr, loadErr bytes.Buffer
	dump.Stdout, dump.Stderr = pw, &dumpErr
	load.Stdin, load.Stdout, load.Stderr = pr, &loadErr, &loadErr
	cpu := startCPUMeter(t, s.inst, tgt.inst)
	began := time.Now()
	if err := load.Start(); err != nil {
		t.Fatalf("start mariadb: %v", err)
	}
	loadHWM := sampleHWM(load.Process.Pid)
	if err := dump.Start(); err != nil {
		t.Fatalf("start mariadb-dump: %v", err)
	}
	dumpHWM := sampleHWM(dump.Process.Pid)
	_, _ = pr.Close(), pw.Close() // the children hold their own copies
	derr := dump.Wait()
	dumpPeak := dumpHWM.stop()
	lerr := load.Wait()
	done := time.Since(began)
	loadPeak := loadHWM.stop()
	srcCPU, tgtCPU := cpu.stop(t)
	if err := errors.Join(derr, lerr); err != nil {
		t.Fatalf("mariadb-dump | mariadb: %v\nmariadb-dump: %s\nmariadb: %s", err, dumpErr.String(), loadErr.String())
	}
	s.verify(t, tgt, "mariadb-dump | mariadb")
	elapsed := time.Since(began)
	du, lu := usageOf(dump.ProcessState, done), usageOf(load.ProcessState, done)
	r := fullRun{elapsed: elapsed, done: done, cpu: du.CPU + lu.CPU, peakRSS: dumpPeak, peakRSS2: loadPeak,
		srcCPU: srcCPU, tgtCPU: tgtCPU}
	t.Logf("round %d, mariadb-dump | mariadb: %v (tools exited at %v), %.0f rows/s; CPU mariadb-dump %v, mariadb %v, "+
		"source %v, target %v; peak RSS mariadb-dump %.1f MiB, mariadb %.1f MiB", round, elapsed.Round(time.Millisecond),
		done.Round(time.Millisecond), r.rowsPerSec(s.rows), du.CPU, lu.CPU, srcCPU, tgtCPU,
		float64(dumpPeak)/(1<<20), float64(loadPeak)/(1<<20))
	tgt.kill(t)
	return r
}

// runMydumper copies sbtest with `mydumper --threads 4` into a directory and then `myloader
// --threads 4` into a fresh target.
func (s *fullSource) runMydumper(t *testing.T, round int, work string) fullRun {
	t.Helper()
	dumper, loader := lookTool(t, "mydumper"), lookTool(t, "myloader")
	tgt := startFullTarget(t, "mydumper", round)
	dir := filepath.Join(legDir(t, work, "mydumper", round), "dump")
	ctx, cancel := context.WithTimeout(t.Context(), fullTimeout)
	defer cancel()
	cpu := startCPUMeter(t, s.inst, tgt.inst)
	began := time.Now()
	du := runSampled(t, ctx, dumper, []string{"--host", s.inst.Host(), "--port", strconv.Itoa(s.inst.Port()),
		"--user", mariadbtest.SourceUser, "--password", mariadbtest.SourcePassword, "--database", sbSchema,
		"--threads", strconv.Itoa(fullThreads), "--outputdir", dir, "--verbose", "1"})
	lu := runSampled(t, ctx, loader, []string{"--host", tgt.inst.Host(), "--port", strconv.Itoa(tgt.inst.Port()),
		"--user", mariadbtest.RootUser, "--directory", dir, "--threads", strconv.Itoa(fullThreads), "--verbose", "1"})
	done := time.Since(began)
	srcCPU, tgtCPU := cpu.stop(t)
	s.verify(t, tgt, "mydumper + myloader")
	elapsed := time.Since(began)
	r := fullRun{elapsed: elapsed, done: done, dump: du.elapsed, load: lu.elapsed, cpu: du.cpu + lu.cpu,
		peakRSS: du.peakRSS, peakRSS2: lu.peakRSS, srcCPU: srcCPU, tgtCPU: tgtCPU, dumpBytes: dirSize(t, dir)}
	t.Logf("round %d, mydumper + myloader: %v (mydumper %v, myloader %v), %.0f rows/s, dump %.1f MB; CPU mydumper %v, "+
		"myloader %v, source %v, target %v; peak RSS mydumper %.1f MiB, myloader %.1f MiB", round,
		elapsed.Round(time.Millisecond), du.elapsed.Round(time.Millisecond), lu.elapsed.Round(time.Millisecond),
		r.rowsPerSec(s.rows), mb(r.dumpBytes), du.cpu, lu.cpu, srcCPU, tgtCPU,
		float64(du.peakRSS)/(1<<20), float64(lu.peakRSS)/(1<<20))
	removeAll(t, filepath.Dir(dir))
	tgt.kill(t)
	return r
}

// lookTool finds a program of the mydumper package on $PATH, failing with how to install it.
func lookTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed (%v): run `bash scripts/install-deps.sh --bench` (make bench does); "+
			"it comes with Debian's mydumper package", name, err)
	}
	return p
}

// dirSize sums the sizes of the regular files under dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatalf("size of %s: %v", dir, err)
	}
	return n
}

// hwmSampler polls a process's VmHWM (/proc/<pid>/status) every hwmPeriod until stopped. The
// kernel's ru_maxrss of a child is no use for small programs: it starts at the peak RSS of the
// parent's memory the child was forked from (the test binary's), which exec records.
type hwmSampler struct {
	stopc chan struct{}
	done  chan struct{} // closed by the sampling goroutine when it returns
	// peak is written by the sampling goroutine before it closes done: the largest VmHWM in bytes.
	peak int64
}

// hwmPeriod is how often a sampler reads VmHWM; growth in a process's last period is missed.
const hwmPeriod = 5 * time.Millisecond

func sampleHWM(pid int) *hwmSampler {
	s := &hwmSampler{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(hwmPeriod)
		defer tick.Stop()
		for {
			if kb, err := vmHWM(strconv.Itoa(pid)); err == nil {
				s.peak = max(s.peak, kb*1024)
			}
			select {
			case <-tick.C:
			case <-s.stopc:
				return
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the largest VmHWM seen, in bytes.
func (s *hwmSampler) stop() int64 {
	close(s.stopc)
	<-s.done
	return s.peak
}

// sampledRun is a tool's run with its sampled peak RSS.
type sampledRun struct {
	elapsed time.Duration
	cpu     time.Duration
	peakRSS int64 // bytes, sampled VmHWM
}

// runSampled runs prog with args to completion, sampling its VmHWM, failing the test unless it
// exits 0.
func runSampled(t *testing.T, ctx context.Context, prog string, args []string) sampledRun {
	t.Helper()
	cmd := exec.CommandContext(ctx, prog, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", prog, err)
	}
	hwm := sampleHWM(cmd.Process.Pid)
	err := cmd.Wait()
	wall := time.Since(began)
	peak := hwm.stop()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", prog, args, err, out.String())
	}
	return sampledRun{elapsed: wall, cpu: usageOf(cmd.ProcessState, wall).CPU, peakRSS: peak}
}
