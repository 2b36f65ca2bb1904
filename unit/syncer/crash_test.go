package syncer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// TestKilledAtRandomMoments kills the unit (no flush) ten times at random
// moments while a workload runs, restarts it each time from the saved
// checkpoint, and checks that target == source in the end.
func TestKilledAtRandomMoments(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{})
	cfg, src := e.configs(t, "crash")
	cfg.Syncer.Batch = 20
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app", "CREATE TABLE app.t1 "+workloadTable, "CREATE TABLE app.t2 "+workloadTablePK)

	w := &workload{db: e.srcDB, tables: []string{"app.t1", "app.t2"}}
	ctx, stopLoad := context.WithCancel(context.Background())
	loadErr := make(chan error, 1)
	go func() { loadErr <- w.run(ctx, 1<<40, 3) }()
	defer func() {
		stopLoad()
		if err := <-loadErr; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("workload: %v", err)
		}
	}()

	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	sawSafeMode := false
	for i := 0; i < 10; i++ {
		u := newUnit(t, cfg, src)
		r := unittest.Start(u, false, 0)
		deadline := time.After(time.Duration(200+rng.IntN(1300)) * time.Millisecond)
	poll:
		for {
			select {
			case <-deadline:
				break poll
			case res := <-r.Done:
				t.Fatalf("run %d ended by itself: %v", i, resultErr(res))
			case <-time.After(20 * time.Millisecond):
				if u.Status().(Status).SafeMode {
					sawSafeMode = true
				}
			}
		}
		res := r.Stop(t)
		u.Kill()
		if res.Failed() {
			t.Fatalf("run %d failed: %v", i, resultErr(res))
		}
	}
	stopLoad()
	if err := <-loadErr; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("workload: %v", err)
	}
	loadErr <- nil
	if !sawSafeMode {
		t.Log("no restart was seen in safe mode (every kill came right after a checkpoint)")
	}
	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)
	defer r.Stop(t)
	e.waitEqual(t, same("app.t1", "app.t2"), r)
	t.Logf("%d row changes written", w.rows.Load())
}

// TestTargetRestart stops the target under load: the run fails with a
// resumable error; after the target is back, Resume catches up.
func TestTargetRestart(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	cfg, src := e.configs(t, "restart")
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app", "CREATE TABLE app.t1 "+workloadTable)
	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)
	w := &workload{db: e.srcDB, tables: []string{"app.t1"}}
	if err := w.run(context.Background(), 500, 2); err != nil {
		t.Fatal(err)
	}
	e.waitEqual(t, same("app.t1"), r)

	e.dst.Kill(t)
	if err := w.run(context.Background(), 1000, 2); err != nil {
		t.Fatal(err)
	}
	res := r.Wait(t, 30*time.Second)
	if !res.Failed() || !res.Resumable() {
		t.Fatalf("result with the target down = %+v, want a resumable error", res)
	}
	e.dst.Restart(t)
	if err := w.run(context.Background(), 1500, 2); err != nil {
		t.Fatal(err)
	}
	u.Pause()
	r = unittest.Start(u, true, 0)
	defer r.Stop(t)
	e.waitEqual(t, same("app.t1"), r)
}

// TestPauseStopsQuickly cancels a busy run: it must return within a
// second and apply nothing afterwards; Resume continues to equality.
func TestPauseStopsQuickly(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	cfg, src := e.configs(t, "pause")
	cfg.Syncer.WorkerCount = 2
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app", "CREATE TABLE app.t1 "+workloadTable)
	w := &workload{db: e.srcDB, tables: []string{"app.t1"}}
	if err := w.run(context.Background(), 6000, 4); err != nil {
		t.Fatal(err)
	}
	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)
	// Pause while the backlog is being applied.
	testutil.Eventually(t, 30*time.Second, "the unit applies 200 inserts", func() error {
		if n := u.Status().(Status).Inserts; n < 200 {
			return fmt.Errorf("%d inserts applied", n)
		}
		return nil
	})
	began := time.Now()
	res := r.Stop(t)
	if took := time.Since(began); took > time.Second {
		t.Errorf("Process returned %v after cancel, want < 1s", took)
	}
	if !res.IsCanceled {
		t.Fatalf("result = %+v, want canceled", res)
	}
	u.Pause()
	count := func() string {
		var n string
		if err := e.dstDB.QueryRow("SELECT COUNT(*), IFNULL(SUM(n % 1000), 0) FROM app.t1").Scan(&n, new(string)); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	time.Sleep(500 * time.Millisecond) // nothing must change in this window
	if after := count(); after != before {
		t.Fatalf("target changed after pause: %s rows, then %s", before, after)
	}
	r = unittest.Start(u, true, 0)
	defer r.Stop(t)
	e.waitEqual(t, same("app.t1"), r)
}

// TestHandleErrorSkip makes the target reject a DDL: the run fails with a
// non-resumable error; handle-error skip lets Resume continue past it.
func TestHandleErrorSkip(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	cfg, src := e.configs(t, "handle")
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app", "CREATE TABLE app.t1 (id INT PRIMARY KEY, v INT)",
		"INSERT INTO app.t1 VALUES (1, 1)")
	u := newUnit(t, cfg, src)
	defer u.Close()
	if err := u.HandleError(context.Background(), unit.HandleErrorRequest{Op: unit.HandleErrorSkip}); !errors.Is(err, ErrNothingToHandle) {
		t.Fatalf("HandleError with nothing stuck = %v, want ErrNothingToHandle", err)
	}
	r := unittest.Start(u, false, 0)
	e.waitEqual(t, same("app.t1"), r)
	// The target already has the column: the replicated ALTER fails.
	mariadbtest.MustExec(t, e.dstDB, "ALTER TABLE app.t1 ADD COLUMN c INT")
	mariadbtest.MustExec(t, e.srcDB, "INSERT INTO app.t1 VALUES (3, 3), (4, 4), (5, 5), (6, 6)",
		"ALTER TABLE app.t1 ADD COLUMN c INT", "INSERT INTO app.t1 VALUES (2, 2, 2)")
	res := r.Wait(t, 30*time.Second)
	if !res.Failed() || res.Resumable() || res.Errors[0].Code != CodeDDL {
		t.Fatalf("result = %+v, want a non-resumable %s error", res, CodeDDL)
	}
	// Everything before the rejected DDL is on the target.
	var n int
	if err := e.dstDB.QueryRow("SELECT COUNT(*) FROM app.t1").Scan(&n); err != nil || n != 5 {
		t.Fatalf("target app.t1: %d rows, %v; want the 5 rows written before the DDL", n, err)
	}
	st := u.Status().(Status)
	if st.StuckOn == "" {
		t.Fatalf("status does not show the stuck DDL: %+v", st)
	}
	if err := u.HandleError(context.Background(), unit.HandleErrorRequest{Op: unit.HandleErrorSkip, BinlogPos: st.StuckOn}); err != nil {
		t.Fatal(err)
	}
	r = unittest.Start(u, true, 0)
	defer r.Stop(t)
	mariadbtest.MustExec(t, e.srcDB, "UPDATE app.t1 SET c = 5 WHERE id = 1")
	e.waitEqual(t, same("app.t1"), r)
	if got := errs.Code(errors.New("x")); got != errs.CodeInternal {
		t.Fatal(got)
	}
}
