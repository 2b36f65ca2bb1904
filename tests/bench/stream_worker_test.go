//go:build bench

package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/binlog/upstream"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// Parameters of the bulk-row stream benchmark (issue 27): the backlog is swInserts
// `INSERT … SELECT` of swInsertRows rows each, then swUpdates `UPDATE`s of swUpdateRows rows each.
const (
	swInsertsEnv    = "BENCH_SW_INSERTS"     // default 10
	swInsertRowsEnv = "BENCH_SW_INSERT_ROWS" // default 50,000
	swUpdatesEnv    = "BENCH_SW_UPDATES"     // default 10
	swUpdateRowsEnv = "BENCH_SW_UPDATE_ROWS" // default 40,000
	swRoundsEnv     = "BENCH_SW_ROUNDS"      // rounds of the two readers, the first rotating (default 3)
	// swTraceEnv, when set, is a path prefix: an execution trace of the worker's first
	// swTraceSeconds of each stream run goes to <prefix>-<round>.trace (go tool trace).
	swTraceEnv     = "BENCH_SW_TRACE"
	swTraceSeconds = 3

	swDB     = "swbench"
	swTable  = swDB + ".bulk"
	swStream = "sw-bulk"
	// swTimeout bounds one stream catch-up.
	swTimeout = 10 * time.Minute
	// swTargetRatio is the target: the stream at >= 0.5x mariadb-binlog's decode.
	swTargetRatio = 0.5
)

// swBacklog is the bulk-row backlog on its source, from the first binlog file's position 4 to
// end.
type swBacklog struct {
	src   *mariadbtest.Instance
	first string // the first binlog file
	end   binlog.Location
	// rows is the number of row changes in the backlog; ddls the DDL statements of swDB the
	// stream delivers as events (CREATE DATABASE, CREATE TABLE).
	rows, ddls int64
	bytes      int64 // binlog bytes from the first file's start to end
	// lastEvent is what the "source" block of the backlog's last row change holds,
	// `"pos":<its rows event's end>,"row":<its index>,` (set by swDecodeOnly).
	lastEvent string
}

// swRun is one timed catch-up by one of the benchmark's readers.
type swRun struct {
	// elapsed is until the reader's output holds every event: for the stream, until the last
	// line of its sink's newest file is the backlog's last row change (the outside check's
	// completion); durable is until its checkpoint is the backlog end (everything fsynced).
	elapsed, durable time.Duration
	cpu              time.Duration
	peakRSS          int64 // bytes (VmHWM)
	lines            int64 // stream: jsonl lines in the sink
	sinkMB           float64
}

// TestStreamWorkerBulk compares one file-sink stream run by a real dm-worker process (its
// source, stream config and stage written into the worker's embedded etcd as minimal JSON,
// DESIGN.md §3) with `mariadb-binlog --read-from-remote-server --verbose
// --base64-output=decode-rows` to /dev/null, both from position 4 of the source's first binlog
// file, on a backlog of bulk row events (BENCH_SW_INSERTS `INSERT … SELECT` of
// BENCH_SW_INSERT_ROWS rows, BENCH_SW_UPDATES `UPDATE`s of BENCH_SW_UPDATE_ROWS rows; defaults
// 10 × 50k and 10 × 40k, 900k row changes), BENCH_SW_ROUNDS rounds alternating which goes first.
// The stream's clock runs from the put of its stage key until its status checkpoint is the
// backlog end; then the sink's files must hold exactly one line per row change and DDL. It
// also times a decode-only loop in this process (the stream's binlog opener, every event read
// and parsed, nothing else) and reports CPU-µs per event of each. With BENCH_PROFILE_DIR set,
// CPU profiles of the worker are fetched during each stream run.
func TestStreamWorkerBulk(t *testing.T) {
	rounds := int(envInt(t, swRoundsEnv, 3))
	bin := buildBinaries(t)
	b := swNewBacklog(t)
	prog := mariadbtest.Program(t, "mariadb-binlog")
	work := t.TempDir()

	dec := b.swDecodeOnly(t)
	events := b.rows + b.ddls
	t.Logf("decode-only loop (go-mysql through upstream.Opener): %v wall, %v CPU, %.2f CPU-µs per row change",
		dec.elapsed.Round(time.Millisecond), dec.cpu.Round(time.Millisecond), swMicros(dec.cpu, b.rows))

	runTool := func(round int) swRun {
		args := []string{"--no-defaults", "--read-from-remote-server", "--host=" + b.src.Host(),
			fmt.Sprintf("--port=%d", b.src.Port()), "--user=" + mariadbtest.SourceUser, "--password=" + mariadbtest.SourcePassword,
			"--verbose", "--base64-output=decode-rows", "--to-last-log", "--start-position=4", "--result-file=/dev/null", b.first}
		r := runSampled(t, t.Context(), prog, args)
		t.Logf("round %d, mariadb-binlog --verbose remote: %v, CPU %v, peak RSS %.1f MiB", round,
			r.elapsed.Round(time.Millisecond), r.cpu.Round(time.Millisecond), mib(r.peakRSS))
		return swRun{elapsed: r.elapsed, cpu: r.cpu, peakRSS: r.peakRSS}
	}
	runStream := func(round int) swRun { return b.swRunStream(t, bin, round, work) }
	readers := []func(int) swRun{runStream, runTool}
	runs := make([][]swRun, len(readers))
	for round := range rounds {
		for k := range readers {
			i := (round + k) % len(readers)
			runs[i] = append(runs[i], readers[i](round))
		}
	}
	took := func(r swRun) time.Duration { return r.elapsed }
	st, tool := median(runs[0], took), median(runs[1], took)
	var peak int64
	for _, r := range runs[0] {
		peak = max(peak, r.peakRSS)
	}
	r := ratio(tool.elapsed.Seconds(), st.elapsed.Seconds())
	rDurable := ratio(tool.elapsed.Seconds(), median(runs[0], func(r swRun) time.Duration { return r.durable }).durable.Seconds())
	record(t, "stream-worker-bulk",
		f("row_changes", b.rows), f("binlog_MB", mb(b.bytes)), f("rounds", rounds),
		f("stream_s", st.elapsed.Seconds()), f("stream_durable_s", st.durable.Seconds()), f("mariadb_binlog_s", tool.elapsed.Seconds()),
		f("ratio_vs_decode", r), f("target", verdict(r, swTargetRatio)), f("ratio_durable_vs_decode", rDurable),
		f("stream_events_per_s", float64(events)/st.elapsed.Seconds()),
		f("stream_cpu_s", st.cpu.Seconds()), f("stream_cpu_us_per_event", swMicros(st.cpu, events)),
		f("mariadb_binlog_cpu_s", tool.cpu.Seconds()), f("mariadb_binlog_cpu_us_per_row", swMicros(tool.cpu, b.rows)),
		f("decode_only_cpu_s", dec.cpu.Seconds()), f("decode_only_cpu_us_per_row", swMicros(dec.cpu, b.rows)),
		f("stream_peak_rss_MiB", mib(peak)), f("mariadb_binlog_peak_rss_MiB", mib(tool.peakRSS)),
		f("sink_MB", st.sinkMB), f("stream_runs_s", swSeconds(runs[0])), f("mariadb_binlog_runs_s", swSeconds(runs[1])))
}

// swMicros is d in µs per n.
func swMicros(d time.Duration, n int64) float64 {
	return float64(d.Microseconds()) / float64(max(n, 1))
}

// swSeconds lists the runs' wall times, for the results row.
func swSeconds(runs []swRun) string {
	s := make([]string, len(runs))
	for i, r := range runs {
		s[i] = fmt.Sprintf("%.2f", r.elapsed.Seconds())
	}
	return strings.Join(s, ",")
}

// swNewBacklog starts a source (one binlog file for the whole backlog) and writes the backlog.
func swNewBacklog(t *testing.T) *swBacklog {
	t.Helper()
	ctx := t.Context()
	inserts, insertRows := envInt(t, swInsertsEnv, 10), envInt(t, swInsertRowsEnv, 50_000)
	updates, updateRows := envInt(t, swUpdatesEnv, 10), envInt(t, swUpdateRowsEnv, 40_000)
	if updateRows > inserts*insertRows {
		t.Fatalf("%s=%d: an UPDATE cannot change more rows than the %d inserted", swUpdateRowsEnv, updateRows, inserts*insertRows)
	}
	src := startSource(t, "sw-src", 1<<30)
	db := src.DB(t)
	conn := pinnedConn(t, db)
	defer conn.Close()
	began := time.Now()
	execAll(t, ctx, conn, "CREATE DATABASE "+swDB,
		"CREATE TABLE "+swTable+" (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL, c VARCHAR(255) NOT NULL) ENGINE=InnoDB")
	for i := range inserts {
		lo := i*insertRows + 1
		execAll(t, ctx, conn, fmt.Sprintf("INSERT INTO %s SELECT seq, seq %% 1000, LEFT(REPEAT(MD5(seq), 7), 200) FROM "+swDB+".seq_%d_to_%d",
			swTable, lo, lo+insertRows-1))
	}
	total := inserts * insertRows
	for i := range updates {
		lo := (i*updateRows)%(total-updateRows+1) + 1
		execAll(t, ctx, conn, fmt.Sprintf("UPDATE %s SET k = k + 1 WHERE id BETWEEN %d AND %d", swTable, lo, lo+updateRows-1))
	}
	files := binaryLogs(t, db)
	b := &swBacklog{src: src, first: files[0].name, end: quietEnd(t, src),
		rows: inserts*insertRows + updates*updateRows, ddls: 2}
	b.bytes = backlogBytes(binaryLogs(t, db), binlog.Location{Name: b.first, Pos: 0}, b.end)
	t.Logf("bulk backlog: %d row changes, %.1f MB of binlog from %s:4 to %s, written in %v",
		b.rows, mb(b.bytes), b.first, b.end, since(began))
	return b
}

// swSelfCPU is the user + system CPU time this process has used.
func swSelfCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// swDecodeOnly reads the backlog with the stream's own binlog opener (upstream.Opener, the
// same go-mysql settings) and does nothing with the events but count row images: the decode
// cost a stream task pays before it converts anything.
func (b *swBacklog) swDecodeOnly(t *testing.T) swRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), swTimeout)
	defer cancel()
	src := &config.SourceConfig{SourceID: benchSourceID, From: config.DBConfig{Host: b.src.Host(), Port: b.src.Port(),
		User: mariadbtest.SourceUser, Password: mariadbtest.SourcePassword}}
	ep, err := dbconn.NewEndpoint(src.From, dbconn.SourceRef(src.SourceID))
	if err != nil {
		t.Fatal(err)
	}
	o := upstream.NewOpener(src, ep, "mariadb", upstream.ServerID("sw-decode", src.SourceID), nil)
	defer o.Close()
	cpu0, began := swSelfCPU(t), time.Now()
	st, err := o.Open(ctx, binlog.Location{Name: b.first, Pos: 4})
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for {
		ev, err := st.GetEvent(ctx)
		if err != nil {
			t.Fatalf("decode-only loop after %d rows: %v", rows, err)
		}
		if e, ok := ev.Event.(*replication.RowsEvent); ok {
			n := int64(len(e.Rows))
			if ev.Header.EventType == replication.UPDATE_ROWS_EVENTv1 || ev.Header.EventType == replication.UPDATE_ROWS_EVENTv2 {
				n /= 2
			}
			rows += n
			if n > 0 {
				b.lastEvent = fmt.Sprintf(`"pos":%d,"row":%d,`, ev.Header.LogPos, n-1)
			}
		}
		if ev.Header.LogPos >= b.end.Pos && ev.Header.EventType != replication.ROTATE_EVENT &&
			ev.Header.EventType != replication.FORMAT_DESCRIPTION_EVENT {
			break
		}
	}
	run := swRun{elapsed: time.Since(began), cpu: swSelfCPU(t) - cpu0}
	if rows != b.rows {
		t.Fatalf("decode-only loop read %d row changes, the backlog has %d", rows, b.rows)
	}
	return run
}

// swLastLineIs reports whether the last line of the newest file of the stream's sink in dir
// holds want.
func swLastLineIs(t *testing.T, dir, want string) bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false // not created yet
	}
	name, newest := sinkFileName(swStream), ""
	for _, e := range entries {
		if name.MatchString(e.Name()) && e.Name() > newest {
			newest = e.Name()
		}
	}
	if newest == "" {
		return false
	}
	f, err := os.Open(filepath.Join(dir, newest))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	const tail = 4096
	buf := make([]byte, min(st.Size(), tail))
	if _, err := f.ReadAt(buf, st.Size()-int64(len(buf))); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(buf, []byte("\n")), []byte("\n"))
	return len(buf) > 0 && buf[len(buf)-1] == '\n' && bytes.Contains(lines[len(lines)-1], []byte(want))
}

// swRunStream runs one stream catch-up through a fresh dm-worker process with embedded etcd:
// the source is bound, then the stream's config and stage keys are written, and the clock runs
// from that put until GET /api/v1/streams/<stream> shows the backlog end as checkpoint.
func (b *swBacklog) swRunStream(t *testing.T, bin binaries, round int, work string) swRun {
	t.Helper()
	ctx := t.Context()
	dir := filepath.Join(work, fmt.Sprintf("stream-%d", round))
	sinkDir := filepath.Join(dir, "sink")
	m, w := startIdleWorker(t, bin, dir, fmt.Sprintf("/bench-sw-%d", round))
	m.bindSource(t, w, b.src, false)
	cfg := fmt.Sprintf(`{"name":%q,"source-id":%q,"block-allow-list":{"do-dbs":[%q]},"start":{"binlog-name":%q,"binlog-pos":4},`+
		`"format":"debezium","sink":{"type":"file","file":{"dir":%q}}}`, swStream, benchSourceID, swDB, b.first, sinkDir)
	stage := fmt.Sprintf(`{"expect":"Running","source":%q,"task":%q}`, benchSourceID, swStream)

	var prof *profiler
	if p := os.Getenv(profileEnv); p != "" {
		prof = startProfiler(ctx, w, p, fmt.Sprintf("sw-stream-%d", round))
	}
	cpu0, err := procCPU(w.pidString())
	if err != nil {
		t.Fatal(err)
	}
	traced := make(chan struct{})
	if path := os.Getenv(swTraceEnv); path != "" {
		go func() {
			defer close(traced)
			code, body, err := httpGet(ctx, w.url(fmt.Sprintf("/debug/pprof/trace?seconds=%d", swTraceSeconds)))
			if err == nil && code == 200 {
				err = os.WriteFile(fmt.Sprintf("%s-%d.trace", path, round), body, 0o644)
			}
			if err != nil {
				t.Errorf("execution trace of dm-worker: %v (%d)", err, code)
			}
		}()
	} else {
		close(traced)
	}
	began := time.Now()
	m.put(t, m.keys.StreamConfig(benchSourceID, swStream), cfg, m.keys.StreamStage(benchSourceID, swStream), stage)
	want := b.end.String()
	var (
		doc              streamDoc
		elapsed, durable time.Duration
	)
	testutil.Eventually(t, swTimeout, fmt.Sprintf("stream %s's checkpoint reaches the backlog end %s", swStream, want), func() error {
		if elapsed == 0 && swLastLineIs(t, sinkDir, b.lastEvent) {
			elapsed = time.Since(began)
		}
		d, err := w.stream(ctx, swStream)
		if err != nil {
			return err
		}
		doc = d
		if d.Checkpoint != want {
			return fmt.Errorf("stream %+v", d)
		}
		return nil
	})
	durable = time.Since(began)
	if elapsed == 0 {
		elapsed = durable
	}
	<-traced
	cpu1, err := procCPU(w.pidString())
	if err != nil {
		t.Fatal(err)
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
		t.Logf("round %d, stream: %d CPU profiles of dm-worker; read them with: go tool pprof -top %s", round, len(files), strings.Join(files, " "))
	}
	w.stop(t)
	// The sink fsyncs before the checkpoint moves: every line is there, exactly once (a run
	// without a restart delivers nothing twice).
	lines, size := countSinkLines(t, sinkDir, swStream)
	if want := b.rows + b.ddls; lines != want {
		t.Fatalf("round %d: the file sink holds %d lines, want %d (%d row changes, %d DDLs); status %+v", round, lines, want, b.rows, b.ddls, doc)
	}
	removeAll(t, dir)
	res := swRun{elapsed: elapsed, durable: durable, cpu: cpu1 - cpu0, peakRSS: hwm * 1024, lines: lines, sinkMB: mb(size)}
	t.Logf("round %d, stream: %v until the files hold every event (%.0f events/s), %v until the checkpoint is the end; %d jsonl lines (%.1f MB), worker CPU %v (%.2f µs/event), peak RSS %.1f MiB",
		round, elapsed.Round(time.Millisecond), float64(lines)/elapsed.Seconds(), durable.Round(time.Millisecond), lines, mb(size),
		res.cpu.Round(time.Millisecond), swMicros(res.cpu, lines), mib(res.peakRSS))
	return res
}
