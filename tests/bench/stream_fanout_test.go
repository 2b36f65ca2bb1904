//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// Parameters of the many-streams benchmark (issue 27).
const (
	foRowsEnv   = "BENCH_FANOUT_ROWS"   // row changes of the backlog: half inserted, half updated (default 20000)
	foRoundsEnv = "BENCH_FANOUT_ROUNDS" // rounds of each setting, shared and independent alternating (default 3)
	foCountsEnv = "BENCH_FANOUT_COUNTS" // comma-separated stream counts (default "1,4,16")
	// foIndependentEnv is the worker's bench-only switch back to one reader per stream
	// (worker/stream_runtime.go independentEnv).
	foIndependentEnv = "DM_WORKER_BENCH_STREAM_INDEPENDENT"
	foSchema         = "fo"
	foChunk          = 5000 // rows of one INSERT ... SELECT or UPDATE
	foTimeout        = 10 * time.Minute
)

// foRun is one timed catch-up of n streams.
type foRun struct {
	elapsed  time.Duration
	cpu      time.Duration // the worker's CPU time from the streams' creation to the last one's end
	peakRSS  int64         // bytes, VmHWM
	events   int64         // events the streams' sinks acknowledged, summed
	detaches int64         // streams detached from the shared reader
	shared   int64         // streams reading through the shared reader at the end
}

// foBacklog is the source with its backlog of bulk row changes.
type foBacklog struct {
	src        *mariadbtest.Instance
	start, end binlog.Location
	changes    int64
	bytes      int64
}

// TestStreamFanout runs 1, 4 and 16 file-sink streams of one source, all selecting the same
// table, through a real dm-worker process from their etcd keys, over a backlog of bulk row
// changes (INSERT ... SELECT and UPDATE of foChunk rows each), with relay off and on, each
// setting BENCH_FANOUT_ROUNDS times with the shared reader (the default) and with one reader
// per stream (the bench-only DM_WORKER_BENCH_STREAM_INDEPENDENT=1), alternating. The clock and
// the worker's CPU time run from the streams' creation until every stream's checkpoint is the
// backlog end and its sink holds a line per change; with relay on, the relay has pulled the
// backlog before. With BENCH_PROFILE_DIR set, CPU profiles of the worker are fetched meanwhile. It records, per setting, the medians of CPU-s per delivered event and of
// wall time, and their ratios; the target: 16 streams shared use at most half the CPU per
// event of 16 independent ones, and one shared stream is no slower than one independent.
func TestStreamFanout(t *testing.T) {
	rows := envInt(t, foRowsEnv, 20000)
	rounds := int(envInt(t, foRoundsEnv, 3))
	counts := []int{1, 4, 16}
	if s := os.Getenv(foCountsEnv); s != "" {
		counts = nil
		for _, f := range strings.Split(s, ",") {
			var n int
			if _, err := fmt.Sscan(f, &n); err != nil || n <= 0 {
				t.Fatalf("%s=%q: %q is not a stream count", foCountsEnv, s, f)
			}
			counts = append(counts, n)
		}
	}
	bin := buildBinaries(t)
	b := newFoBacklog(t, rows)
	work := t.TempDir()
	seq := 0
	for _, relay := range []bool{false, true} {
		for _, n := range counts {
			var shared, indep []foRun
			for round := range rounds {
				for k := range 2 {
					independent := (round+k)%2 == 1
					seq++
					r := b.run(t, bin, filepath.Join(work, fmt.Sprint(seq)), fmt.Sprintf("/bench-fo-%d", seq), n, relay, independent)
					if independent {
						indep = append(indep, r)
					} else {
						shared = append(shared, r)
					}
				}
			}
			b.report(t, n, relay, shared, indep)
		}
	}
}

// newFoBacklog starts a source and writes the backlog: rows/2 rows inserted with INSERT ...
// SELECT of foChunk rows, then the same rows updated foChunk at a time.
func newFoBacklog(t *testing.T, rows int64) *foBacklog {
	t.Helper()
	ctx := t.Context()
	src := startSource(t, "fo-src", 0)
	db := src.DB(t)
	conn := pinnedConn(t, db)
	defer conn.Close()
	execAll(t, ctx, conn,
		"CREATE DATABASE "+foSchema,
		"CREATE TABLE fo.t (id BIGINT PRIMARY KEY, a INT NOT NULL, s VARCHAR(255) NOT NULL)",
		"CREATE TABLE fo.seq (n INT PRIMARY KEY)",
		fmt.Sprintf("INSERT INTO fo.seq SELECT seq FROM fo.seq_0_to_%d", foChunk-1))
	file, pos, _ := src.MasterStatus(t)
	b := &foBacklog{src: src, start: binlog.Location{Name: file, Pos: pos}}
	began := time.Now()
	inserts := rows / 2
	for done := int64(0); done < inserts; done += foChunk {
		execAll(t, ctx, conn, fmt.Sprintf("INSERT INTO fo.t SELECT %d + n, n, REPEAT('x', 200) FROM fo.seq WHERE n < %d",
			done, min(foChunk, inserts-done)))
	}
	for done := int64(0); done < rows-inserts; done += foChunk {
		execAll(t, ctx, conn, fmt.Sprintf("UPDATE fo.t SET a = a + 1 WHERE id >= %d AND id < %d", done, done+min(foChunk, rows-inserts-done)))
	}
	b.changes = rows
	b.end = quietEnd(t, src)
	b.bytes = backlogBytes(binaryLogs(t, db), b.start, b.end)
	t.Logf("backlog: %d row changes, %.1f MB of binlog from %s to %s, written in %v", rows, mb(b.bytes), b.start, b.end, since(began))
	return b
}

// foStatus is the part of GET /api/v1/status the benchmark reads.
type foStatus struct {
	Relay struct {
		Stage  string `json:"stage"`
		Binlog string `json:"relay-binlog"`
	} `json:"relay"`
	Streams []struct {
		Name       string `json:"name"`
		Checkpoint string `json:"checkpoint"`
		Events     int64  `json:"events"`
	} `json:"streams"`
}

func (w *workerProc) foStatus(ctx context.Context) (foStatus, error) {
	var st foStatus
	code, body, err := httpGet(ctx, w.url("/api/v1/status"))
	if err != nil {
		return st, err
	}
	if code != http.StatusOK {
		return st, fmt.Errorf("GET /api/v1/status: %d %s", code, clip(string(body)))
	}
	return st, json.Unmarshal(body, &st)
}

// run catches the backlog up with n streams on a fresh worker (relay on or off; independent:
// one reader per stream) and measures it.
func (b *foBacklog) run(t *testing.T, bin binaries, dir, prefix string, n int, relay, independent bool) foRun {
	t.Helper()
	ctx := t.Context()
	if independent {
		if err := os.Setenv(foIndependentEnv, "1"); err != nil {
			t.Fatal(err)
		}
	}
	m, w := startIdleWorker(t, bin, dir, prefix)
	if err := os.Unsetenv(foIndependentEnv); err != nil {
		t.Fatal(err)
	}
	m.bindSource(t, w, b.src, relay)
	if relay {
		want := b.end.String()
		testutil.Eventually(t, foTimeout, "the relay pulls the backlog up to "+want, func() error {
			st, err := w.foStatus(ctx)
			if err != nil {
				return err
			}
			if st.Relay.Binlog != want {
				return fmt.Errorf("relay %+v", st.Relay)
			}
			return nil
		})
	}
	kvs := make([]string, 0, 4*n)
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("fo-%02d", i)
		cfg := fmt.Sprintf(`{"name":%q,"source-id":%q,"block-allow-list":{"do-dbs":[%q]},"start":{"binlog-name":%q,"binlog-pos":%d},`+
			`"format":"debezium","sink":{"type":"file","file":{"dir":%q}}}`,
			names[i], benchSourceID, foSchema, b.start.Name, b.start.Pos, filepath.Join(dir, "sink"))
		kvs = append(kvs, m.keys.StreamConfig(benchSourceID, names[i]), cfg,
			m.keys.StreamStage(benchSourceID, names[i]), fmt.Sprintf(`{"expect":"Running","source":%q,"task":%q}`, benchSourceID, names[i]))
	}
	var prof *profiler
	if p := os.Getenv(profileEnv); p != "" {
		prof = startProfiler(ctx, w, p, fmt.Sprintf("fanout-%d-relay-%v-indep-%v-%s", n, relay, independent, filepath.Base(dir)))
	}
	cpu0, err := procCPU(w.pidString())
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	m.put(t, kvs...)
	want := b.end.String()
	var events int64
	testutil.Eventually(t, foTimeout, fmt.Sprintf("%d streams reach the backlog end %s", n, want), func() error {
		st, err := w.foStatus(ctx)
		if err != nil {
			return err
		}
		events = 0
		done := 0
		for _, s := range st.Streams {
			if s.Checkpoint == want {
				done++
			}
			events += s.Events
		}
		if done < n || events < int64(n)*b.changes {
			return fmt.Errorf("%d of %d streams at the end, %d events", done, n, events)
		}
		return nil
	})
	elapsed := time.Since(began)
	cpu1, err := procCPU(w.pidString())
	if err != nil {
		t.Fatal(err)
	}
	hwm, err := vmHWM(w.pidString())
	if err != nil {
		t.Fatal(err)
	}
	if prof != nil {
		files, err := prof.stop()
		if err != nil {
			t.Errorf("CPU profile of dm-worker: %v", err)
		}
		t.Logf("%d CPU profiles of dm-worker: go tool pprof -top %s", len(files), strings.Join(files, " "))
	}
	mode := "source"
	if relay {
		mode = "relay"
	}
	g := scrapeGauges(t, w, fmt.Sprintf(`dm_worker_stream_hub_moves_total{mode=%q,move="detach"}`, mode),
		fmt.Sprintf(`dm_worker_stream_hub_subscribers{mode=%q,read="shared"}`, mode))
	for _, name := range names {
		lines, _ := countSinkLines(t, filepath.Join(dir, "sink"), name)
		if lines != b.changes {
			t.Fatalf("stream %s's sink holds %d lines, the backlog has %d row changes", name, lines, b.changes)
		}
	}
	w.stop(t)
	removeAll(t, dir)
	r := foRun{elapsed: elapsed, cpu: cpu1 - cpu0, peakRSS: hwm * 1024, events: events, detaches: g[0], shared: g[1]}
	t.Logf("%d streams, relay %v, independent %v: %v, worker CPU %v (%.2f µs per event), peak RSS %.1f MiB, %d events, hub: %d detaches, %d shared at the end",
		n, relay, independent, elapsed.Round(time.Millisecond), r.cpu.Round(time.Millisecond), r.cpuPerEvent()*1e6,
		float64(r.peakRSS)/(1<<20), events, r.detaches, r.shared)
	if independent && r.shared != 0 {
		t.Fatalf("independent run: %d streams read through the shared reader", r.shared)
	}
	return r
}

// cpuPerEvent is the worker's CPU seconds per delivered event.
func (r foRun) cpuPerEvent() float64 { return r.cpu.Seconds() / float64(r.events) }

// report records one setting's medians.
func (b *foBacklog) report(t *testing.T, n int, relay bool, shared, indep []foRun) {
	t.Helper()
	byCPU := func(rs []foRun) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = r.cpuPerEvent()
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	took := func(r foRun) time.Duration { return r.elapsed }
	ws, wi := median(shared, took), median(indep, took)
	cs, ci := byCPU(shared), byCPU(indep)
	var peakS, peakI, detaches int64
	for _, r := range shared {
		peakS, detaches = max(peakS, r.peakRSS), detaches+r.detaches
	}
	for _, r := range indep {
		peakI = max(peakI, r.peakRSS)
	}
	cpuRatio := ratio(cs, ci)                                      // shared CPU per event / independent
	wallRatio := ratio(wi.elapsed.Seconds(), ws.elapsed.Seconds()) // > 1: shared is faster
	target := "-"
	switch n {
	case 16:
		target = verdict(1/cpuRatio, 2.0)
	case 1:
		target = verdict(wallRatio, 1.0)
	}
	record(t, fmt.Sprintf("stream-fanout-%d-relay-%v", n, relay),
		f("streams", n), f("relay", relay), f("row_changes", b.changes), f("binlog_MB", mb(b.bytes)), f("rounds", len(shared)),
		f("shared_cpu_us_per_event", cs*1e6), f("independent_cpu_us_per_event", ci*1e6), f("cpu_ratio_shared_vs_independent", cpuRatio),
		f("shared_s", ws.elapsed.Seconds()), f("independent_s", wi.elapsed.Seconds()), f("speedup_wall", wallRatio),
		f("target", target), f("shared_detaches", detaches),
		f("shared_peak_rss_MiB", float64(peakS)/(1<<20)), f("independent_peak_rss_MiB", float64(peakI)/(1<<20)))
}
