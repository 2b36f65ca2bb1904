package syncer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/rowimage"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// fakeWorkers starts n workers on d that record the jobs they get and
// return the jobs' budget at once (slow: worker 0 sleeps per job first).
type fakeWorkers struct {
	mu   sync.Mutex
	jobs [][]job // per worker, the change jobs in arrival order
	wg   sync.WaitGroup
}

func startFakeWorkers(ctx context.Context, d *dispatcher, n int, slow time.Duration) *fakeWorkers {
	f := &fakeWorkers{jobs: make([][]job, n)}
	for i := range n {
		d.workers = append(d.workers, &applyWorker{id: i, inflight: &d.inflight, progress: d.progress})
	}
	d.launch = func(w *applyWorker) {
		w.in = make(chan job, 4)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for {
				var j job
				select {
				case j = <-w.in:
				case <-ctx.Done():
					return
				}
				if j.mark != 0 {
					w.marked.Store(j.mark)
					w.poke()
					continue
				}
				if w.id == 0 {
					time.Sleep(slow)
				}
				f.mu.Lock()
				f.jobs[w.id] = append(f.jobs[w.id], j)
				f.mu.Unlock()
				w.inflight.Add(-j.size)
				w.poke()
			}
		}()
	}
	return f
}

// TestBulkDispatch dispatches bulk events to fake workers: fresh rows go in
// runs of bulkBatchRows to bulkSpread workers in turn, each job holds one
// worker's changes of one event in binlog order and at most maxJobChanges;
// a change of a key a worker holds goes to that worker; a small event's
// changes go by key hash; the in-flight budget is never passed.
func TestBulkDispatch(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ti := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "t"}, Columns: []string{"id"},
		Key: []int{0}, Uniques: [][]int{{0}}}}
	d := newDispatcher(make(chan struct{}, 1))
	d.maxInflight = 64 << 10
	const workers = 8
	f := startFakeWorkers(ctx, d, workers, 50*time.Microsecond)
	var peak atomic.Int64
	event := func(kind changeKind, ids []int64, bulk bool) {
		t.Helper()
		changes := make([]change, len(ids))
		for i, id := range ids {
			c := &changes[i]
			*c = change{kind: kind, table: ti, row: i, size: 100}
			if kind == kindInsert {
				c.after = []any{id}
			} else {
				c.before = []any{id}
			}
			if err := d.add(ctx, c, bulk); err != nil {
				t.Fatal(err)
			}
			peak.Store(max(peak.Load(), d.inflight.Load()))
		}
		if err := d.flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// 3 runs' worth of fresh rows in events of 2,000 (above maxJobChanges).
	const fresh = 5 * bulkBatchRows
	for lo := int64(0); lo < fresh; lo += 2000 {
		ids := make([]int64, 0, 2000)
		for id := lo; id < min(lo+2000, fresh); id++ {
			ids = append(ids, id)
		}
		event(kindInsert, ids, true)
	}
	if err := d.barrier(ctx); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	runOf := map[int64]int{} // id → worker
	used := 0
	for w, jobs := range f.jobs {
		if len(jobs) > 0 {
			used++
		}
		last := int64(-1)
		for _, j := range jobs {
			if len(j.changes) == 0 || len(j.changes) > maxJobChanges {
				t.Errorf("worker %d got a job of %d changes; want 1 to %d", w, len(j.changes), maxJobChanges)
			}
			if !j.bulk {
				t.Errorf("worker %d got a bulk event's job not marked bulk", w)
			}
			for _, c := range j.changes {
				id := c.after[0].(int64)
				if id <= last {
					t.Fatalf("worker %d got id %d after %d: not in binlog order", w, id, last)
				}
				last = id
				runOf[id] = w
			}
		}
		f.jobs[w] = nil
	}
	f.mu.Unlock()
	if used != min(bulkSpread, workers) {
		t.Errorf("a bulk load of %d rows used %d workers, want %d", fresh, used, min(bulkSpread, workers))
	}
	for id := int64(1); id < fresh; id++ {
		if same := runOf[id] == runOf[id-1]; same != (id%bulkBatchRows != 0) {
			t.Fatalf("ids %d and %d on workers %d and %d: runs of %d rows expected", id-1, id, runOf[id-1], runOf[id], bulkBatchRows)
		}
	}
	if p := peak.Load(); p > d.maxInflight {
		t.Errorf("in flight up to %d bytes, budget %d", p, d.maxInflight)
	}

	// Keys held since the last barrier go to their holder: insert a run,
	// then delete it in a bulk event and in small ones, before any barrier.
	ids := make([]int64, 100)
	for i := range ids {
		ids[i] = fresh + int64(i)
	}
	event(kindInsert, ids, true)
	event(kindDelete, ids[:50], true)
	for _, id := range ids[50:] {
		event(kindDelete, []int64{id}, false)
	}
	if err := d.barrier(ctx); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	holder := map[int64]int{}
	for w, jobs := range f.jobs {
		for _, j := range jobs {
			for _, c := range j.changes {
				row := c.after
				if c.kind == kindDelete {
					row = c.before
				}
				id := row[0].(int64)
				if h, ok := holder[id]; ok && h != w {
					t.Errorf("id %d: changed on worker %d and %d", id, h, w)
				}
				holder[id] = w
			}
		}
	}
	f.mu.Unlock()
	if len(holder) != len(ids) {
		t.Errorf("%d ids seen, want %d", len(holder), len(ids))
	}
	// Small events of fresh keys spread by key hash, not on one worker.
	f.mu.Lock()
	clear(f.jobs)
	f.jobs = make([][]job, workers)
	f.mu.Unlock()
	for id := int64(0); id < 200; id++ {
		event(kindInsert, []int64{1<<40 + id}, false)
	}
	if err := d.barrier(ctx); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	spread := 0
	for _, jobs := range f.jobs {
		if len(jobs) > 0 {
			spread++
		}
		for _, j := range jobs {
			if j.bulk {
				t.Errorf("a small event's job is marked bulk")
			}
		}
	}
	f.mu.Unlock()
	if spread < workers/2 {
		t.Errorf("200 single-row events of fresh keys reached %d of %d workers", spread, workers)
	}
	cancel()
	f.wg.Wait()
}

// TestBatchFull: a batch is complete by rows, changes or bytes; bulk jobs
// raise the row limit.
func TestBatchFull(t *testing.T) {
	tests := []struct {
		name          string
		batch         int
		bulk          bool
		rows, n, size int
		want          bool
	}{
		{"below the batch", 100, false, 99, 99, 1000, false},
		{"the batch's rows", 100, false, 100, 100, 1000, true},
		{"four times the changes", 100, false, 10, 400, 1000, true},
		{"bulk takes more rows", 100, true, 100, 100, 1000, false},
		{"bulk rows", 100, true, bulkBatchRows, bulkBatchRows, 1000, true},
		{"a larger batch setting stays", 10000, true, bulkBatchRows, bulkBatchRows, 1000, false},
		{"bytes end a small batch", 100, false, 3, 3, maxBatchBytes, true},
		{"bytes end a bulk batch", 100, true, 500, 500, maxBatchBytes, true},
	}
	for _, tt := range tests {
		if got := batchFull(tt.batch, tt.bulk, tt.rows, tt.n, tt.size); got != tt.want {
			t.Errorf("%s: batchFull(%d, %v, %d, %d, %d) = %v", tt.name, tt.batch, tt.bulk, tt.rows, tt.n, tt.size, got)
		}
	}
}

// TestBulkBatchSizes feeds a real worker queued jobs and counts the target
// transactions it commits: bulk jobs fill batches to bulkBatchRows rows or
// maxBatchBytes, small ones to the batch setting; every row arrives.
func TestBulkBatchSizes(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{})
	cfg, src := e.configs(t, "bulksize")
	u := newUnit(t, cfg, src)
	defer u.Close()
	mariadbtest.MustExec(t, e.dstDB, "CREATE DATABASE bs", "CREATE TABLE bs.t (id INT PRIMARY KEY, v LONGTEXT)")
	ti := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "bs", Table: "t"}, Columns: []string{"id", "v"},
		Types: []byte{3, 252}, Binary: []bool{false, false}, Key: []int{0}, Uniques: [][]int{{0}}}, compact: true}
	next := 0
	jobOf := func(rows, width int, bulk bool) job {
		j := job{bulk: bulk}
		for range rows {
			next++
			v := strings.Repeat("x", width)
			c := &change{kind: kindInsert, table: ti, after: []any{int64(next), v},
				loc: binlog.Location{Name: "mariadb-bin.000001", Pos: uint32(4 + next)}}
			c.size = rowSize(c.after)
			j.changes = append(j.changes, c)
		}
		return j
	}
	tests := []struct {
		name        string
		jobs        []job
		wantBatches uint64
	}{
		// 10 jobs of 1,000 narrow rows: batches close past 4,096 rows.
		{"bulk by rows", repeatJobs(10, func() job { return jobOf(1000, 10, true) }), 2},
		// 10 jobs of 100 rows of 4 KiB (~400 KiB each): past 2 MiB.
		{"bulk by bytes", repeatJobs(10, func() job { return jobOf(100, 4096, true) }), 2},
		// 10 small jobs of 20 rows, batch 50: closes at 60 rows.
		{"small by the batch setting", repeatJobs(10, func() job { return jobOf(20, 10, false) }), 4},
	}
	var budget atomic.Int64
	total := 0
	for _, tt := range tests {
		for _, j := range tt.jobs {
			total += len(j.changes)
		}
		t.Run(tt.name, func(t *testing.T) {
			var stats counters
			w := &applyWorker{id: 0, db: u.target, store: u.store, batch: 50, stats: &stats, metrics: u.metrics,
				logger: zap.NewNop(), progress: make(chan struct{}, 1), catchingUp: &atomic.Bool{}, inflight: &budget,
				in: make(chan job, len(tt.jobs)+1)}
			for _, j := range tt.jobs {
				w.in <- j
			}
			w.in <- job{mark: 1}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- w.run(ctx) }()
			deadline := time.After(30 * time.Second)
			for w.marked.Load() < 1 {
				select {
				case <-deadline:
					t.Fatal("the worker did not apply its jobs in 30 s")
				case err := <-done:
					t.Fatalf("the worker stopped: %v", err)
				case <-time.After(5 * time.Millisecond):
				}
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("worker: %v", err)
			}
			if got := stats.batches.Load(); got != tt.wantBatches {
				t.Errorf("%d target transactions, want %d", got, tt.wantBatches)
			}
			var n int
			if err := e.dstDB.QueryRow("SELECT COUNT(*) FROM bs.t").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != total {
				t.Errorf("target holds %d rows, want %d", n, total)
			}
		})
	}
}

func repeatJobs(n int, mk func() job) []job {
	out := make([]job, n)
	for i := range out {
		out[i] = mk()
	}
	return out
}

// bulkTables are the tables of the bulk tests: a compactable one (primary
// key and a non-unique key), one with a second unique key (not compacted,
// its rows conflict through it), and one without any key; each has NULLs.
var bulkTables = map[string]string{
	"bulk.pk":    "(id INT PRIMARY KEY, k INT, c VARCHAR(120), pad CHAR(60), n BIGINT NULL, KEY (k))",
	"bulk.uniq":  "(id INT PRIMARY KEY, u INT NULL UNIQUE, c VARCHAR(120), n BIGINT NULL)",
	"bulk.nokey": "(id INT, k INT NULL, c VARCHAR(120))",
}

// bulkRound writes bulk transactions (multi-row INSERT ... SELECT, big
// UPDATEs including ones that shift unique values, big DELETEs) of rows
// rows each, round r of a test.
func bulkRound(ctx context.Context, e *env, r, rows int) error {
	lo, hi := r*rows+1, (r+1)*rows
	// The key-less table gets a tenth: each of its row changes is a scan.
	nk := lo + rows/10
	stmts := []string{
		fmt.Sprintf("INSERT INTO bulk.pk SELECT seq, seq %% 97, CONCAT('c-', seq), 'pad', IF(seq %% 5 = 0, NULL, seq) FROM bulk.seq_%d_to_%d", lo, hi),
		fmt.Sprintf("INSERT INTO bulk.uniq SELECT seq, IF(seq %% 7 = 0, NULL, seq * 10 + %d), CONCAT('u-', seq), NULL FROM bulk.seq_%d_to_%d",
			r%2*5, lo, hi),
		fmt.Sprintf("INSERT INTO bulk.nokey SELECT seq %% 50, IF(seq %% 3 = 0, NULL, seq), 'same' FROM bulk.seq_%d_to_%d", lo, nk),
		fmt.Sprintf("UPDATE bulk.pk SET k = k + 1, n = IF(n IS NULL, 0, NULL) WHERE id BETWEEN %d AND %d", lo, hi),
		// Every unique value moves to the next row's, highest first: each
		// row change's new value is the old value of a change after it.
		// (Rounds alternate the values' last digit, so the top row's new
		// value is no value the next round inserts.)
		fmt.Sprintf("UPDATE bulk.uniq SET u = u + 10 WHERE id BETWEEN %d AND %d ORDER BY id DESC", lo, hi),
		fmt.Sprintf("UPDATE bulk.nokey SET c = 'changed' WHERE k BETWEEN %d AND %d", lo, lo+rows/20),
		fmt.Sprintf("DELETE FROM bulk.pk WHERE id BETWEEN %d AND %d AND id %% 3 = 0", lo, hi),
		fmt.Sprintf("DELETE FROM bulk.uniq WHERE id BETWEEN %d AND %d AND id %% 4 = 0", lo, hi),
		fmt.Sprintf("DELETE FROM bulk.nokey WHERE k BETWEEN %d AND %d AND k %% 4 = 1", lo, nk),
	}
	for _, q := range stmts {
		if _, err := e.srcDB.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

func createBulkTables(t *testing.T, e *env) {
	t.Helper()
	stmts := []string{"CREATE DATABASE bulk"}
	for name, def := range bulkTables {
		stmts = append(stmts, "CREATE TABLE "+name+" "+def)
	}
	mariadbtest.MustExec(t, e.srcDB, stmts...)
}

func bulkTableNames() []string {
	out := make([]string, 0, len(bulkTables))
	for name := range bulkTables {
		out = append(out, name)
	}
	return out
}

// TestBulkEndState replicates bulk transactions into every kind of table,
// with and without safe mode: the target ends equal to the source.
func TestBulkEndState(t *testing.T) {
	for _, safe := range []bool{false, true} {
		t.Run(fmt.Sprintf("safe-mode=%v", safe), func(t *testing.T) {
			e := newEnv(t, mariadbtest.Options{})
			cfg, src := e.configs(t, "bulk")
			cfg.Syncer.SafeMode = safe
			createBulkTables(t, e)
			u := newUnit(t, cfg, src)
			defer u.Close()
			r := unittest.Start(u, false, 0)
			defer r.Stop(t)
			ctx := t.Context()
			const rounds, rows = 3, 2000
			for round := range rounds {
				if err := bulkRound(ctx, e, round, rows); err != nil {
					t.Fatal(err)
				}
			}
			e.waitEqual(t, same(bulkTableNames()...), r)
			st := u.Status().(Status)
			if want := uint64(rounds * (2*rows + rows/10 + 1)); st.Inserts != want {
				t.Errorf("status shows %d inserts, want %d", st.Inserts, want)
			}
			// Batches of the batch setting (50) would take more than one
			// per 50 changes; bulk batches take thousands.
			if changes := st.Inserts + st.Updates + st.Deletes; st.Batches == 0 || changes/st.Batches < 100 {
				t.Errorf("%d row changes in %d batches: bulk events were not applied in bulk batches", changes, st.Batches)
			}
		})
	}
}

// TestBulkKilledAtRandomMoments kills the unit (no flush) at random moments
// while bulk transactions are applied, restarts it from its checkpoint each
// time, and checks that target == source in the end: the checkpoint is
// committed with the data, and a restart in safe mode replays bulk events
// idempotently.
func TestBulkKilledAtRandomMoments(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{})
	cfg, src := e.configs(t, "bulkcrash")
	createBulkTables(t, e)
	ctx := t.Context()
	const rounds, rows = 8, 2500
	for round := range rounds {
		if err := bulkRound(ctx, e, round, rows); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano())))
	for i := range 5 {
		u := newUnit(t, cfg, src)
		r := unittest.Start(u, false, 0)
		select {
		case res := <-r.Done:
			t.Fatalf("run %d ended by itself: %v", i, resultErr(res))
		case <-time.After(time.Duration(100+rng.IntN(600)) * time.Millisecond):
		}
		st := u.Status().(Status)
		res := r.Stop(t)
		u.Kill()
		if res.Failed() {
			t.Fatalf("run %d failed: %v", i, resultErr(res))
		}
		t.Logf("run %d killed at %d inserts, %d updates, %d deletes applied; checkpoint %s; safe mode %v",
			i, st.Inserts, st.Updates, st.Deletes, st.Checkpoint, st.SafeMode)
	}
	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)
	defer r.Stop(t)
	e.waitEqual(t, same(bulkTableNames()...), r)
}
