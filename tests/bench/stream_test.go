//go:build bench

package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// Parameters of the stream benchmark; the backlog's size and the sync unit's settings are the
// sync benchmark's (BENCH_SYNC_ROWS, BENCH_SYNC_WORKERS, BENCH_SYNC_BATCH).
const (
	streamRoundsEnv = "BENCH_STREAM_ROUNDS" // rounds of the three readers, the first rotating (default 3)
	// streamTimeout bounds one stream catch-up.
	streamTimeout = 20 * time.Minute
	// streamRSSLimit is the peak RSS target for the worker running the stream, in bytes.
	streamRSSLimit = 256 << 20
	benchStream    = "bench"
	benchSourceID  = "bench-src"
	benchWorker    = "bench-w"
)

// streamRun is one timed catch-up by one of the stream benchmark's readers.
type streamRun struct {
	elapsed time.Duration
	cpu     time.Duration
	peakRSS int64 // bytes
	// rows is what the reader's output holds: jsonl lines of the file sink, row images
	// (### INSERT/UPDATE/DELETE) of mariadb-binlog's text.
	rows int64
	// events is the stream's "events" counter at the end (stream only).
	events int64
	// outBytes is the size of the reader's output.
	outBytes int64
	// sourceCPU is the CPU time the source's mariadbd used meanwhile (stream and sync: the
	// binlog dump thread; mariadb-binlog reads the files itself).
	sourceCPU time.Duration
}

// TestStreamCatchUp writes the sync benchmark's backlog (BENCH_SYNC_ROWS row changes) and reads
// all of it, BENCH_STREAM_ROUNDS times each, the first one rotating, with
//   - a stream task (file sink, debezium format, from the backlog start, straight from the
//     source) run by a real dm-worker process from its etcd keys: the clock starts at
//     `dmctl stream create` and stops when the stream's checkpoint is the source's SHOW MASTER
//     STATUS end and the sink's jsonl files hold at least one line per row change;
//   - `mariadb-binlog --verbose --base64-output=decode-rows` decoding the same binlog files to a
//     text file, timed from start to exit, whose row images must number the row changes;
//   - the sync unit, exactly as TestSyncCatchUp runs it (syncBacklog.runDM).
//
// It reports the medians: the stream's events/s against mariadb-binlog's and the sync unit's
// rows/s, and the worker's peak RSS (VmHWM). With BENCH_PROFILE_DIR set, CPU profiles of the
// worker are fetched from its /debug/pprof/profile during each stream run.
func TestStreamCatchUp(t *testing.T) {
	rows := envInt(t, syncRowsEnv, 1_000_000)
	workers, batch := envInt(t, syncWorkersEnv, 16), envInt(t, syncBatchEnv, 100)
	rounds := int(envInt(t, streamRoundsEnv, 3))
	prog := mariadbtest.Program(t, "mariadb-binlog")
	bin := buildBinaries(t)
	etcd := etcdtest.Start(t)
	b := newSyncBacklog(t, rows)
	files := backlogFiles(t, b)
	work := t.TempDir()

	runStream := func(round int) streamRun {
		return b.runStream(t, bin, dmctlCluster{bin: bin, endpoints: strings.Join(etcd.Endpoints(), ","),
			prefix: fmt.Sprintf("/bench-stream-%d", round)}, round, work)
	}
	runDecode := func(round int) streamRun {
		out := filepath.Join(work, fmt.Sprintf("decode-%d.txt", round))
		args := append([]string{"--no-defaults", "--verbose", "--base64-output=decode-rows",
			fmt.Sprintf("--start-position=%d", b.start.Pos), "--result-file=" + out}, files...)
		run := runTool(t, t.Context(), prog, args)
		images, size := countRowImages(t, out)
		removeAll(t, out)
		if images != b.committed {
			t.Fatalf("round %d: mariadb-binlog's text holds %d row images, the backlog has %d row changes", round, images, b.committed)
		}
		res := streamRun{elapsed: run.elapsed, cpu: run.usage.CPU, peakRSS: run.usage.PeakRSS, rows: images, outBytes: size}
		t.Logf("round %d, mariadb-binlog decode: %v, %.0f rows/s, %.1f MB of text, CPU %v, peak RSS %.1f MB", round,
			run.elapsed.Round(time.Millisecond), float64(b.committed)/run.elapsed.Seconds(), mb(size),
			run.usage.CPU.Round(time.Millisecond), mb(run.usage.PeakRSS))
		return res
	}
	runSync := func(round int) streamRun {
		c := b.runDM(t, round, workers, batch, work)
		return streamRun{elapsed: c.elapsed, cpu: c.child.CPU, peakRSS: c.child.PeakRSS, rows: b.committed, sourceCPU: c.sourceCPU}
	}
	readers := []func(round int) streamRun{runStream, runDecode, runSync}
	runs := make([][]streamRun, len(readers))
	for round := range rounds {
		for k := range readers {
			i := (round + k) % len(readers)
			runs[i] = append(runs[i], readers[i](round))
		}
	}
	took := func(r streamRun) time.Duration { return r.elapsed }
	st, dec, syn := median(runs[0], took), median(runs[1], took), median(runs[2], took)
	perSec := func(r streamRun) float64 { return float64(b.committed) / r.elapsed.Seconds() }
	var peak int64
	for _, r := range runs[0] {
		peak = max(peak, r.peakRSS)
	}
	rDecode, rSync := ratio(perSec(st), perSec(dec)), ratio(perSec(st), perSec(syn))
	rssVerdict := fmt.Sprintf("met(<=%dMiB)", streamRSSLimit>>20)
	if peak > streamRSSLimit {
		rssVerdict = fmt.Sprintf("MISSED(<=%dMiB)", streamRSSLimit>>20)
	}
	record(t, "stream-catch-up",
		f("row_changes", b.committed), f("binlog_MB", mb(b.bytes)), f("rounds", rounds),
		f("stream_events_per_s", perSec(st)), f("mariadb_binlog_decode_rows_per_s", perSec(dec)), f("dm_sync_rows_per_s", perSec(syn)),
		f("ratio_vs_decode", rDecode), f("target_vs_decode", verdict(rDecode, 1.0)),
		f("ratio_vs_sync", rSync), f("target_vs_sync", verdict(rSync, 1.5)),
		f("stream_peak_rss_MiB", float64(peak)/(1<<20)), f("target_rss", rssVerdict),
		f("stream_s", st.elapsed.Seconds()), f("decode_s", dec.elapsed.Seconds()), f("dm_s", syn.elapsed.Seconds()),
		f("stream_cpu_s", st.cpu.Seconds()), f("decode_cpu_s", dec.cpu.Seconds()), f("dm_cpu_s", syn.cpu.Seconds()),
		f("source_cpu_s_stream", st.sourceCPU.Seconds()), f("source_cpu_s_dm", syn.sourceCPU.Seconds()),
		f("stream_jsonl_lines", st.rows), f("stream_events", st.events), f("sink_MB", mb(st.outBytes)),
		f("decode_text_MB", mb(dec.outBytes)), f("decode_peak_rss_MiB", float64(dec.peakRSS)/(1<<20)),
		f("dm_peak_rss_MiB", float64(syn.peakRSS)/(1<<20)))
}

// backlogFiles are the paths of the source's binlog files from the backlog's first to its last.
func backlogFiles(t *testing.T, b *syncBacklog) []string {
	t.Helper()
	var out []string
	for _, f := range binaryLogs(t, b.src.DB(t)) {
		if f.name >= b.start.Name && f.name <= b.end.Name {
			out = append(out, filepath.Join(b.src.Dir(), f.name))
		}
	}
	return out
}

// runStream runs one stream catch-up through a fresh dm-worker process: the worker registers
// under c's prefix, the source is bound to it, and then the clock runs from `dmctl stream
// create` until the checkpoint is the backlog end and the sink holds a line per row change.
// The worker's CPU time is read from /proc/<pid>/stat and its peak RSS (VmHWM) from
// /proc/<pid>/status before it is stopped.
func (b *syncBacklog) runStream(t *testing.T, bin binaries, c dmctlCluster, round int, work string) streamRun {
	t.Helper()
	ctx := t.Context()
	dir := filepath.Join(work, fmt.Sprintf("stream-%d", round))
	sinkDir, dataDir := filepath.Join(dir, "sink"), filepath.Join(dir, "data")
	for _, d := range []string{sinkDir, dataDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w := startWorker(t, bin, benchWorker, c.endpoints, c.prefix, dataDir)
	c.waitWorkerAlive(t, benchWorker)
	c.createSource(t, ctx, w, dir, b.src)
	streamFile := filepath.Join(dir, "stream.yaml")
	writeText(t, streamFile, fmt.Sprintf("name: %s\nsource-id: %s\nblock-allow-list: {do-dbs: [%s]}\n"+
		"start: {binlog-name: %s, binlog-pos: %d}\nformat: debezium\nsink: {type: file, file: {dir: %q}}\n",
		benchStream, benchSourceID, sbSchema, b.start.Name, b.start.Pos, sinkDir))

	var prof *profiler
	if p := os.Getenv(profileEnv); p != "" {
		prof = startProfiler(ctx, w, p, fmt.Sprintf("stream-%d", round))
	}
	cpu0, err := procCPU(w.pidString())
	if err != nil {
		t.Fatal(err)
	}
	srcCPU0 := serverCPU(t, b.src)
	began := time.Now()
	c.run(t, "stream", "create", streamFile)
	want := b.end.String()
	var doc streamDoc
	testutil.Eventually(t, streamTimeout, fmt.Sprintf("stream %s's checkpoint reaches the backlog end %s", benchStream, want), func() error {
		d, err := w.stream(ctx, benchStream)
		if err != nil {
			return err
		}
		doc = d
		if d.Checkpoint != want {
			return fmt.Errorf("stream %+v", d)
		}
		return nil
	})
	elapsed := time.Since(began)
	// The sink fsyncs before the checkpoint moves, so the lines are normally all there now; if
	// not, the clock runs on until they are.
	lines, size := countSinkLines(t, sinkDir, benchStream)
	if lines < b.committed {
		testutil.Eventually(t, time.Minute, fmt.Sprintf("the file sink holds at least %d lines", b.committed), func() error {
			lines, size = countSinkLines(t, sinkDir, benchStream)
			if lines < b.committed {
				return fmt.Errorf("%d lines in %.1f MB", lines, mb(size))
			}
			return nil
		})
		elapsed = time.Since(began)
	}
	cpu1, err := procCPU(w.pidString())
	if err != nil {
		t.Fatal(err)
	}
	srcCPU := serverCPU(t, b.src) - srcCPU0
	hwm, err := vmHWM(w.pidString())
	if err != nil {
		t.Fatalf("peak RSS of dm-worker: %v", err)
	}
	final, err := w.stream(ctx, benchStream)
	if err != nil {
		t.Fatal(err)
	}
	if prof != nil {
		files, err := prof.stop()
		if err != nil {
			t.Errorf("CPU profile of dm-worker: %v", err)
		}
		t.Logf("round %d, stream: %d CPU profiles of dm-worker; read them with: go tool pprof -top %s", round, len(files), strings.Join(files, " "))
	}
	w.stop(t)
	removeAll(t, dir)
	res := streamRun{elapsed: elapsed, cpu: cpu1 - cpu0, peakRSS: hwm * 1024, rows: lines, events: final.Events, outBytes: size,
		sourceCPU: srcCPU}
	t.Logf("round %d, stream: %v, %.0f events/s, %d jsonl lines (%.1f MB), status events %d, worker CPU %v, source CPU %v, peak RSS %.1f MiB; status %+v",
		round, elapsed.Round(time.Millisecond), float64(b.committed)/elapsed.Seconds(), lines, mb(size), final.Events,
		res.cpu.Round(time.Millisecond), srcCPU, float64(res.peakRSS)/(1<<20), doc)
	return res
}

// sinkFileName matches the file sink's files of a stream: <stream>.NNNNNN.jsonl.
func sinkFileName(stream string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(stream) + `\.\d{6}\.jsonl$`)
}

// countSinkLines counts the lines (events) and bytes of stream's files in dir.
func countSinkLines(t *testing.T, dir, stream string) (lines, size int64) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	name := sinkFileName(stream)
	for _, e := range entries {
		if !name.MatchString(e.Name()) {
			continue
		}
		n, s := countLines(t, filepath.Join(dir, e.Name()), nil)
		lines, size = lines+n, size+s
	}
	return lines, size
}

// countLines counts the lines of the file at path that start with one of prefixes (every line
// when prefixes is empty), and its size.
func countLines(t *testing.T, path string, prefixes [][]byte) (lines, size int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	atStart := true // line begins a line of the file (a longer one comes in several pieces)
	for {
		line, err := r.ReadSlice('\n')
		size += int64(len(line))
		if atStart && len(line) > 0 {
			if len(prefixes) == 0 {
				lines++
			}
			for _, p := range prefixes {
				if bytes.HasPrefix(line, p) {
					lines++
					break
				}
			}
		}
		atStart = err != bufio.ErrBufferFull
		switch {
		case err == io.EOF:
			return lines, size
		case err != nil && err != bufio.ErrBufferFull:
			t.Fatalf("read %s: %v", path, err)
		}
	}
}

// rowImagePrefixes start the lines of mariadb-binlog --verbose that open one row change.
var rowImagePrefixes = [][]byte{[]byte("### INSERT INTO "), []byte("### UPDATE "), []byte("### DELETE FROM ")}

// countRowImages counts the row changes in mariadb-binlog's decoded text at path, and its size.
func countRowImages(t *testing.T, path string) (rows, size int64) {
	t.Helper()
	return countLines(t, path, rowImagePrefixes)
}

// writeText writes content to path.
func writeText(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
