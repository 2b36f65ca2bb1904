package worker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
)

const testSource = "mysql-01"

// swFactory builds a fresh blocking Sync test unit for every subtask it is
// asked for and remembers them by task name.
type swFactory struct {
	*unit.Registry
	// wrap, when set before the first unit is built, turns each test unit
	// into the unit the subtask gets (e.g. one with more interfaces).
	wrap func(*testUnit) unit.Unit
	mu   sync.Mutex
	// guarded by mu:
	units map[string][]*testUnit
}

func newSWFactory() *swFactory {
	f := &swFactory{units: make(map[string][]*testUnit)}
	f.Registry = unit.NewRegistry(map[unit.Type]unit.Constructor{
		unit.TypeSync: func(cfg *config.SubTaskConfig, _ *zap.Logger) (unit.Unit, error) {
			u := newTestUnit(unit.TypeSync, 0)
			f.mu.Lock()
			f.units[cfg.Name] = append(f.units[cfg.Name], u)
			f.mu.Unlock()
			if f.wrap != nil {
				return f.wrap(u), nil
			}
			return u, nil
		},
	}, func(*config.SubTaskConfig, unit.SyncSource, *zap.Logger) (unit.Validator, error) {
		return &testValidator{}, nil
	})
	return f
}

// latest is the newest unit built for task, or nil.
func (f *swFactory) latest(task string) *testUnit {
	f.mu.Lock()
	defer f.mu.Unlock()
	us := f.units[task]
	if len(us) == 0 {
		return nil
	}
	return us[len(us)-1]
}

func (f *swFactory) built(task string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.units[task])
}

// swEnv is an embedded etcd, a master-side store talking to it directly,
// and a SourceWorker talking to it through the cluster's bridge (so tests
// can cut the worker off).
type swEnv struct {
	t       testing.TB
	etcd    *etcdtest.Cluster
	master  *ha.Store
	factory *swFactory
	sw      *SourceWorker
	metrics *Metrics
}

func testSourceConfig() *config.SourceConfig {
	c := config.NewSourceConfig()
	c.SourceID = testSource
	c.From = config.DBConfig{Host: "127.0.0.1", Port: 3306, User: "root"}
	c.Checker.BackoffMin = config.Duration{Duration: 20 * time.Millisecond}
	c.Checker.BackoffMax = config.Duration{Duration: 320 * time.Millisecond}
	return c
}

func startSW(t testing.TB, workers int) *swEnv { return startSWWith(t, workers, nil) }

// startSWWith is startSW with the SourceWorker's config changed by edit
// (nil: none) before it is built.
func startSWWith(t testing.TB, workers int, edit func(*SourceWorkerConfig)) *swEnv {
	t.Helper()
	etcd := etcdtest.Start(t)
	e := &swEnv{
		t: t, etcd: etcd,
		master:  ha.NewStore(etcd.DirectClient(t), "/dm"),
		factory: newSWFactory(),
		metrics: NewMetrics(),
	}
	cfg := SourceWorkerConfig{
		Source:          testSourceConfig(),
		Store:           ha.NewStore(etcd.Client(t), "/dm"),
		Factory:         e.factory,
		Metrics:         e.metrics,
		Logger:          zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		Workers:         workers,
		CheckInterval:   5 * time.Millisecond,
		WatchBackoffMin: 20 * time.Millisecond,
		WatchBackoffMax: 200 * time.Millisecond,
	}
	if edit != nil {
		edit(&cfg)
	}
	e.sw = NewSourceWorker(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	e.sw.Start(ctx)
	e.sw.EnableSubTasks(ctx)
	t.Cleanup(func() {
		e.sw.Close()
		cancel()
	})
	return e
}

func taskConfig(name string) *config.SubTaskConfig {
	c := config.NewSubTaskConfig()
	c.Name = name
	c.SourceID = testSource
	c.TaskMode = config.ModeIncremental
	c.Meta = config.Meta{BinlogName: "mariadb-bin.000001", BinlogPos: 4}
	c.TargetDatabase = config.DBConfig{Host: "127.0.0.1", Port: 3306, User: "root"}
	return c
}

func (e *swEnv) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *swEnv) putTask(name string, expect stage.Stage) {
	e.t.Helper()
	if _, err := e.master.PutSubTask(e.ctx(), taskConfig(name), ha.Stage{Expect: expect, Source: testSource, Task: name}); err != nil {
		e.t.Fatalf("put task %s: %v", name, err)
	}
}

func (e *swEnv) setStage(name string, expect stage.Stage) {
	e.t.Helper()
	if _, err := e.master.PutSubTaskStage(e.ctx(), ha.Stage{Expect: expect, Source: testSource, Task: name}); err != nil {
		e.t.Fatalf("put stage %s: %v", name, err)
	}
}

func (e *swEnv) deleteStage(name string) {
	e.t.Helper()
	if _, err := e.master.DeleteSubTaskStage(e.ctx(), testSource, name); err != nil {
		e.t.Fatalf("delete stage %s: %v", name, err)
	}
}

func (e *swEnv) deleteConfig(name string) {
	e.t.Helper()
	if _, err := e.master.DeleteSubTaskConfig(e.ctx(), testSource, name); err != nil {
		e.t.Fatalf("delete config %s: %v", name, err)
	}
}

func (e *swEnv) putRaw(key, value string) {
	e.t.Helper()
	if _, err := e.master.Client().Put(e.ctx(), key, value); err != nil {
		e.t.Fatalf("put %s: %v", key, err)
	}
}

// settled reports whether task is in stage want both as reported and in its
// unit's real state (running exactly when want is Running).
func (e *swEnv) settled(name string, want stage.Stage) bool {
	st := e.sw.SubTask(name)
	if st == nil || st.Stage() != want {
		return false
	}
	u := e.factory.latest(name)
	running := u != nil && u.State() == usRunning
	return running == (want == stage.Running)
}

// waitStage waits up to d for task name to settle in stage want; a timeout
// names the stage reported and the unit's state at the deadline.
func (e *swEnv) waitStage(name string, want stage.Stage, d time.Duration) {
	e.t.Helper()
	testutil.Eventually(e.t, d, fmt.Sprintf("task %s %s", name, want), func() error {
		if e.settled(name, want) {
			return nil
		}
		state := unitState("<no unit>")
		if u := e.factory.latest(name); u != nil {
			state = u.State()
		}
		return fmt.Errorf("reported %s, unit %s", e.stageOf(name), state)
	})
}

func (e *swEnv) stageOf(name string) stage.Stage {
	if st := e.sw.SubTask(name); st != nil {
		return st.Stage()
	}
	return "<absent>"
}

// checkAbsent is nil when the source worker has no subtask name.
func (e *swEnv) checkAbsent(name string) error {
	if st := e.sw.SubTask(name); st != nil {
		return fmt.Errorf("%s still there, reported %s", name, st.Stage())
	}
	return nil
}

// checkBatch is nil when task name has syncer batch size batch and has
// settled Running.
func (e *swEnv) checkBatch(name string, batch int) error {
	st := e.sw.SubTask(name)
	if st == nil {
		return fmt.Errorf("%s absent", name)
	}
	if got := st.Config().Syncer.Batch; got != batch || !e.settled(name, stage.Running) {
		return fmt.Errorf("%s batch %d, reported %s, %d units built", name, got, st.Stage(), e.factory.built(name))
	}
	return nil
}

func (e *swEnv) taskError(name, code string) bool {
	for _, te := range e.sw.Status().Errors {
		if te.Task == name && te.Code == code {
			return true
		}
	}
	return false
}

// checkTaskError is nil when the status lists an error with code for task
// name exactly when listed is true; otherwise it describes the errors the
// status lists now.
func (e *swEnv) checkTaskError(name, code string, listed bool) error {
	if e.taskError(name, code) == listed {
		return nil
	}
	return fmt.Errorf("status errors %s", errorList(e.sw.Status().Errors))
}

// errorList shows the task and code of each error, for wait failures.
func errorList(es []TaskError) string {
	parts := make([]string, len(es))
	for i, te := range es {
		parts[i] = te.Task + ":" + te.Code
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func TestSourceWorkerStageLifecycle(t *testing.T) {
	e := startSW(t, 8)
	names := []string{"t1", "t2", "t3"}
	for _, n := range names {
		e.putTask(n, stage.Running)
	}
	for _, n := range names {
		e.waitStage(n, stage.Running, time.Second)
	}
	for _, n := range names {
		e.setStage(n, stage.Paused)
	}
	for _, n := range names {
		e.waitStage(n, stage.Paused, time.Second)
	}
	for _, n := range names {
		e.setStage(n, stage.Running)
	}
	for _, n := range names {
		e.waitStage(n, stage.Running, time.Second)
	}
	if got := e.factory.built("t1"); got != 1 {
		t.Fatalf("pause/resume must keep the subtask: %d units built", got)
	}

	e.deleteStage("t1")
	testutil.Eventually(t, time.Second, "t1 removed", func() error { return e.checkAbsent("t1") })
	testutil.Eventually(t, time.Second, "t1's unit closed", func() error { return checkUnitState(e.factory.latest("t1"), usClosed) })

	e.deleteConfig("t2")
	testutil.Eventually(t, time.Second, "t2 removed with an orphan-stage error", func() error {
		if err := e.checkAbsent("t2"); err != nil {
			return err
		}
		return e.checkTaskError("t2", CodeSubTaskStageWithoutConfig, true)
	})
	e.waitStage("t3", stage.Running, time.Second)
	st := e.sw.Status()
	if len(st.SubTasks) != 1 || st.SubTasks[0].Name != "t3" {
		t.Fatalf("status subtasks: want only t3, got %+v", st.SubTasks)
	}
	// Deleting the orphan stage clears its error.
	e.deleteStage("t2")
	testutil.Eventually(t, time.Second, "orphan error cleared", func() error {
		return e.checkTaskError("t2", CodeSubTaskStageWithoutConfig, false)
	})
	checkProtocol(t, e.factory.latest("t1"), e.factory.latest("t3"))
}

func TestSourceWorkerCreatesPausedTaskWithoutRunningIt(t *testing.T) {
	e := startSW(t, 2)
	e.putTask("p1", stage.Paused)
	e.waitStage("p1", stage.Paused, time.Second)
	if u := e.factory.latest("p1"); u.count("Process") != 0 {
		t.Fatalf("a subtask created Paused must not process: calls %v", u.Calls())
	}
	e.setStage("p1", stage.Running)
	e.waitStage("p1", stage.Running, time.Second)
}

func TestSourceWorkerRelistsAfterCompaction(t *testing.T) {
	e := startSW(t, 4)
	for _, n := range []string{"c1", "c2", "c3", "c4"} {
		e.putTask(n, stage.Running)
	}
	for _, n := range []string{"c1", "c2", "c3", "c4"} {
		e.waitStage(n, stage.Running, 2*time.Second)
	}
	// Cut the worker off, change the desired state, and compact past
	// everything the worker has seen.
	e.etcd.Partition()
	e.setStage("c1", stage.Paused)
	e.setStage("c2", stage.Paused)
	e.deleteStage("c3")
	e.deleteConfig("c3")
	e.putTask("c5", stage.Running)
	e.etcd.Compact(t, e.etcd.Revision(t))
	// While cut off, nothing changes locally.
	if e.sw.SubTask("c3") == nil || e.stageOf("c1") != stage.Running {
		t.Fatal("worker acted on changes it cannot have seen")
	}
	e.etcd.Heal(t)

	for n, want := range map[string]stage.Stage{"c1": stage.Paused, "c2": stage.Paused, "c4": stage.Running, "c5": stage.Running} {
		e.waitStage(n, want, 10*time.Second)
	}
	testutil.Eventually(t, 5*time.Second, "c3 removed", func() error { return e.checkAbsent("c3") })
	if n := len(e.sw.Status().SubTasks); n != 4 {
		t.Fatalf("want exactly 4 subtasks after relist, got %d", n)
	}
}

func TestSourceWorkerSurvivesEtcdRestart(t *testing.T) {
	e := startSW(t, 4)
	e.putTask("r1", stage.Running)
	e.putTask("r2", stage.Running)
	e.waitStage("r1", stage.Running, 2*time.Second)
	e.waitStage("r2", stage.Running, 2*time.Second)

	e.etcd.Stop()
	testutil.Consistently(t, 2*time.Second, "subtasks keep running while etcd is down", func() error {
		for _, n := range []string{"r1", "r2"} {
			if !e.settled(n, stage.Running) {
				return fmt.Errorf("%s reported %s", n, e.stageOf(n))
			}
		}
		return nil
	})
	e.etcd.Restart(t)

	e.setStage("r1", stage.Paused)
	e.putTask("r3", stage.Running)
	e.waitStage("r1", stage.Paused, 15*time.Second)
	e.waitStage("r3", stage.Running, 15*time.Second)
	e.waitStage("r2", stage.Running, time.Second)
}

func TestSourceWorkerMalformedValuesAffectOnlyTheirTask(t *testing.T) {
	e := startSW(t, 4)
	for _, n := range []string{"m1", "m2", "m3"} {
		e.putTask(n, stage.Running)
	}
	for _, n := range []string{"m1", "m2", "m3"} {
		e.waitStage(n, stage.Running, 2*time.Second)
	}
	keys := ha.Keys{Prefix: "/dm"}
	e.putRaw(keys.SubTaskStage(testSource, "m2"), `{"expect":"Runing","source":"mysql-01","task":"m2"`)
	e.putRaw(keys.SubTaskConfig(testSource, "m4"), `{not json`)
	e.putRaw(keys.SubTaskStage(testSource, "m4"), `{"expect":"Running","source":"mysql-01","task":"m4"}`)
	e.putRaw(keys.SubTaskStage(testSource, "bad name!"), `{"expect":"Running","source":"mysql-01","task":"bad name!"}`)

	testutil.Eventually(t, 2*time.Second, "errors reported for m2, m4 and the invalid name", func() error {
		return errors.Join(e.checkTaskError("m2", CodeSubTaskValueMalformed, true),
			e.checkTaskError("m4", CodeSubTaskValueMalformed, true), e.checkTaskError("bad name!", CodeSubTaskNameInvalid, true))
	})
	if e.sw.SubTask("m4") != nil {
		t.Fatal("a task whose config is malformed must not be created")
	}
	// m2 keeps its state; the others still follow their stages.
	e.waitStage("m2", stage.Running, time.Second)
	e.setStage("m1", stage.Paused)
	e.waitStage("m1", stage.Paused, time.Second)
	e.waitStage("m3", stage.Running, time.Second)

	// Deleting the key with the invalid name clears its error.
	if _, err := e.master.Client().Delete(e.ctx(), keys.SubTaskStage(testSource, "bad name!")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Second, "invalid-name error cleared", func() error {
		return e.checkTaskError("bad name!", CodeSubTaskNameInvalid, false)
	})

	// A fixed value is picked up and the error goes away.
	e.setStage("m2", stage.Paused)
	e.waitStage("m2", stage.Paused, time.Second)
	testutil.Eventually(t, time.Second, "m2 error cleared", func() error { return e.checkTaskError("m2", CodeSubTaskValueMalformed, false) })
	var st SubTaskStatus
	for _, s := range e.sw.Status().SubTasks {
		if s.Name == "m2" {
			st = s
		}
	}
	if len(st.Errors) != 0 {
		t.Fatalf("m2 still shows errors: %+v", st.Errors)
	}
}

func TestSourceWorkerInvalidConfigReported(t *testing.T) {
	e := startSW(t, 2)
	bad := taskConfig("v1")
	bad.TaskMode = config.ModeAll // Dump and Load are not in the test factory
	if _, err := e.master.PutSubTask(e.ctx(), bad, ha.Stage{Expect: stage.Running, Source: testSource, Task: "v1"}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Second, "invalid config reported", func() error { return e.checkTaskError("v1", CodeSubTaskConfigInvalid, true) })
	for _, te := range e.sw.Status().Errors {
		if te.Task == "v1" && !strings.Contains(te.Message, "Dump") {
			t.Fatalf("error should name the missing units: %s", te.Message)
		}
	}
	if e.sw.SubTask("v1") != nil {
		t.Fatal("a subtask with an unsupported mode must not be created")
	}
}

func TestSourceWorkerAutoResume(t *testing.T) {
	e := startSW(t, 2)
	e.putTask("a1", stage.Running)
	e.putTask("a2", stage.Running)
	e.putTask("a3", stage.Running)
	for _, n := range []string{"a1", "a2", "a3"} {
		e.waitStage(n, stage.Running, time.Second)
	}

	// a1: resumable errors are auto-resumed, with growing delays.
	var delays []time.Duration
	u := e.factory.latest("a1")
	for i := range 4 {
		u.send(t, errs.New("test-conn-lost", true, "connection lost"))
		failed := time.Now()
		testutil.Eventually(t, 5*time.Second, fmt.Sprintf("a1 auto-resumed %d times", i+1), func() error {
			if n := u.count("Resume"); n != i+1 || !e.settled("a1", stage.Running) {
				return fmt.Errorf("%d resumes, reported %s, unit %s", n, e.stageOf("a1"), u.State())
			}
			return nil
		})
		delays = append(delays, time.Since(failed))
	}
	if !(delays[3] > delays[0]) || delays[3] < 100*time.Millisecond {
		t.Fatalf("auto-resume delays did not grow: %v", delays)
	}

	// a2: a non-resumable error stays, visible.
	e.factory.latest("a2").send(t, errs.New("test-bad-ddl", false, "unsupported DDL"))
	testutil.Eventually(t, time.Second, "a2 paused", func() error {
		if got := e.stageOf("a2"); got != stage.Paused {
			return fmt.Errorf("a2 reported %s", got)
		}
		return nil
	})
	time.Sleep(400 * time.Millisecond) // longer than the largest backoff: a resume would have happened
	if e.stageOf("a2") != stage.Paused || e.factory.latest("a2").count("Resume") != 0 {
		t.Fatal("a non-resumable error was auto-resumed")
	}
	found := false
	for _, s := range e.sw.Status().SubTasks {
		if s.Name == "a2" && len(s.Errors) == 1 && s.Errors[0].Code == "test-bad-ddl" && !s.Errors[0].Resumable {
			found = true
		}
	}
	if !found {
		t.Fatalf("a2's error is not visible in status: %+v", e.sw.Status().SubTasks)
	}

	// a3: an explicit pause is never auto-resumed, even after a resumable error.
	e.setStage("a3", stage.Paused)
	e.waitStage("a3", stage.Paused, time.Second)
	time.Sleep(400 * time.Millisecond)
	if e.stageOf("a3") != stage.Paused {
		t.Fatal("an explicitly paused subtask was auto-resumed")
	}
	// The operator resumes a2 explicitly: a new stage revision is a command.
	e.setStage("a2", stage.Running)
	e.waitStage("a2", stage.Running, time.Second)
}

func TestSourceWorkerValidatorStage(t *testing.T) {
	e := startSW(t, 2)
	e.putTask("w1", stage.Running)
	e.waitStage("w1", stage.Running, time.Second)
	put := func(expect stage.Stage) {
		if _, err := e.master.PutValidatorStage(e.ctx(), ha.Stage{Expect: expect, Source: testSource, Task: "w1"}); err != nil {
			t.Fatal(err)
		}
	}
	validatorStage := func() stage.Stage {
		if st := e.sw.SubTask("w1"); st != nil && st.Validator() != nil {
			return st.Validator().Stage()
		}
		return stage.Stopped
	}
	put(stage.Running)
	waitValidator := func(what string, want stage.Stage) {
		t.Helper()
		testutil.Eventually(t, time.Second, what, func() error {
			if got := validatorStage(); got != want {
				return fmt.Errorf("validator %s", got)
			}
			return nil
		})
	}
	waitValidator("validator running", stage.Running)
	put(stage.Stopped)
	waitValidator("validator stopped", stage.Stopped)
	put(stage.Running)
	waitValidator("validator running again", stage.Running)
	if _, err := e.master.DeleteValidatorStage(e.ctx(), testSource, "w1"); err != nil {
		t.Fatal(err)
	}
	waitValidator("validator stopped on delete", stage.Stopped)
}

func TestSourceWorkerConfigUpdate(t *testing.T) {
	e := startSW(t, 2)
	e.putTask("u1", stage.Running)
	e.waitStage("u1", stage.Running, time.Second)
	cfg := taskConfig("u1")
	cfg.Syncer.Batch = 500
	if _, err := e.master.PutSubTaskConfig(e.ctx(), cfg); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Second, "config applied in place", func() error { return e.checkBatch("u1", 500) })
	if e.factory.built("u1") != 1 {
		t.Fatal("a unit that supports Update must not be recreated")
	}

	// A unit that cannot update is recreated with the new config.
	e.factory.latest("u1").set(func(u *testUnit) { u.updateErr = unit.ErrUpdateUnsupported })
	cfg.Syncer.Batch = 700
	if _, err := e.master.PutSubTaskConfig(e.ctx(), cfg); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Second, "subtask recreated", func() error {
		if n := e.factory.built("u1"); n != 2 {
			return fmt.Errorf("%d units built", n)
		}
		return e.checkBatch("u1", 700)
	})
}

func TestSourceWorkerRandomStageFlips(t *testing.T) {
	e := startSW(t, 8)
	const tasks = 20
	want := make(map[string]stage.Stage)
	for i := range tasks {
		n := fmt.Sprintf("f%02d", i)
		e.putTask(n, stage.Running)
		want[n] = stage.Running
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n := fmt.Sprintf("f%02d", rng.IntN(tasks))
		s := stage.Running
		if rng.IntN(2) == 0 {
			s = stage.Paused
		}
		e.setStage(n, s)
		want[n] = s
		if rng.IntN(4) == 0 {
			time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
		}
	}
	for n, s := range want {
		e.waitStage(n, s, 5*time.Second)
	}
	for n, s := range want {
		if !e.settled(n, s) {
			t.Fatalf("%s: reported %s, expected %s", n, e.stageOf(n), s)
		}
		checkProtocol(t, e.factory.latest(n))
	}
}

func TestSourceWorkerScale(t *testing.T) {
	if testing.Short() {
		t.Skip("scale test")
	}
	if raceEnabled {
		t.Skip("timing-bound: the race detector slows it several times; `make test-unit` runs it without -race")
	}
	e := startSW(t, 8)
	const n = 1000
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("s%04d", i)
	}
	e.putMany(names, stage.Running)
	start := time.Now()
	testutil.Eventually(t, 5*time.Second, "1000 subtasks Running", func() error { return e.checkAllSettled(names, stage.Running) })
	t.Logf("1000 subtasks Running %s after their keys were written", time.Since(start))

	e.setMany(names, stage.Paused)
	start = time.Now()
	testutil.Eventually(t, 5*time.Second, "1000 subtasks Paused", func() error { return e.checkAllSettled(names, stage.Paused) })
	t.Logf("1000 stage flips reconciled in %s", time.Since(start))
}

// putMany writes config and stage of many tasks concurrently.
func (e *swEnv) putMany(names []string, expect stage.Stage) {
	e.forMany(names, func(n string) error {
		_, err := e.master.PutSubTask(context.Background(), taskConfig(n), ha.Stage{Expect: expect, Source: testSource, Task: n})
		return err
	})
}

// setMany writes the stage of many tasks concurrently.
func (e *swEnv) setMany(names []string, expect stage.Stage) {
	e.forMany(names, func(n string) error {
		_, err := e.master.PutSubTaskStage(context.Background(), ha.Stage{Expect: expect, Source: testSource, Task: n})
		return err
	})
}

// forMany runs put for every name, 50 names per writer goroutine.
func (e *swEnv) forMany(names []string, put func(name string) error) {
	e.t.Helper()
	var wg sync.WaitGroup
	for i := 0; i < len(names); i += 50 {
		batch := names[i:min(i+50, len(names))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, n := range batch {
				if err := put(n); err != nil {
					e.t.Errorf("write keys of %s: %v", n, err)
				}
			}
		}()
	}
	wg.Wait()
}

// checkAllSettled is nil when every task in names has settled in stage
// want; otherwise it counts those that have not.
func (e *swEnv) checkAllSettled(names []string, want stage.Stage) error {
	c := 0
	for _, n := range names {
		if !e.settled(n, want) {
			c++
		}
	}
	if c != 0 {
		return fmt.Errorf("%d of %d not settled in %s", c, len(names), want)
	}
	return nil
}

func TestSourceWorkerCloseAndKillStopEverything(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			e := startSW(t, 2)
			e.putTask("k1", stage.Running)
			e.putTask("k2", stage.Running)
			e.waitStage("k1", stage.Running, time.Second)
			e.waitStage("k2", stage.Running, time.Second)
			want := "Close"
			if kill {
				want = "Kill"
				e.sw.Kill()
			} else {
				e.sw.Close()
			}
			for _, n := range []string{"k1", "k2"} {
				u := e.factory.latest(n)
				if u.State() != usClosed || u.count(want) != 1 {
					t.Fatalf("%s: want one %s, calls %v", n, want, u.Calls())
				}
			}
			if len(e.sw.Status().SubTasks) != 0 {
				t.Fatal("subtasks left after stop")
			}
		})
	}
}

// BenchmarkStageToAction measures the time from writing a stage key to the
// subtask reaching that stage.
func BenchmarkStageToAction(b *testing.B) {
	e := startSW(b, 8)
	e.putTask("b1", stage.Running)
	e.waitStage("b1", stage.Running, 10*time.Second)
	b.ResetTimer()
	for i := range b.N {
		want := stage.Paused
		if i%2 == 1 {
			want = stage.Running
		}
		e.setStage("b1", want)
		// What is measured: a tight spin, not testutil's 10 ms poll, which
		// would be most of each measurement.
		for !e.settled("b1", want) {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

func TestSourceWorkerUnknownConfigFieldIsAWarning(t *testing.T) {
	e := startSW(t, 2)
	keys := e.master.Keys()
	e.putRaw(keys.SubTaskConfig(testSource, "u1"), `{"name":"u1","source-id":"`+testSource+`","task-mode":"incremental",`+
		`"meta":{"binlog-name":"mariadb-bin.000001"},"target-database":{"host":"127.0.0.1"},"syncer":{"batchh":5},"x-extra":1}`)
	e.putRaw(keys.SubTaskStage(testSource, "u1"), `{"expect":"Running","x-stage-extra":"?"}`)
	e.waitStage("u1", stage.Running, 5*time.Second)
	testutil.Eventually(t, time.Second, "config-unknown-field warning in status", func() error {
		return e.checkTaskError("u1", CodeConfigUnknownField, true)
	})
	st := e.sw.Status()
	for _, te := range st.Errors {
		if te.Task == "u1" && te.Code == CodeConfigUnknownField {
			for _, path := range []string{"syncer.batchh", "x-extra", "x-stage-extra"} {
				if !strings.Contains(te.Message, path) {
					t.Errorf("warning %q does not name %s", te.Message, path)
				}
			}
		}
	}
	for _, s := range st.SubTasks {
		if s.Name == "u1" && len(s.Errors) != 0 {
			t.Errorf("the warning must not be one of the running subtask's errors: %+v", s.Errors)
		}
	}

	// The same task rewritten without the unknown fields: the warning goes.
	e.putRaw(keys.SubTaskStage(testSource, "u1"), `{"expect":"Running"}`)
	e.putRaw(keys.SubTaskConfig(testSource, "u1"), `{"name":"u1","source-id":"`+testSource+`","task-mode":"incremental",`+
		`"meta":{"binlog-name":"mariadb-bin.000001"},"target-database":{"host":"127.0.0.1"}}`)
	testutil.Eventually(t, 5*time.Second, "warning cleared", func() error { return e.checkTaskError("u1", CodeConfigUnknownField, false) })
}

func TestSourceWorkerUnknownRelayStageFieldIsAWarning(t *testing.T) {
	e := startSW(t, 2)
	e.sw.EnableRelay(e.ctx())
	key := e.master.Keys().RelayStage(testSource)
	e.putRaw(key, `{"expect":"Running","x-relay-extra":1}`)
	// checkWarned is nil when the relay-stage warning is listed exactly
	// when want is true.
	checkWarned := func(want bool) error {
		warned := false
		for _, te := range e.sw.Status().Errors {
			if te.Task == "" && te.Code == CodeConfigUnknownField && strings.Contains(te.Message, "x-relay-extra") &&
				strings.Contains(te.Message, key) {
				warned = true
			}
		}
		if warned != want {
			return fmt.Errorf("status errors %s", errorList(e.sw.Status().Errors))
		}
		return nil
	}
	testutil.Eventually(t, 5*time.Second, "config-unknown-field warning for the relay stage", func() error { return checkWarned(true) })
	e.putRaw(key, `{"expect":"Running"}`)
	testutil.Eventually(t, 5*time.Second, "warning cleared", func() error { return checkWarned(false) })
}
