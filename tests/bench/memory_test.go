//go:build bench

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// Parameters and bounds of the memory benchmarks (issue #16, "memory bounds").
const (
	idleTasksEnv  = "BENCH_IDLE_TASKS"  // comma-separated subtask counts (default "200,1000")
	idleSettleEnv = "BENCH_IDLE_SETTLE" // seconds to let the worker settle before measuring (default 15)
	// idleHoldEnv: seconds to keep the subtasks idle after the measurement, sampling every
	// 30 s, to see whether an idle worker grows (default 0: no hold).
	idleHoldEnv = "BENCH_IDLE_HOLD"
	// idleWorkerLimit bounds the RSS of a worker with a bound source and no task.
	idleWorkerLimit = 64 << 20
	// idleTasksLimit bounds the RSS of a worker running 1,000 (or 200) idle subtasks.
	idleTasksLimit = 200 << 20
	// idleTasksTimeout bounds the wait until every idle subtask runs its sync unit.
	idleTasksTimeout = 10 * time.Minute
	// idlePoll is how often the status is polled while subtasks start: a status of 1,000
	// subtasks is ~400 KB of JSON, and polling it every 10 ms would load the worker.
	idlePoll = 250 * time.Millisecond
	// etcdTxnOps stays under etcd's default --max-txn-ops (128).
	etcdTxnOps = 100
)

// memSample is what a memory benchmark reads from a settled worker.
type memSample struct {
	rss, hwm   int64 // bytes, /proc/<pid>/status VmRSS and VmHWM
	anon, file int64 // bytes, RssAnon and RssFile: the heap, stacks and runtime vs the mapped binary and files
	heapInuse  int64 // bytes, go_memstats_heap_inuse_bytes of GET /metrics
	stacks     int64 // bytes, go_memstats_stack_inuse_bytes
	goroutines int64 // go_goroutines
}

// TestWorkerIdleMemory measures a real dm-worker process (embedded etcd) with one source bound
// and no task, relay off and relay on (a fresh worker each), after it settled for
// BENCH_IDLE_SETTLE seconds: its RSS must stay within idleWorkerLimit.
func TestWorkerIdleMemory(t *testing.T) {
	bin := buildBinaries(t)
	src := startSource(t, "idle-src", 0)
	settle := time.Duration(envInt(t, idleSettleEnv, 15)) * time.Second
	for _, relay := range []bool{false, true} {
		work := t.TempDir()
		m, w := startIdleWorker(t, bin, work, fmt.Sprintf("/bench-idle-relay-%v", relay))
		m.bindSource(t, w, src, relay)
		s := settleAndSample(t, w, settle, filepath.Join(work, fmt.Sprintf("idle-relay-%v", relay)))
		record(t, "worker-idle-memory", f("relay", relay), f("settle_s", settle.Seconds()),
			f("rss_MiB", mib(s.rss)), f("hwm_MiB", mib(s.hwm)), f("anon_MiB", mib(s.anon)), f("file_MiB", mib(s.file)),
			f("heap_inuse_MiB", mib(s.heapInuse)), f("stack_MiB", mib(s.stacks)), f("goroutines", s.goroutines),
			f("target_rss", rssVerdict(s.rss, idleWorkerLimit)))
		w.stop(t)
	}
}

// TestManyIdleSubtasksMemory runs, for each count N of BENCH_IDLE_TASKS, one fresh worker with
// one relay-enabled source and N incremental subtasks, each its own task name and its own
// (empty) database on the same source and target, written into etcd as a minimal master would.
// It times how long until every subtask shows stage Running and unit Sync in GET
// /api/v1/status, lets the worker settle, and checks its RSS against idleTasksLimit; the
// per-subtask cost is (RSS - RSS with no subtask) / N.
func TestManyIdleSubtasksMemory(t *testing.T) {
	counts := idleTaskCounts(t)
	most := counts[len(counts)-1]
	bin := buildBinaries(t)
	// Both servers keep MariaDB's default max_connections (151): the subtasks share the
	// worker's budget of target connections and read the binlog from the relay.
	src := startSource(t, "idle-src", 0)
	tgt := startTarget(t, "idle-tgt")
	db := src.DB(t)
	for i := range most {
		if _, err := db.ExecContext(t.Context(), "CREATE DATABASE IF NOT EXISTS "+idleDB(i)); err != nil {
			t.Fatalf("create %s on the source: %v", idleDB(i), err)
		}
	}
	start := quietEnd(t, src)
	settle := time.Duration(envInt(t, idleSettleEnv, 15)) * time.Second
	for _, n := range counts {
		work := t.TempDir()
		m, w := startIdleWorker(t, bin, work, fmt.Sprintf("/bench-idle-tasks-%d", n))
		m.bindSource(t, w, src, true)
		base := settleAndSample(t, w, settle, filepath.Join(work, fmt.Sprintf("base-%d", n)))
		m.putIdleSubtasks(t, n, start, tgt)
		ready := w.waitAllSyncing(t, n)
		s := settleAndSample(t, w, settle, filepath.Join(work, fmt.Sprintf("tasks-%d", n)))
		status := statusSize(t, w)
		per := float64(s.rss-base.rss) / float64(n)
		held := holdIdle(t, w, n)
		record(t, "idle-subtasks-memory", f("subtasks", n), f("all_running_s", ready.Seconds()),
			f("rss_MiB", mib(s.rss)), f("hwm_MiB", mib(s.hwm)), f("anon_MiB", mib(s.anon)), f("file_MiB", mib(s.file)),
			f("base_rss_MiB", mib(base.rss)),
			f("per_subtask_KiB", per/1024), f("heap_inuse_MiB", mib(s.heapInuse)),
			f("per_subtask_heap_KiB", float64(s.heapInuse-base.heapInuse)/float64(n)/1024),
			f("stack_MiB", mib(s.stacks)), f("goroutines", s.goroutines),
			f("per_subtask_goroutines", float64(s.goroutines-base.goroutines)/float64(n)),
			f("status_json_KiB", float64(status)/1024), f("target_rss", rssVerdict(s.rss, idleTasksLimit)), f("held_s", held.took.Seconds()),
			f("held_rss_MiB", mib(held.rss)), f("held_heap_inuse_MiB", mib(held.heapInuse)))
		w.stop(t)
	}
}

// heldSample is the last sample of holdIdle.
type heldSample struct {
	memSample
	took time.Duration
}

// holdIdle keeps the worker's n idle subtasks running for BENCH_IDLE_HOLD seconds, logging its
// memory every 30 s, and returns the last sample (zero when there is no hold).
func holdIdle(t *testing.T, w *workerProc, n int) heldSample {
	t.Helper()
	hold := time.Duration(envInt(t, idleHoldEnv, 1)) * time.Second
	if os.Getenv(idleHoldEnv) == "" {
		return heldSample{}
	}
	var last heldSample
	for began := time.Now(); time.Since(began) < hold; {
		step := min(30*time.Second, hold-time.Since(began))
		last = heldSample{settleAndSample(t, w, step, fmt.Sprintf("held-%d-%ds", n, int(time.Since(began).Seconds()+step.Seconds()))),
			time.Since(began)}
	}
	return last
}

// idleTaskCounts reads BENCH_IDLE_TASKS, ascending.
func idleTaskCounts(t *testing.T) []int {
	t.Helper()
	s := os.Getenv(idleTasksEnv)
	if s == "" {
		s = "200,1000"
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n <= 0 || (len(out) > 0 && n <= out[len(out)-1]) {
			t.Fatalf("%s=%q: want ascending positive integers separated by commas", idleTasksEnv, s)
		}
		out = append(out, n)
	}
	return out
}

// idleDB is the database (and, with "-", the task name) of idle subtask i.
func idleDB(i int) string { return fmt.Sprintf("idle_%04d", i) }

// miniMaster writes desired state into etcd with raw puts of minimal JSON values, as the
// smallest master would (DESIGN.md §3: omitted fields take defaults).
type miniMaster struct {
	cli  *clientv3.Client
	keys ha.Keys
}

// startIdleWorker starts a worker with embedded etcd under prefix and a client of that etcd.
func startIdleWorker(t *testing.T, bin binaries, work, prefix string) (*miniMaster, *workerProc) {
	t.Helper()
	endpoint := "http://" + testutil.FreeAddr(t)
	w := startEmbedWorker(t, bin, benchWorker, endpoint, prefix, filepath.Join(work, "data"))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client of %s: %v", endpoint, err)
	}
	t.Cleanup(func() {
		if err := cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("close etcd client: %v", err)
		}
	})
	return &miniMaster{cli: cli, keys: ha.Keys{Prefix: prefix}}, w
}

// put writes kvs (key, value, key, value, ...) in transactions of at most etcdTxnOps puts.
func (m *miniMaster) put(t *testing.T, kvs ...string) {
	t.Helper()
	for len(kvs) > 0 {
		n := min(len(kvs), 2*etcdTxnOps)
		ops := make([]clientv3.Op, 0, n/2)
		for i := 0; i < n; i += 2 {
			ops = append(ops, clientv3.OpPut(kvs[i], kvs[i+1]))
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		_, err := m.cli.Txn(ctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			t.Fatalf("etcd txn of %d puts from %s: %v", len(ops), kvs[0], err)
		}
		kvs = kvs[n:]
	}
}

// bindSource writes benchSourceID's config (with enable-relay and its relay stage when relay),
// binds it to w and waits until w reports it bound (and its relay Running).
func (m *miniMaster) bindSource(t *testing.T, w *workerProc, src *mariadbtest.Instance, relay bool) {
	t.Helper()
	cfg := fmt.Sprintf(`{"source-id":%q,"flavor":"mariadb","enable-relay":%v,"from":{"host":%q,"port":%d,"user":%q,"password":%q}}`,
		benchSourceID, relay, src.Host(), src.Port(), mariadbtest.SourceUser, mariadbtest.SourcePassword)
	kvs := []string{m.keys.SourceConfig(benchSourceID), cfg}
	if relay {
		kvs = append(kvs, m.keys.RelayStage(benchSourceID), `{"expect":"Running"}`)
	}
	m.put(t, append(kvs, m.keys.Bound(w.name), fmt.Sprintf(`{"source":%q}`, benchSourceID))...)
	testutil.Eventually(t, time.Minute, "dm-worker binds source "+benchSourceID, func() error {
		st, err := w.status(t.Context())
		switch {
		case err != nil:
			return err
		case st.Source != benchSourceID:
			return fmt.Errorf("bound source %q", st.Source)
		case relay && st.Relay.Stage != "Running":
			return fmt.Errorf("relay %+v", st.Relay)
		}
		return nil
	})
}

// putIdleSubtasks writes n incremental subtasks starting at start into tgt, task idle-NNNN
// replicating only database idle_NNNN, each with expected stage Running.
func (m *miniMaster) putIdleSubtasks(t *testing.T, n int, start binlog.Location, tgt *mariadbtest.Instance) {
	t.Helper()
	kvs := make([]string, 0, 4*n)
	for i := range n {
		db := idleDB(i)
		task := strings.ReplaceAll(db, "_", "-")
		cfg := fmt.Sprintf(`{"name":%q,"source-id":%q,"task-mode":"incremental","meta":{"binlog-name":%q,"binlog-pos":%d},`+
			`"target-database":{"host":%q,"port":%d,"user":%q},"block-allow-list":{"do-dbs":[%q]}}`,
			task, benchSourceID, start.Name, start.Pos, tgt.Host(), tgt.Port(), mariadbtest.RootUser, db)
		kvs = append(kvs, m.keys.SubTaskConfig(benchSourceID, task), cfg,
			m.keys.SubTaskStage(benchSourceID, task), `{"expect":"Running"}`)
	}
	m.put(t, kvs...)
}

// idleStatus is the part of GET /api/v1/status the memory benchmarks read.
type idleStatus struct {
	Source string `json:"source"`
	Relay  struct {
		Stage string `json:"stage"`
	} `json:"relay"`
	SubTasks []struct {
		Name   string            `json:"name"`
		Stage  string            `json:"stage"`
		Unit   string            `json:"unit"`
		Errors []json.RawMessage `json:"errors"`
		// Progress.Binlog is set once the sync unit's run has opened its binlog stream and
		// started its apply workers (before that, while the precheck runs, stage and unit are
		// already Running and Sync).
		Progress struct {
			Binlog string `json:"binlog"`
		} `json:"progress"`
	} `json:"subtasks"`
	Errors []json.RawMessage `json:"errors"`
}

// status reads the worker's status.
func (w *workerProc) status(ctx context.Context) (idleStatus, error) {
	var st idleStatus
	code, body, err := httpGet(ctx, w.url("/api/v1/status"))
	if err != nil {
		return st, err
	}
	if code != http.StatusOK {
		return st, fmt.Errorf("GET /api/v1/status: %d %s", code, clip(string(body)))
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("GET /api/v1/status: %w\n%s", err, clip(string(body)))
	}
	return st, nil
}

// waitAllSyncing polls the status every idlePoll until n subtasks run their sync unit (stage
// Running, unit Sync, a binlog location in progress), and returns how long that took.
func (w *workerProc) waitAllSyncing(t *testing.T, n int) time.Duration {
	t.Helper()
	began := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), idleTasksTimeout)
	defer cancel()
	tick := time.NewTicker(idlePoll)
	defer tick.Stop()
	for logged := began; ; {
		err := w.countSyncing(ctx, n)
		if err == nil {
			return time.Since(began)
		}
		if time.Since(logged) >= 10*time.Second {
			t.Logf("after %v: %v", time.Since(began).Round(time.Second), err)
			logged = time.Now()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("not within %s: %d subtasks Running in unit Sync: %v", idleTasksTimeout, n, err)
		}
	}
}

// countSyncing returns nil when n subtasks run their sync unit, else what it saw.
func (w *workerProc) countSyncing(ctx context.Context, n int) error {
	st, err := w.status(ctx)
	if err != nil {
		return err
	}
	syncing, stages := 0, map[string]int{}
	var firstErr json.RawMessage
	for _, s := range st.SubTasks {
		reading := s.Progress.Binlog != ""
		stages[fmt.Sprintf("%s/%s/reading=%v", s.Stage, s.Unit, reading)]++
		if s.Stage == "Running" && s.Unit == "Sync" && reading {
			syncing++
		}
		if len(s.Errors) > 0 && firstErr == nil {
			firstErr = s.Errors[0]
		}
	}
	if syncing == n {
		return nil
	}
	return fmt.Errorf("%d of %d syncing; stages %v; first subtask error %s; %d worker errors",
		syncing, n, stages, firstErr, len(st.Errors))
}

// settleAndSample waits settle, then reads the worker's memory; with BENCH_PROFILE_DIR set it
// also saves a heap profile and a goroutine dump named after label there.
func settleAndSample(t *testing.T, w *workerProc, settle time.Duration, label string) memSample {
	t.Helper()
	select {
	case <-time.After(settle):
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
	var s memSample
	var err error
	if s.rss, err = testutil.ProcStatusBytes(w.pidString(), "VmRSS"); err != nil {
		t.Fatalf("RSS of dm-worker: %v", err)
	}
	if s.hwm, err = testutil.ProcStatusBytes(w.pidString(), "VmHWM"); err != nil {
		t.Fatalf("peak RSS of dm-worker: %v", err)
	}
	if s.anon, err = testutil.ProcStatusBytes(w.pidString(), "RssAnon"); err != nil {
		t.Fatalf("anonymous RSS of dm-worker: %v", err)
	}
	if s.file, err = testutil.ProcStatusBytes(w.pidString(), "RssFile"); err != nil {
		t.Fatalf("file-backed RSS of dm-worker: %v", err)
	}
	gauges := scrapeGauges(t, w, "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_goroutines")
	s.heapInuse, s.stacks, s.goroutines = gauges[0], gauges[1], gauges[2]
	if dir := os.Getenv(profileEnv); dir != "" {
		saveProfile(t, w, "/debug/pprof/heap?gc=1", filepath.Join(dir, filepath.Base(label)+".heap.pprof"))
		saveProfile(t, w, "/debug/pprof/goroutine?debug=1", filepath.Join(dir, filepath.Base(label)+".goroutines.txt"))
	}
	t.Logf("%s: RSS %.1f MiB (anon %.1f, file %.1f), peak %.1f MiB, heap in use %.1f MiB, stacks %.1f MiB, %d goroutines",
		filepath.Base(label), mib(s.rss), mib(s.anon), mib(s.file), mib(s.hwm), mib(s.heapInuse), mib(s.stacks), s.goroutines)
	return s
}

// scrapeGauges reads unlabelled gauges from the worker's GET /metrics, in the order asked.
func scrapeGauges(t *testing.T, w *workerProc, names ...string) []int64 {
	t.Helper()
	code, body, err := httpGet(t.Context(), w.url("/metrics"))
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	found := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			found[name] = int64(v)
		}
	}
	out := make([]int64, len(names))
	for i, n := range names {
		v, ok := found[n]
		if !ok {
			t.Fatalf("GET /metrics has no gauge %s", n)
		}
		out[i] = v
	}
	return out
}

// saveProfile writes the body of GET path of the worker to file.
func saveProfile(t *testing.T, w *workerProc, path, file string) {
	t.Helper()
	code, body, err := httpGet(t.Context(), w.url(path))
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET %s: %d %v", path, code, err)
	}
	writeText(t, file, string(body))
	t.Logf("saved %s of dm-worker to %s", path, file)
}

// statusSize is the size in bytes of the worker's GET /api/v1/status body.
func statusSize(t *testing.T, w *workerProc) int {
	t.Helper()
	code, body, err := httpGet(t.Context(), w.url("/api/v1/status"))
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /api/v1/status: %d %v", code, err)
	}
	return len(body)
}

// mib is bytes in MiB.
func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }
