//go:build bench

package bench

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// Parameters of the relay-through-the-worker benchmark (defaults: issue 27's outside check,
// 819 MiB in 4 files).
const (
	rwTxnsEnv   = "BENCH_RW_TXNS"   // INSERT ... SELECT statements (default 200)
	rwRowsEnv   = "BENCH_RW_ROWS"   // rows per statement (default 20000)
	rwRoundsEnv = "BENCH_RW_ROUNDS" // rounds of the three readers, the first rotating (default 3)
	rwTable     = "bench.rw"
	// rwPoll is how often the relay directory is looked at while the worker pulls.
	rwPoll = 2 * time.Millisecond
	// rwTimeout bounds one pull by the worker.
	rwTimeout = 5 * time.Minute
	// rwStraceEnv, when 1, attaches `strace -c -f` to each worker for its pull and logs the
	// summary (the pull is slower under strace: its times are not recorded).
	rwStraceEnv = "BENCH_RW_STRACE"
)

// rwRun is one timed pull of the whole binlog by a dm-worker process.
type rwRun struct {
	elapsed time.Duration // keys written -> the last relay file has the master's size
	// firstFile is the time from writing the keys until the first relay file exists: the
	// worker's startup part (watch, source config, connecting, recovery, the dump's handshake).
	firstFile time.Duration
	cpu       time.Duration // the worker's CPU time over elapsed
	peakRSS   int64         // the worker's VmHWM at the end, bytes
	sourceCPU time.Duration
	// minflt and majflt are the worker's page faults, gcs its GC cycles over elapsed.
	minflt, majflt, gcs int64
}

// TestRelayThroughWorker is issue 27's outside check of the relay: a source with
// max_binlog_size=256M gets BENCH_RW_TXNS `INSERT ... SELECT` statements of BENCH_RW_ROWS rows of
// (BIGINT, INT, VARCHAR(255) holding 200 bytes); then, BENCH_RW_ROUNDS times each, the first
// rotating, (a) `mariadb-binlog --read-from-remote-server --raw --to-last-log` into an
// empty directory, timed from process start to exit, and (b) a fresh dm-worker process (the real
// binary, etcd outside it), already serving /healthz, whose relay is started by writing the
// source config (enable-relay), relay stage and bound keys into etcd, timed from the write until
// the last relay file has the master's size, and (c) the relay alone in a child process, as
// TestRelayThroughput runs it (what the worker process adds is the difference). It records the
// medians, the worker's CPU time and peak RSS (bound: 64 MiB) and the time until the first
// relay file appeared.
func TestRelayThroughWorker(t *testing.T) {
	txns := int(envInt(t, rwTxnsEnv, 200))
	rows := envInt(t, rwRowsEnv, 20000)
	rounds := int(envInt(t, rwRoundsEnv, 3))
	ctx := t.Context()
	prog := mariadbtest.Program(t, "mariadb-binlog")
	bin := buildBinaries(t)
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	src := startSource(t, "rw-src", relayMaxBinlog)
	db := src.DB(t)

	began := time.Now()
	execAll(t, ctx, db, "CREATE DATABASE bench",
		"CREATE TABLE "+rwTable+" (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL, c VARCHAR(255) NOT NULL) ENGINE=InnoDB")
	rwFill(t, ctx, db, txns, rows)
	end := quietEnd(t, src)
	files := binaryLogs(t, db)
	total := totalSize(files)
	if last := files[len(files)-1]; last.name != end.Name || last.size != int64(end.Pos) {
		t.Fatalf("SHOW BINARY LOGS ends at %s:%d, SHOW MASTER STATUS at %s", last.name, last.size, end)
	}
	t.Logf("generated %d binlog files, %.1f MB, in %v; end %s", len(files), mb(total), since(began), end)

	work := t.TempDir()
	var ours []rwRun
	var theirs, child []readerRun
	for round := range rounds {
		workerRun := func() {
			r := rwPull(t, bin, cli, etcd, src, end, total, round, work)
			ours = append(ours, r)
			t.Logf("round %d: dm-worker %v (%.1f MB/s; first relay file at %v), CPU %v, peak RSS %.1f MB, source CPU %v, "+
				"page faults %d minor / %d major, %d GC cycles", round, r.elapsed.Round(time.Millisecond), mb(total)/r.elapsed.Seconds(),
				r.firstFile.Round(time.Millisecond), r.cpu.Round(time.Millisecond), mb(r.peakRSS), r.sourceCPU.Round(time.Millisecond),
				r.minflt, r.majflt, r.gcs)
		}
		binlogRun := func() {
			dir := filepath.Join(work, fmt.Sprintf("mariadb-binlog-%d", round))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			args := append(src.ClientArgs(), "--read-from-remote-server", "--raw", "--to-last-log",
				"--result-file="+dir+"/", files[0].name)
			cpu0 := serverCPU(t, src)
			run := runTool(t, ctx, prog, args)
			run.sourceCPU = serverCPU(t, src) - cpu0
			if got := dirBinlogBytes(t, dir); got != total {
				t.Fatalf("round %d: mariadb-binlog wrote %d bytes of binlog, the source has %d", round, got, total)
			}
			theirs = append(theirs, run)
			t.Logf("round %d: mariadb-binlog %v (%.1f MB/s), CPU %v, peak RSS %.1f MB, source CPU %v", round,
				run.elapsed.Round(time.Millisecond), mb(total)/run.elapsed.Seconds(), run.usage.CPU.Round(time.Millisecond),
				mb(run.usage.PeakRSS), run.sourceCPU.Round(time.Millisecond))
			removeAll(t, dir)
		}
		// The relay alone in a child process, as TestRelayThroughput runs it: what the worker
		// process adds is the difference.
		childRun := func() {
			dir := filepath.Join(work, fmt.Sprintf("relay-%d", round))
			params := relayParams{childCommon: childCommon{Timeout: rwTimeout},
				Dir: dir, Host: src.Host(), Port: src.Port(), User: mariadbtest.RootUser, EndName: end.Name, EndPos: end.Pos}
			if p := os.Getenv(profileEnv); p != "" {
				params.CPUProfile = filepath.Join(p, fmt.Sprintf("rw-child-%d.cpu.pprof", round))
			}
			cpu0 := serverCPU(t, src)
			rep, usage := spawnChild(t, ctx, "relay", params, work)
			run := readerRun{rep.Elapsed, usage, serverCPU(t, src) - cpu0}
			if got := dirBinlogBytes(t, dir); got != total {
				t.Fatalf("round %d: the relay child wrote %d bytes of binlog, the source has %d", round, got, total)
			}
			child = append(child, run)
			t.Logf("round %d: relay child %v (%.1f MB/s), CPU %v, peak RSS %.1f MB, source CPU %v", round,
				run.elapsed.Round(time.Millisecond), mb(total)/run.elapsed.Seconds(), run.usage.CPU.Round(time.Millisecond),
				mb(run.usage.PeakRSS), run.sourceCPU.Round(time.Millisecond))
			removeAll(t, dir)
		}
		runs := []func(){workerRun, binlogRun, childRun}
		for k := range runs {
			runs[(round+k)%len(runs)]()
		}
	}

	o := median(ours, func(r rwRun) time.Duration { return r.elapsed })
	b := median(theirs, func(r readerRun) time.Duration { return r.elapsed })
	c := median(child, func(r readerRun) time.Duration { return r.elapsed })
	first := median(ours, func(r rwRun) time.Duration { return r.firstFile })
	var peak int64
	for _, r := range ours {
		peak = max(peak, r.peakRSS)
	}
	r := ratio(b.elapsed.Seconds(), o.elapsed.Seconds())
	record(t, "relay-through-worker",
		f("binlog_MB", mb(total)), f("files", len(files)), f("txns", txns), f("rows_per_txn", rows), f("rounds", rounds),
		f("ratio", r), f("target", verdict(r, 1.2)),
		f("worker_s", o.elapsed.Seconds()), f("mariadb_binlog_s", b.elapsed.Seconds()),
		f("worker_first_file_s", first.firstFile.Seconds()),
		f("relay_child_s", c.elapsed.Seconds()), f("relay_child_ratio", ratio(b.elapsed.Seconds(), c.elapsed.Seconds())),
		f("relay_child_cpu_s", c.usage.CPU.Seconds()), f("relay_child_peak_rss_MB", mb(maxRSS(child))),
		f("worker_MBps", mb(total)/o.elapsed.Seconds()), f("mariadb_binlog_MBps", mb(total)/b.elapsed.Seconds()),
		f("worker_cpu_s", o.cpu.Seconds()), f("worker_minflt", o.minflt), f("worker_majflt", o.majflt), f("worker_gc_cycles", o.gcs), f("mariadb_binlog_cpu_s", b.usage.CPU.Seconds()),
		f("source_cpu_s_worker", o.sourceCPU.Seconds()), f("source_cpu_s_mariadb_binlog", b.sourceCPU.Seconds()),
		f("worker_peak_rss_MiB", mib(peak)), f("rss_bound", rwRSSVerdict(peak)),
		f("mariadb_binlog_peak_rss_MB", mb(maxRSS(theirs))))
	if mib(peak) > 64 {
		t.Errorf("dm-worker's peak RSS %.1f MiB is above the relay's bound of 64 MiB", mib(peak))
	}
}

// rwFill runs txns `INSERT ... SELECT` statements of rows rows each (generated from the Sequence
// engine) into rwTable, one after the other.
func rwFill(t *testing.T, ctx context.Context, db *sql.DB, txns int, rows int64) {
	t.Helper()
	for i := range int64(txns) {
		lo, hi := i*rows+1, (i+1)*rows
		q := fmt.Sprintf("INSERT INTO %s SELECT seq, seq %% 1000003, LEFT(REPEAT(MD5(seq), 7), 200) FROM bench.seq_%d_to_%d",
			rwTable, lo, hi)
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("statement %d of %d: %v", i+1, txns, err)
		}
	}
}

// rwPull starts a fresh dm-worker (its own data directory and etcd prefix), waits until it
// serves /healthz, then writes the source config, relay stage and bound keys and times the
// relay's pull of the source's whole binlog (total bytes, ending at end).
func rwPull(t *testing.T, bin binaries, cli *clientv3.Client, etcd *etcdtest.Cluster, src *mariadbtest.Instance,
	end binlog.Location, total int64, round int, work string) rwRun {
	t.Helper()
	ctx := t.Context()
	prefix := fmt.Sprintf("/bench-rw-%d", round)
	dataDir := filepath.Join(work, fmt.Sprintf("dm-%d", round))
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	w := startWorker(t, bin, benchWorker, strings.Join(etcd.Endpoints(), ","), prefix, dataDir)
	keys := ha.Keys{Prefix: prefix}
	cfg := fmt.Sprintf(`{"source-id":%q,"flavor":"mariadb","enable-relay":true,"from":{"host":%q,"port":%d,"user":%q,"password":%q}}`,
		benchSourceID, src.Host(), src.Port(), mariadbtest.SourceUser, mariadbtest.SourcePassword)
	ops := []clientv3.Op{
		clientv3.OpPut(keys.SourceConfig(benchSourceID), cfg),
		clientv3.OpPut(keys.RelayStage(benchSourceID), `{"expect":"Running"}`),
		clientv3.OpPut(keys.Bound(w.name), fmt.Sprintf(`{"source":%q,"worker":%q}`, benchSourceID, w.name)),
	}
	var prof *profiler
	if p := os.Getenv(profileEnv); p != "" {
		prof = startProfiler(ctx, w, p, fmt.Sprintf("rw-%d", round))
	}
	var strace *exec.Cmd
	var straceOut bytes.Buffer
	if os.Getenv(rwStraceEnv) == "1" {
		strace = exec.Command("strace", "-c", "-f", "-p", w.pidString())
		strace.Stdout, strace.Stderr = &straceOut, &straceOut
		if err := strace.Start(); err != nil {
			t.Fatalf("start strace: %v", err)
		}
		time.Sleep(500 * time.Millisecond) // attached to every thread
	}
	cpu0, err := procCPU(w.pidString())
	if err != nil {
		t.Fatal(err)
	}
	flt0 := rwFaults(t, w.pidString())
	gc0 := scrapeGauges(t, w, "go_gc_duration_seconds_count")[0]
	srcCPU0 := serverCPU(t, src)
	relayDir := filepath.Join(dataDir, "relay")
	putCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	began := time.Now()
	_, err = cli.Txn(putCtx).Then(ops...).Commit()
	cancel()
	if err != nil {
		t.Fatalf("put the relay's keys: %v", err)
	}
	var first time.Duration
	deadline := began.Add(rwTimeout)
	for {
		last, exists := rwLastFile(relayDir, end.Name)
		if exists && first == 0 {
			first = time.Since(began)
		}
		if last == int64(end.Pos) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("round %d: the worker's relay has %d of %d bytes of %s after %v", round, last, end.Pos, end.Name, rwTimeout)
		}
		select {
		case <-w.done:
			t.Fatalf("round %d: dm-worker exited: %v", round, w.exit)
		case <-time.After(rwPoll):
		}
	}
	elapsed := time.Since(began)
	cpu1, err := procCPU(w.pidString())
	if err != nil {
		t.Fatal(err)
	}
	srcCPU := serverCPU(t, src) - srcCPU0
	flt := rwFaults(t, w.pidString())
	gcs := scrapeGauges(t, w, "go_gc_duration_seconds_count")[0] - gc0
	if strace != nil {
		_ = strace.Process.Signal(syscall.SIGINT)
		_ = strace.Wait()
		t.Logf("round %d, dm-worker: strace -c -f over the pull (times not recorded):\n%s", round, straceOut.String())
	}
	hwm, err := vmHWM(w.pidString())
	if err != nil {
		t.Fatalf("peak RSS of dm-worker: %v", err)
	}
	if prof != nil {
		files, err := prof.stop()
		if err != nil {
			t.Errorf("CPU profile of dm-worker: %v", err)
		}
		t.Logf("round %d, dm-worker: CPU profiles: go tool pprof -top %s", round, strings.Join(files, " "))
	}
	w.stop(t)
	if got := dirBinlogBytes(t, relayDir); got != total {
		t.Fatalf("round %d: the worker's relay holds %d bytes of binlog, the source has %d", round, got, total)
	}
	removeAll(t, dataDir)
	return rwRun{elapsed: elapsed, firstFile: first, cpu: cpu1 - cpu0, peakRSS: hwm * 1024, sourceCPU: srcCPU,
		minflt: flt[0] - flt0[0], majflt: flt[1] - flt0[1], gcs: gcs}
}

// rwFaults reads the minor and major page faults of process pid from /proc/<pid>/stat.
func rwFaults(t *testing.T, pid string) [2]int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's closing parenthesis: state, ppid, pgrp, session, tty_nr,
	// tpgid, flags, minflt, cminflt, majflt, ...
	_, rest, ok := strings.Cut(string(b), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 10 {
		t.Fatalf("/proc/%s/stat: %q", pid, b)
	}
	var out [2]int64
	for i, k := range []int{7, 9} {
		if out[i], err = strconv.ParseInt(fields[k], 10, 64); err != nil {
			t.Fatalf("/proc/%s/stat field %d: %v", pid, k+3, err)
		}
	}
	return out
}

// rwLastFile is the size of the relay file named name under relayDir (in the relay's
// subdirectory), -1 when there is none yet; exists reports whether any relay binlog file exists.
func rwLastFile(relayDir, name string) (size int64, exists bool) {
	size = -1
	subs, err := os.ReadDir(relayDir)
	if err != nil {
		return size, false
	}
	for _, sub := range subs {
		if !sub.IsDir() {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(relayDir, sub.Name()))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), "mariadb-bin.") || strings.HasSuffix(e.Name(), ".index") {
				continue
			}
			exists = true
			if e.Name() == name {
				if info, err := e.Info(); err == nil {
					size = info.Size()
				}
			}
		}
	}
	return size, exists
}

// rwRSSVerdict compares a peak RSS with the relay's bound of 64 MiB.
func rwRSSVerdict(peak int64) string {
	if mib(peak) <= 64 {
		return "met(<=64MiB)"
	}
	return fmt.Sprintf("MISSED(<=64MiB,by_%.1fMiB)", mib(peak)-64)
}
