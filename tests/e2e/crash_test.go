package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// Issue 6's acceptance: replication by the real binaries into a real
// MariaDB survives kill -9 of the worker (with and without relay), a crash
// of the target, and an operator's pause and resume, and ends with the
// target equal to the source, row by row.

// TestSyncSurvivesKill9 kills the worker with SIGKILL ten times at random
// moments while a workload runs, restarting it on the same data dir each
// time; the sync unit must resume from its checkpoint without losing or
// duplicating a change.
func TestSyncSurvivesKill9(t *testing.T) { testSyncSurvivesKill9(t, false) }

// TestSyncWithRelaySurvivesKill9 is TestSyncSurvivesKill9 with relay
// enabled: the kills also hit the relay writer, whose files and meta the
// restarted worker recovers before the sync unit reads them again.
func TestSyncWithRelaySurvivesKill9(t *testing.T) { testSyncSurvivesKill9(t, true) }

func testSyncSurvivesKill9(t *testing.T, relay bool) {
	r := startReplication(t, replOptions{relay: relay})
	wl := startWorkload(t, r.srcDB, 4)
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill moments: seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	const kills = 10
	hits := 0 // kills that hit a running sync unit
	for i := range kills {
		// The moment of the kill is random by design; until then, watch
		// the status so the log says what each kill hit.
		at := time.Now().Add(500*time.Millisecond + time.Duration(rng.Int64N(int64(2500*time.Millisecond))))
		var last subtaskDoc
		var lastRelay relayDoc
		for time.Now().Before(at) {
			if d, err := r.subtask(); err == nil {
				last = d
			}
			if relay {
				if d, err := r.relay(); err == nil {
					lastRelay = d
				}
			}
			time.Sleep(min(50*time.Millisecond, time.Until(at)))
		}
		r.killWorker()
		if last.syncing() && last.Progress.Binlog != "" {
			hits++
		}
		t.Logf("kill %d: subtask stage %q unit %q binlog %s checkpoint %s safe-mode %v errors %v; relay %+v; workload %s",
			i+1, last.Stage, last.Unit, last.Progress.Binlog, last.Progress.Checkpoint, last.Progress.SafeMode,
			last.Errors, lastRelay, wl)
		r.restartWorker()
	}
	// The last worker replicates the workload for a while unharmed.
	r.waitProgress(200)
	if err := wl.stop(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	t.Logf("workload stopped: %s", wl)
	// The kills must have hit replication at work, not only start-up.
	if hits < kills/2 {
		t.Errorf("only %d of %d kills hit a running sync unit; the test did not exercise crash recovery", hits, kills)
	}
	r.waitCaughtUp(60 * time.Second)
	d, err := r.subtask()
	if err != nil || !d.syncing() {
		t.Errorf("after catching up: subtask %v (%v), want Running in Sync without errors", d, err)
	}
	if relay {
		if rd, err := r.relay(); err != nil || rd.Stage != "Running" || len(rd.Errors) != 0 {
			t.Errorf("after catching up: relay %+v (%v), want Running without errors", rd, err)
		}
	}
}

// TestSyncTargetRestart kills the target MariaDB mid-workload: the subtask
// reports a resumable error while the target is down, the auto-resume
// checker resumes it once the target is back (no operator action), and
// the target ends equal to the source.
func TestSyncTargetRestart(t *testing.T) {
	r := startReplication(t, replOptions{})
	wl := startWorkload(t, r.srcDB, 4)
	r.waitProgress(100)

	r.tgt.Kill(t)
	r.tgtDB.SetMaxIdleConns(0) // drop the pool's connections to the dead server
	r.tgtDB.SetMaxIdleConns(2)
	failed := r.waitSubtask(20*time.Second, "the subtask reports a resumable error while the target is down", func(d subtaskDoc) bool {
		for _, e := range d.Errors {
			if e.Resumable {
				return true
			}
		}
		return false
	})
	t.Logf("target down: subtask %v", failed)
	// Keep the target down across several auto-resume attempts (backoff
	// 200ms..1s); none may turn the error into a non-resumable one.
	testutil.Consistently(t, 2*time.Second, "while the target is down the subtask reports only resumable errors (the checker never resumes others)", func() error {
		d, err := r.subtask()
		if err != nil {
			return nil // the worker is busy; only an error it reports counts
		}
		for _, e := range d.Errors {
			if !e.Resumable {
				return fmt.Errorf("non-resumable error in subtask %v", d)
			}
		}
		return nil
	})

	r.tgt.Restart(t)
	r.waitSubtask(30*time.Second, "the subtask is auto-resumed (Running in Sync without errors)", subtaskDoc.syncing)
	r.waitProgress(100)
	if err := wl.stop(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	t.Logf("workload stopped: %s", wl)
	r.waitCaughtUp(60 * time.Second)
	if d, err := r.subtask(); err != nil || !d.syncing() {
		t.Errorf("after catching up: subtask %v (%v), want Running in Sync without errors", d, err)
	}
}

// TestSyncPauseResumeViaDmctl pauses the task with dmctl while the source
// keeps writing: within 1 s the target stops changing, and stays unchanged
// for a second; after dmctl task resume the target catches up and ends
// equal to the source.
func TestSyncPauseResumeViaDmctl(t *testing.T) {
	r := startReplication(t, replOptions{})
	wl := startWorkload(t, r.srcDB, 4)
	r.waitProgress(100)

	res := r.c.ok("task", "pause", replTask)
	paused := time.Now()
	t.Logf("dmctl task pause took %s", res.took.Round(time.Millisecond))
	srcBefore, err := checksums(r.srcDB)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(paused.Add(time.Second))) // the grace period the contract allows
	frozen, err := checksums(r.tgtDB)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Consistently(t, time.Second, "the target stays unchanged after dmctl task pause", func() error {
		now, err := checksums(r.tgtDB)
		if err != nil {
			return err
		}
		if !equalMaps(now, frozen) {
			return fmt.Errorf("still changes %s after the pause: checksums %v, then %v",
				time.Since(paused).Round(time.Millisecond), frozen, now)
		}
		return nil
	})
	srcAfter, err := checksums(r.srcDB)
	if err != nil {
		t.Fatal(err)
	}
	if equalMaps(srcBefore, srcAfter) {
		t.Fatalf("the source did not change while the task was paused (%s); the check above proves nothing", wl)
	}
	d, err := r.subtask()
	if err != nil || d.Stage != "Paused" || len(d.Errors) != 0 {
		t.Errorf("paused subtask: %v (%v), want stage Paused without errors", d, err)
	}

	r.c.ok("task", "resume", replTask)
	r.waitSubtask(10*time.Second, "the subtask runs again after dmctl task resume", subtaskDoc.syncing)
	r.waitProgress(100)
	if err := wl.stop(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	t.Logf("workload stopped: %s", wl)
	r.waitCaughtUp(60 * time.Second)
}

// waitProgress waits until the sync unit of the current worker, running
// without errors, has read n more transactions than when called (at most
// 30 s).
func (r *replication) waitProgress(n uint64) {
	r.t.Helper()
	var from uint64
	if d, err := r.subtask(); err == nil {
		from = d.Progress.Transactions
	}
	r.waitSubtask(30*time.Second, fmt.Sprintf("the sync unit applies %d transactions after the %d it had read", n, from), func(d subtaskDoc) bool {
		return d.syncing() && d.Progress.Transactions >= from+n
	})
}

// relayDoc is the relay part of GET /api/v1/status.
type relayDoc struct {
	Enabled     bool              `json:"enabled"`
	Stage       string            `json:"stage"`
	RelayBinlog string            `json:"relay-binlog"`
	Errors      []json.RawMessage `json:"errors"`
}

// relay reads the relay status of the current worker.
func (r *replication) relay() (relayDoc, error) {
	var doc struct {
		Relay relayDoc `json:"relay"`
	}
	res, err := httpDo(http.MethodGet, r.w.url("/api/v1/status"), "")
	if err != nil {
		return doc.Relay, err
	}
	if res.code != http.StatusOK {
		return doc.Relay, fmt.Errorf("GET /api/v1/status: %d %s", res.code, res.body)
	}
	if err := json.Unmarshal([]byte(res.body), &doc); err != nil {
		return doc.Relay, fmt.Errorf("GET /api/v1/status: %w\n%s", err, res.body)
	}
	return doc.Relay, nil
}
