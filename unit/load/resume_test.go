package load

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// TestLoadResumeExactlyOnce cancels the load mid-way twice (Process, then
// Resume after Pause), then lets a new unit on the same directory and
// target (as after a crash of the worker) finish: every chunk is loaded and
// recorded exactly once, and the target equals the source.
func TestLoadResumeExactlyOnce(t *testing.T) {
	const perChunk = 10
	e := newEnv(t, true)
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app",
		"CREATE TABLE app.big (id INT PRIMARY KEY, v VARCHAR(40))",
		"INSERT INTO app.big SELECT seq, CONCAT('row-', seq) FROM app.seq_1_to_20000",
		"CREATE TABLE app.other (id INT PRIMARY KEY, k INT, KEY (k))",
		"INSERT INTO app.other SELECT seq, seq % 7 FROM app.seq_1_to_2000")
	dir := t.TempDir()
	m := e.dumpTables(t, dir, "resume", "dump-r", perChunk, tn("app", "big"), tn("app", "other"))
	cfg, src := e.configs("resume", config.ModeFull, 4)
	total := m.Chunks()

	exactlyOnce := func(stage string) int64 {
		t.Helper()
		return e.exactlyOnce(t, stage, "resume", perChunk, "app.big", "app.other")
	}
	// cancelMidway runs Process or Resume and cancels it once at least
	// from chunks are done.
	cancelMidway := func(l *Loader, resume bool, from int) {
		t.Helper()
		r := unittest.Start(l, resume, 0)
		waitChunks(t, l, from)
		r.Cancel()
		res := r.Wait(t, 30*time.Second)
		if !res.IsCanceled || len(res.Errors) > 0 {
			t.Fatalf("cancelled load returned %+v", res)
		}
		if st := l.Status().(Status); st.ChunksDone >= total || st.Finished {
			t.Fatalf("the load finished before it was cancelled (%+v); make the dump bigger", st)
		}
	}

	a := newLoader(t, cfg, src, dir, nil)
	cancelMidway(a, false, total/5)
	first := exactlyOnce("after the first cancel")
	a.Pause()
	small := *cfg
	small.Loader.PoolSize = 2
	if err := a.Update(context.Background(), &small); err != nil {
		t.Fatalf("pool-size change: %v", err)
	}
	routed := small
	routed.RouteRules = []config.RouteRule{{SchemaPattern: "app", TargetSchema: "elsewhere"}}
	if err := a.Update(context.Background(), &routed); !errors.Is(err, unit.ErrUpdateUnsupported) {
		t.Fatalf("route change: %v, want ErrUpdateUnsupported", err)
	}
	cancelMidway(a, true, int(first)+total/5)
	second := exactlyOnce("after the second cancel")
	if second <= first {
		t.Fatalf("Resume loaded nothing: %d chunks before, %d after", first, second)
	}
	a.Kill()

	b := newLoader(t, cfg, src, dir, nil)
	if fresh, err := b.IsFreshTask(context.Background()); err != nil || fresh {
		t.Fatalf("IsFreshTask of a half-loaded dump: %v, %v; want false", fresh, err)
	}
	requireOK(t, process(t, b))
	if n := exactlyOnce("at the end"); n != int64(total) {
		t.Fatalf("%d chunks recorded, want %d", n, total)
	}
	e.requireEqual(t, "app.big", "app.big")
	e.requireEqual(t, "app.other", "app.other")
	if st := b.Status().(Status); st.ChunksDone != total || st.Rows != m.Rows() || !st.Finished {
		t.Fatalf("status after the resumed load: %+v", st)
	}
	b.Close()
}

// waitChunks polls tightly until at least n chunks are done: chunks of 10
// rows commit within a millisecond.
func waitChunks(t *testing.T, l *Loader, n int) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); l.Status().(Status).ChunksDone < n; time.Sleep(200 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d chunks loaded after 2 minutes: %+v", n, l.Status())
		}
	}
}

// exactlyOnce checks that the target tables hold exactly the rows of the
// chunks recorded for task (chunks of perChunk rows): no chunk half loaded,
// none recorded twice. It returns the number of chunks recorded.
func (e *env) exactlyOnce(t *testing.T, stage, task string, perChunk int64, tables ...string) int64 {
	t.Helper()
	chunks := queryInt(t, e.dstDB, "SELECT COUNT(*) FROM dm_meta.load_checkpoint WHERE task = ?", task)
	distinct := queryInt(t, e.dstDB, "SELECT COUNT(DISTINCT chunk_file) FROM dm_meta.load_checkpoint WHERE task = ?", task)
	recorded := queryInt(t, e.dstDB, "SELECT COALESCE(SUM(row_count), 0) FROM dm_meta.load_checkpoint WHERE task = ?", task)
	var loaded int64
	for _, table := range tables {
		loaded += queryInt(t, e.dstDB, "SELECT COUNT(*) FROM "+table)
	}
	if chunks != distinct || recorded != loaded || recorded != chunks*perChunk {
		t.Fatalf("%s: %d chunk records (%d distinct) of %d rows, but %d rows in the target", stage, chunks, distinct, recorded, loaded)
	}
	return chunks
}

// TestLoadTargetCrash kills the target (SIGKILL, durable commits) in the
// middle of the load: the run fails resumably, and after the restart a
// Resume finishes with every chunk loaded exactly once.
func TestLoadTargetCrash(t *testing.T) {
	e := newEnv(t, true)
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app",
		"CREATE TABLE app.big (id INT PRIMARY KEY, v VARCHAR(40))",
		"INSERT INTO app.big SELECT seq, CONCAT('row-', seq) FROM app.seq_1_to_20000")
	dir := t.TempDir()
	m := e.dumpTables(t, dir, "crash", "dump-c", 10, tn("app", "big"))
	cfg, src := e.configs("crash", config.ModeFull, 4)
	l := newLoader(t, cfg, src, dir, nil)
	for kill := 1; kill <= 2; kill++ {
		r := unittest.Start(l, kill > 1, 0)
		waitChunks(t, l, kill*m.Chunks()/4)
		e.dst.Kill(t)
		res := r.Wait(t, time.Minute)
		if res.IsCanceled || !res.Resumable() {
			t.Fatalf("run after the target was killed: %+v, want a resumable error", res)
		}
		e.dst.Restart(t)
		e.exactlyOnce(t, "after the crash", "crash", 10, "app.big")
		l.Pause()
	}
	requireOK(t, unittest.Start(l, true, 0).Wait(t, 5*time.Minute))
	if n := e.exactlyOnce(t, "at the end", "crash", 10, "app.big"); n != int64(m.Chunks()) {
		t.Fatalf("%d chunks recorded, want %d", n, m.Chunks())
	}
	e.requireEqual(t, "app.big", "app.big")
	l.Close()
}
