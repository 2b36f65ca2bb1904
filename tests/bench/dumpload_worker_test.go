//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// fullTask is the name of the full-data benchmark's task.
const fullTask = "bench-full"

// subtaskDoc is the part of GET /api/v1/subtasks/{task} the full-data benchmark reads.
type subtaskDoc struct {
	Stage  string `json:"stage"`
	Unit   string `json:"unit"`
	Errors []struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Resumable bool   `json:"resumable"`
	} `json:"errors"`
	Progress json.RawMessage `json:"progress"`
}

// subtask reads one subtask's status from the worker; found is false while it does not exist.
func (w *workerProc) subtask(ctx context.Context, task string) (d subtaskDoc, found bool, err error) {
	code, body, err := httpGet(ctx, w.url("/api/v1/subtasks/"+task))
	switch {
	case err != nil:
		return d, false, err
	case code == http.StatusNotFound:
		return d, false, nil
	case code != http.StatusOK:
		return d, false, fmt.Errorf("GET /api/v1/subtasks/%s: %d %s", task, code, body)
	}
	if err := json.Unmarshal(body, &d); err != nil {
		return d, false, fmt.Errorf("GET /api/v1/subtasks/%s: %w\n%s", task, err, body)
	}
	return d, true, nil
}

// taskError is the first error the worker's GET /api/v1/status lists for task that is not
// resumable (such as a subtask config the worker refuses), "" when there is none.
func (w *workerProc) taskError(ctx context.Context, task string) string {
	code, body, err := httpGet(ctx, w.url("/api/v1/status"))
	if err != nil || code != http.StatusOK {
		return ""
	}
	var st struct {
		Errors []struct {
			Task      string `json:"task"`
			Code      string `json:"code"`
			Message   string `json:"message"`
			Resumable bool   `json:"resumable"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &st) != nil {
		return ""
	}
	for _, e := range st.Errors {
		if e.Task == task && !e.Resumable {
			return e.Code + ": " + e.Message
		}
	}
	return ""
}

// runWorker copies sbtest with a full-mode task run by a fresh dm-worker process with embedded
// etcd into a fresh target, driven as an outside check drives it: through etcd keys holding
// minimal JSON (fullPutSource, fullPutTask), every other field at its default. The clock runs
// from the put of the task's config and stage until the subtask is Finished and the target's
// content is verified. The worker's CPU time comes from /proc/<pid>/stat and its peak RSS
// (VmHWM) from /proc/<pid>/status, read before it is stopped; VmHWM is also read when the
// subtask's unit moves from Dump to Load.
func (s *fullSource) runWorker(t *testing.T, bin binaries, round int, work string) fullRun {
	t.Helper()
	ctx := t.Context()
	tgt := startFullTarget(t, "dm", round)
	dir := legDir(t, work, "dm", round)
	c := dmctlCluster{bin: bin, endpoints: "http://" + testutil.FreeAddr(t), prefix: "/bench-full"}
	w := startEmbedWorker(t, bin, benchWorker, c.endpoints, c.prefix, filepath.Join(dir, "data"))
	c.waitWorkerAlive(t, benchWorker)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.endpoints}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	defer func() { _ = cli.Close() }() // the test is over with it
	keys := ha.Keys{Prefix: c.prefix}
	fullPut(t, cli, fullSourceOps(t, keys, s.inst)...)
	testutil.Eventually(t, 30*time.Second, "dm-worker binds source "+benchSourceID, func() error {
		src, err := w.boundSource(ctx)
		if err == nil && src != benchSourceID {
			err = fmt.Errorf("bound source %q", src)
		}
		return err
	})

	var prof *profiler
	if p := os.Getenv(profileEnv); p != "" {
		prof = startProfiler(ctx, w, p, fmt.Sprintf("full-%d", round))
	}
	cpu0, err := procCPU(w.pidString())
	if err != nil {
		t.Fatal(err)
	}
	meter := startCPUMeter(t, s.inst, tgt.inst)
	began := time.Now()
	fullPut(t, cli, fullTaskOps(t, keys, tgt.inst)...)
	ph := w.waitFinished(t, fullTask, began)
	done := time.Since(began)
	srcCPU, tgtCPU := meter.stop(t)
	cpu1, err := procCPU(w.pidString())
	if err != nil {
		t.Fatal(err)
	}
	s.verify(t, tgt, "dm-worker full task")
	elapsed := time.Since(began)
	hwm, err := vmHWM(w.pidString())
	if err != nil {
		t.Fatalf("peak RSS of dm-worker: %v", err)
	}
	if prof != nil {
		files, err := prof.stop()
		if err != nil {
			t.Errorf("CPU profile of dm-worker: %v", err)
		}
		t.Logf("round %d, dm-worker: %d CPU profiles; read them with: go tool pprof -top %s", round, len(files), strings.Join(files, " "))
	}
	w.stop(t)
	r := fullRun{elapsed: elapsed, done: done, dump: ph.loadAt, load: done - ph.loadAt, cpu: cpu1 - cpu0,
		peakRSS: hwm * 1024, srcCPU: srcCPU, tgtCPU: tgtCPU}
	t.Logf("round %d, dm-worker full task: %v (Finished at %v; unit Load from %v), %.0f rows/s; CPU worker %v, "+
		"source %v, target %v; peak RSS %.1f MiB (%.1f MiB when Load began); last progress %s", round,
		elapsed.Round(time.Millisecond), done.Round(time.Millisecond), ph.loadAt.Round(time.Millisecond),
		r.rowsPerSec(s.rows), r.cpu, srcCPU, tgtCPU, float64(r.peakRSS)/(1<<20), float64(ph.hwmAtLoad)/(1<<10),
		ph.lastProgress)
	removeAll(t, dir)
	tgt.kill(t)
	return r
}

// fullJSON encodes v for an etcd value.
func fullJSON(t *testing.T, v any) string {
	t.Helper()
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// fullSourceOps are the source's config and the worker's bound, as minimal JSON: the source id
// and how to reach it (flavor detected, relay off: the defaults).
func fullSourceOps(t *testing.T, keys ha.Keys, src *mariadbtest.Instance) []clientv3.Op {
	t.Helper()
	type m = map[string]any
	return []clientv3.Op{
		clientv3.OpPut(keys.SourceConfig(benchSourceID), fullJSON(t, m{"source-id": benchSourceID,
			"from": m{"host": src.Host(), "port": src.Port(), "user": mariadbtest.SourceUser, "password": mariadbtest.SourcePassword}})),
		clientv3.OpPut(keys.Bound(benchWorker), fullJSON(t, m{"source": benchSourceID, "worker": benchWorker})),
	}
}

// fullTaskOps are the benchmark's subtask config and stage, as minimal JSON: only the fields
// without a default (name, source, task-mode full, the target), so that mydumper threads
// (4), rows (10000), loader pool-size (16) and the block-allow list (every schema but the
// server's own: here sbtest only) are the defaults a minimal task gets.
func fullTaskOps(t *testing.T, keys ha.Keys, tgt *mariadbtest.Instance) []clientv3.Op {
	t.Helper()
	type m = map[string]any
	return []clientv3.Op{
		clientv3.OpPut(keys.SubTaskConfig(benchSourceID, fullTask), fullJSON(t, m{"name": fullTask, "source-id": benchSourceID,
			"task-mode": "full", "target-database": m{"host": tgt.Host(), "port": tgt.Port(), "user": mariadbtest.RootUser}})),
		clientv3.OpPut(keys.SubTaskStage(benchSourceID, fullTask), fullJSON(t, m{"expect": "Running", "source": benchSourceID, "task": fullTask})),
	}
}

// fullPut writes ops in one etcd transaction.
func fullPut(t *testing.T, cli *clientv3.Client, ops ...clientv3.Op) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatalf("etcd put of %d keys: %v", len(ops), err)
	}
}

// taskPhases is what waitFinished saw of a subtask's run.
type taskPhases struct {
	loadAt       time.Duration // since the start, when the unit was first seen as Load (0: never)
	hwmAtLoad    int64         // the worker's VmHWM in kB then
	lastProgress string        // the last progress object seen
}

// waitFinished polls the subtask every 10 ms until its stage is Finished, failing the test when
// it pauses with an error that is not resumable, or after fullTimeout.
func (w *workerProc) waitFinished(t *testing.T, task string, began time.Time) taskPhases {
	t.Helper()
	var ph taskPhases
	testutil.Eventually(t, fullTimeout, "subtask "+task+" is Finished", func() error {
		d, found, err := w.subtask(t.Context(), task)
		if err != nil || !found {
			if terr := w.taskError(t.Context(), task); terr != "" {
				t.Fatalf("dm-worker refused task %s: %s", task, terr)
			}
			return fmt.Errorf("subtask %s not there yet (%v)", task, err)
		}
		if len(d.Progress) > 0 {
			ph.lastProgress = string(d.Progress)
		}
		if d.Unit == "Load" && ph.loadAt == 0 {
			ph.loadAt = time.Since(began)
			ph.hwmAtLoad, _ = vmHWM(w.pidString())
			t.Logf("subtask %s: unit Load at %v", task, ph.loadAt.Round(time.Millisecond))
		}
		if d.Stage == "Finished" {
			return nil
		}
		for _, e := range d.Errors {
			if !e.Resumable && d.Stage == "Paused" {
				t.Fatalf("subtask %s paused with an error that is not resumable: %s: %s", task, e.Code, e.Message)
			}
		}
		return fmt.Errorf("stage %s, unit %s, errors %+v, progress %s", d.Stage, d.Unit, d.Errors, d.Progress)
	})
	return ph
}

// startEmbedWorker starts dm-worker name with an embedded etcd listening on endpoint (its data
// under dataDir), like startWorker does for an external etcd.
func startEmbedWorker(t *testing.T, bin binaries, name, endpoint, prefix, dataDir string) *workerProc {
	t.Helper()
	return startWorker(t, bin, name, endpoint, prefix, dataDir, "--embed-etcd")
}
