package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
)

func allUnits(steps int) (dump, load, sync *testUnit) {
	return newTestUnit(unit.TypeDump, steps), newTestUnit(unit.TypeLoad, steps), newTestUnit(unit.TypeSync, steps)
}

func TestSubTaskPipelineHandsOverAndFinishes(t *testing.T) {
	tests := []struct {
		mode string
		want []unit.Type
	}{
		{"full", []unit.Type{unit.TypeDump, unit.TypeLoad}},
		{"all", []unit.Type{unit.TypeDump, unit.TypeLoad, unit.TypeSync}},
		{"incremental", []unit.Type{unit.TypeSync}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			dump, load, sync := allUnits(3)
			byType := map[unit.Type]*testUnit{unit.TypeDump: dump, unit.TypeLoad: load, unit.TypeSync: sync}
			s := NewSubTask(testConfig(tt.mode), newTestFactory(false, dump, load, sync), zaptest.NewLogger(t))
			if s.Stage() != stage.New {
				t.Fatalf("new subtask in stage %s", s.Stage())
			}
			s.Run(context.Background())
			waitStage(t, s, stage.Finished)
			last := tt.want[len(tt.want)-1]
			if s.CurrentUnit() != last {
				t.Fatalf("finished at unit %s, want %s", s.CurrentUnit(), last)
			}
			for _, typ := range tt.want {
				u := byType[typ]
				// Every unit is asked for saved progress: the later ones by
				// the scan, the first one before its precheck.
				want := []string{"Init", "IsFreshTask", "Process"}
				if typ != last {
					want = append(want, "Close") // handed over: released at once
				}
				if got := u.Calls(); !reflect.DeepEqual(got, want) {
					t.Errorf("%s calls %v, want %v", typ, got, want)
				}
				if p := u.Status().(map[string]any)["progress"]; p != 3 {
					t.Errorf("%s progress %v, want 3", typ, p)
				}
			}
			s.Close()
			if n := byType[last].count("Close"); n != 1 {
				t.Fatalf("last unit closed %d times, want 1", n)
			}
			checkProtocol(t, dump, load, sync)
		})
	}
}

func TestSubTaskStartsAtLastUnitWithProgress(t *testing.T) {
	tests := []struct {
		name       string
		fresh      [3]bool // dump, load, sync
		start      unit.Type
		wantScans  []unit.Type
		wantClosed []unit.Type // skipped units, closed at once
	}{
		{"all fresh", [3]bool{true, true, true}, unit.TypeDump, []unit.Type{unit.TypeSync, unit.TypeLoad, unit.TypeDump}, nil},
		{"load has progress", [3]bool{false, false, true}, unit.TypeLoad, []unit.Type{unit.TypeSync, unit.TypeLoad}, []unit.Type{unit.TypeDump}},
		{"sync has progress", [3]bool{false, false, false}, unit.TypeSync, []unit.Type{unit.TypeSync}, []unit.Type{unit.TypeDump, unit.TypeLoad}},
		{"only dump has progress", [3]bool{false, true, true}, unit.TypeDump, []unit.Type{unit.TypeSync, unit.TypeLoad, unit.TypeDump}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dump, load, sync := allUnits(0)
			units := []*testUnit{dump, load, sync}
			for i, u := range units {
				u.set(func(u *testUnit) { u.fresh = tt.fresh[i] })
			}
			s := NewSubTask(testConfig("all"), newTestFactory(false, units...), zaptest.NewLogger(t))
			defer s.Close()
			s.Run(context.Background())
			var started *testUnit
			for _, u := range units {
				if u.typ == tt.start {
					started = u
				}
			}
			waitUnit(t, started, usRunning, "start unit running")
			if s.CurrentUnit() != tt.start || s.Stage() != stage.Running {
				t.Fatalf("at %s in %s, want %s Running", s.CurrentUnit(), s.Stage(), tt.start)
			}
			var scans, closed []unit.Type
			for _, u := range []*testUnit{sync, load, dump} {
				if u.count("IsFreshTask") > 0 {
					scans = append(scans, u.typ)
				}
			}
			for _, u := range units {
				if u.count("Close") > 0 {
					closed = append(closed, u.typ)
				}
				if u.count("Process") > 0 && u != started {
					t.Errorf("%s processed, but the pipeline starts at %s", u.typ, tt.start)
				}
			}
			if !slices.Equal(scans, tt.wantScans) || !slices.Equal(closed, tt.wantClosed) {
				t.Fatalf("scanned %v closed %v, want %v %v", scans, closed, tt.wantScans, tt.wantClosed)
			}
			checkProtocol(t, units...)
		})
	}
}

func TestSubTaskFailurePausesWithError(t *testing.T) {
	tests := []struct {
		name          string
		err           error
		wantCode      string
		wantResumable bool
	}{
		{"resumable", errs.New("sync-exec", true, "deadlock on `db`.`t`"), "sync-exec", true},
		{"classified cause", fmt.Errorf("dial target: %w", syscall.ECONNREFUSED), errs.CodeInternal, true},
		{"not resumable", errs.New("sync-ddl-unsupported", false, "unsupported DDL"), "sync-ddl-unsupported", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newTestUnit(unit.TypeSync, 0)
			s := NewSubTask(testConfig("incremental"), newTestFactory(false, u), zaptest.NewLogger(t))
			defer s.Close()
			s.Run(context.Background())
			waitUnit(t, u, usRunning, "unit running")
			u.send(t, tt.err)
			waitStage(t, s, stage.Paused)
			r := s.Result()
			if len(r.Errors) != 1 || r.Errors[0].Code != tt.wantCode || r.Errors[0].Resumable != tt.wantResumable ||
				r.Errors[0].Message != tt.err.Error() {
				t.Fatalf("result %+v, want one %q error resumable=%v", r, tt.wantCode, tt.wantResumable)
			}
			if st := s.Status(); len(st.Errors) != 1 || st.Stage != stage.Paused {
				t.Fatalf("status %+v", st)
			}
			if s.ExplicitlyPaused() {
				t.Fatal("paused by an error counts as explicit")
			}

			err := s.AutoResume(context.Background())
			if !tt.wantResumable {
				if !errors.Is(err, ErrNotAutoResumable) || s.Stage() != stage.Paused {
					t.Fatalf("AutoResume of a non-resumable error: %v, stage %s", err, s.Stage())
				}
				// The operator can still resume it explicitly.
				err = s.Resume(context.Background())
			}
			if err != nil {
				t.Fatalf("resume: %v", err)
			}
			waitUnit(t, u, usRunning, "unit running again")
			if s.Stage() != stage.Running || s.Result() != nil || len(s.Status().Errors) != 0 {
				t.Fatalf("after resume: stage %s result %+v", s.Stage(), s.Result())
			}
			if u.count("Resume") != 1 || u.count("Process") != 1 {
				t.Fatalf("calls %v: want one Process and one Resume", u.Calls())
			}
			checkProtocol(t, u)
		})
	}
}

func TestSubTaskExplicitPauseResume(t *testing.T) {
	u := newTestUnit(unit.TypeSync, 0)
	s := NewSubTask(testConfig("incremental"), newTestFactory(false, u), zaptest.NewLogger(t))
	defer s.Close()
	ctx := context.Background()

	// Pause of a New subtask: Paused without running; Resume starts it.
	if err := s.Pause(ctx); err != nil || s.Stage() != stage.Paused || !s.ExplicitlyPaused() {
		t.Fatalf("pause new: %v stage %s explicit %v", err, s.Stage(), s.ExplicitlyPaused())
	}
	if err := s.Resume(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	waitUnit(t, u, usRunning, "unit running")

	if err := s.Pause(ctx); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if s.Stage() != stage.Paused || u.State() != usPaused || !s.ExplicitlyPaused() || s.Result() != nil {
		t.Fatalf("after pause: stage %s unit %s explicit %v result %+v", s.Stage(), u.State(), s.ExplicitlyPaused(), s.Result())
	}
	if err := s.AutoResume(ctx); !errors.Is(err, ErrNotAutoResumable) {
		t.Fatalf("AutoResume of an explicit pause: %v", err)
	}
	if err := s.Resume(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	waitUnit(t, u, usRunning, "unit resumed")
	if s.Stage() != stage.Running || s.ExplicitlyPaused() {
		t.Fatalf("after resume: stage %s explicit %v", s.Stage(), s.ExplicitlyPaused())
	}
	if err := s.Resume(ctx); !errors.Is(err, ErrNotPaused) {
		t.Fatalf("Resume of a running subtask: %v", err)
	}

	// A pause requested while paused by a resumable error is remembered.
	u.send(t, errs.New("sync-exec", true, "deadlock"))
	waitStage(t, s, stage.Paused)
	if err := s.Pause(ctx); err != nil || !s.ExplicitlyPaused() {
		t.Fatalf("pause of an errored subtask: %v explicit %v", err, s.ExplicitlyPaused())
	}
	if err := s.AutoResume(ctx); !errors.Is(err, ErrNotAutoResumable) {
		t.Fatalf("AutoResume after explicit pause: %v", err)
	}
	want := []string{"Init", "IsFreshTask", "Process", "Pause", "Resume"}
	if got := u.Calls(); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	checkProtocol(t, u)

	s.Close()
	if err := s.Pause(ctx); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Pause after Close: %v", err)
	}
	if err := s.Resume(ctx); !errors.Is(err, ErrNotPaused) {
		t.Fatalf("Resume after Close: %v", err)
	}
}

func TestSubTaskPauseResumeAfterHandOver(t *testing.T) {
	// The unit handed over to is paused and resumed like the first one, and
	// finishing it finishes the subtask.
	dump, load := newTestUnit(unit.TypeDump, 0), newTestUnit(unit.TypeLoad, 0)
	s := NewSubTask(testConfig("full"), newTestFactory(false, dump, load), zaptest.NewLogger(t))
	defer s.Close()
	s.Run(context.Background())
	waitUnit(t, dump, usRunning, "dump running")
	dump.send(t, nil)
	waitUnit(t, load, usRunning, "load running")
	if err := s.Pause(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitUnit(t, load, usRunning, "load resumed")
	load.send(t, nil)
	waitStage(t, s, stage.Finished)
	if got, want := load.Calls(), []string{"Init", "IsFreshTask", "Process", "Pause", "Resume"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("load calls %v, want %v", got, want)
	}
	if err := s.Pause(context.Background()); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Pause of a finished subtask: %v", err)
	}
	checkProtocol(t, dump, load)
}

func TestSubTaskUpdate(t *testing.T) {
	tests := []struct {
		name      string
		pause     bool
		mode      string // new task mode
		updateErr error
		wantErr   error
	}{
		{"running", false, "incremental", nil, ErrNotPaused},
		{"paused", true, "incremental", nil, nil},
		{"unit cannot update", true, "incremental", fmt.Errorf("sync: new route rules: %w", unit.ErrUpdateUnsupported), unit.ErrUpdateUnsupported},
		{"mode change", true, "all", nil, unit.ErrUpdateUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newTestUnit(unit.TypeSync, 0)
			u.set(func(u *testUnit) { u.updateErr = tt.updateErr })
			s := NewSubTask(testConfig("incremental"), newTestFactory(false, u), zaptest.NewLogger(t))
			defer s.Close()
			ctx := context.Background()
			s.Run(ctx)
			waitUnit(t, u, usRunning, "unit running")
			if tt.pause {
				if err := s.Pause(ctx); err != nil {
					t.Fatal(err)
				}
			}
			cfg := testConfig(tt.mode)
			cfg.Syncer.Batch = 500
			err := s.Update(ctx, cfg)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("update: %v", err)
				}
				if got := s.Config(); !reflect.DeepEqual(got, cfg) || got == cfg {
					t.Fatalf("Config() = %+v, want a copy of %+v", got, cfg)
				}
				if u.count("Update") != 1 {
					t.Fatalf("unit calls %v: want one Update", u.Calls())
				}
			} else {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("update: %v, want %v", err, tt.wantErr)
				}
				if s.Config().Syncer.Batch == 500 {
					t.Fatal("config changed by a failed update")
				}
			}
			checkProtocol(t, u)
		})
	}
}

func TestSubTaskUpdateBeforeRunRebuilds(t *testing.T) {
	dump, load, sync := allUnits(0)
	f := newTestFactory(false, dump, load, sync)
	s := NewSubTask(testConfig("incremental"), f, zaptest.NewLogger(t))
	if err := s.Update(context.Background(), testConfig("full")); err != nil {
		t.Fatalf("update of a new subtask: %v", err)
	}
	if f.Builds(unit.TypeDump) != 1 || f.Builds(unit.TypeLoad) != 1 || sync.count("Close") != 1 {
		t.Fatalf("builds dump=%d load=%d, sync calls %v", f.Builds(unit.TypeDump), f.Builds(unit.TypeLoad), sync.Calls())
	}
	if s.CurrentUnit() != unit.TypeDump {
		t.Fatalf("current unit %s after rebuild", s.CurrentUnit())
	}
	s.Close()
	if dump.count("Close") != 1 || load.count("Close") != 1 {
		t.Fatalf("rebuilt units not closed: %v %v", dump.Calls(), load.Calls())
	}
}

func TestSubTaskBuildAndInitErrors(t *testing.T) {
	t.Run("unsupported mode", func(t *testing.T) {
		sync := newTestUnit(unit.TypeSync, 0)
		s := NewSubTask(testConfig("all"), newTestFactory(false, sync), zaptest.NewLogger(t))
		defer s.Close()
		s.Run(context.Background())
		if s.Stage() != stage.Paused {
			t.Fatalf("stage %s, want Paused", s.Stage())
		}
		r := s.Result()
		if len(r.Errors) != 1 || r.Errors[0].Code != unit.CodeTaskModeUnsupported || r.Errors[0].Resumable {
			t.Fatalf("result %+v", r)
		}
		if s.CurrentUnit() != "" {
			t.Fatalf("current unit %q without a pipeline", s.CurrentUnit())
		}
		if err := s.Resume(context.Background()); errs.Code(err) != unit.CodeTaskModeUnsupported || s.Stage() != stage.Paused {
			t.Fatalf("resume: %v, stage %s", err, s.Stage())
		}
	})
	t.Run("init error", func(t *testing.T) {
		dump, load, sync := allUnits(0)
		load.set(func(u *testUnit) { u.initErr = errs.New("load-config", false, "load: bad config") })
		s := NewSubTask(testConfig("all"), newTestFactory(false, dump, load, sync), zaptest.NewLogger(t))
		defer s.Close()
		s.Run(context.Background())
		waitStage(t, s, stage.Paused)
		r := s.Result()
		if len(r.Errors) != 1 || r.Errors[0].Code != CodeUnitInit || r.Errors[0].Resumable {
			t.Fatalf("result %+v, want one non-resumable %s error", r, CodeUnitInit)
		}
		if err := s.AutoResume(context.Background()); !errors.Is(err, ErrNotAutoResumable) {
			t.Fatalf("AutoResume of a non-resumable init error: %v", err)
		}
		// A target that refuses connections at start is resumable: the
		// checker retries.
		load.set(func(u *testUnit) { u.initErr = fmt.Errorf("connect target: %w", syscall.ECONNREFUSED) })
		if err := s.Resume(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitStage(t, s, stage.Paused)
		if r := s.Result(); len(r.Errors) != 1 || r.Errors[0].Code != CodeUnitInit || !r.Errors[0].Resumable {
			t.Fatalf("result %+v, want one resumable %s error", r, CodeUnitInit)
		}
		load.set(func(u *testUnit) { u.initErr = nil })
		if err := s.AutoResume(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitUnit(t, dump, usRunning, "dump running")
		if dump.count("Init") != 1 || load.count("Init") != 3 || sync.count("Init") != 1 {
			t.Fatalf("init retried wrongly: %v %v %v", dump.Calls(), load.Calls(), sync.Calls())
		}
		checkProtocol(t, dump, load, sync)
	})
}

func TestSubTaskCloseAndKill(t *testing.T) {
	tests := []struct {
		name  string
		kill  bool
		setup func(t *testing.T, s *SubTask, u *testUnit)
	}{
		{"close new", false, func(*testing.T, *SubTask, *testUnit) {}},
		{"close running", false, func(t *testing.T, s *SubTask, u *testUnit) {
			s.Run(context.Background())
			waitUnit(t, u, usRunning, "running")
		}},
		{"kill running", true, func(t *testing.T, s *SubTask, u *testUnit) {
			s.Run(context.Background())
			waitUnit(t, u, usRunning, "running")
		}},
		{"close paused", false, func(t *testing.T, s *SubTask, u *testUnit) {
			s.Run(context.Background())
			waitUnit(t, u, usRunning, "running")
			if err := s.Pause(context.Background()); err != nil {
				t.Fatal(err)
			}
		}},
		{"kill failed", true, func(t *testing.T, s *SubTask, u *testUnit) {
			s.Run(context.Background())
			u.send(t, errors.New("boom"))
			waitStage(t, s, stage.Paused)
		}},
		{"close with validator", false, func(t *testing.T, s *SubTask, u *testUnit) {
			s.Run(context.Background())
			if err := s.StartValidator(context.Background()); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newTestUnit(unit.TypeSync, 0)
			s := NewSubTask(testConfig("incremental"), newTestFactory(true, u), zaptest.NewLogger(t))
			tt.setup(t, s, u)
			call := "Close"
			if tt.kill {
				call = "Kill"
				s.Kill()
			} else {
				s.Close()
			}
			if s.Stage() != stage.Stopped {
				t.Fatalf("stage %s after %s", s.Stage(), call)
			}
			if u.count("Close")+u.count("Kill") != 1 || u.count(call) != 1 {
				t.Fatalf("unit calls %v: want one %s", u.Calls(), call)
			}
			s.Close() // idempotent
			s.Kill()
			if u.count("Close")+u.count("Kill") != 1 {
				t.Fatalf("unit stopped twice: %v", u.Calls())
			}
			if err := s.StartValidator(context.Background()); !errors.Is(err, ErrClosed) {
				t.Fatalf("StartValidator after close: %v", err)
			}
			checkProtocol(t, u)
			goleak.VerifyNone(t)
		})
	}
}

func TestSubTaskStatusAndValidator(t *testing.T) {
	u := newTestUnit(unit.TypeSync, 0)
	f := newTestFactory(true, u)
	s := NewSubTask(testConfig("incremental"), f, zaptest.NewLogger(t))
	defer s.Close()

	b, err := json.Marshal(s.Status())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"task1","stage":"New","unit":"Sync","errors":[],"progress":{"progress":0,"state":"new"},` +
		`"validator":{"stage":"Stopped","pending":0,"errors":{"new":0,"ignored":0,"resolved":0},"rows-checked":0,"lag-seconds":0}}`
	if string(b) != want {
		t.Fatalf("status\n got %s\nwant %s", b, want)
	}
	if s.Validator() != nil {
		t.Fatal("validator before start")
	}

	ctx := context.Background()
	for range 2 {
		if err := s.StartValidator(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if f.Validators() != 1 {
		t.Fatalf("StartValidator twice built %d validators", f.Validators())
	}
	if v := s.Status().Validator; v.Stage != stage.Running || v.Pending != 3 || v.Errors.New != 2 || v.Errors.Ignored != 1 {
		t.Fatalf("validator status %+v", v)
	}
	if s.Validator() == nil {
		t.Fatal("no running validator")
	}
	s.StopValidator()
	s.StopValidator()
	if v := s.Status().Validator; v.Stage != stage.Stopped || s.Validator() != nil {
		t.Fatalf("validator after stop %+v", v)
	}
	if err := s.StartValidator(ctx); err != nil || f.Validators() != 2 {
		t.Fatalf("restart validator: %v, built %d", err, f.Validators())
	}

	noVal := NewSubTask(testConfig("incremental"), newTestFactory(false, newTestUnit(unit.TypeSync, 0)), zaptest.NewLogger(t))
	defer noVal.Close()
	if err := noVal.StartValidator(ctx); errs.Code(err) != unit.CodeValidatorUnsupported {
		t.Fatalf("StartValidator without validator support: %v", err)
	}
}

// TestSubTaskConcurrentOps fires random Pause/Resume/AutoResume calls,
// unit failures and status reads at one subtask, then checks that once it is
// quiet its stage is the unit's real state and the unit protocol was kept.
func TestSubTaskConcurrentOps(t *testing.T) {
	u := newTestUnit(unit.TypeSync, 0)
	s := NewSubTask(testConfig("incremental"), newTestFactory(false, u), zaptest.NewLogger(t))
	defer s.Close()
	ctx := context.Background()
	s.Run(ctx)

	const workers, opsPerWorker = 8, 25 // 200 operations
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for range opsPerWorker {
				switch rng.IntN(5) {
				case 0:
					_ = s.Pause(ctx) // errors are expected when not running
				case 1:
					_ = s.Resume(ctx)
				case 2:
					_ = s.AutoResume(ctx)
				case 3:
					select { // fail the unit if it is running right now
					case u.cmds <- errs.New("sync-exec", rng.IntN(2) == 0, "injected failure"):
					default:
					}
				case 4:
					_ = s.Status()
				}
			}
		}()
	}
	wg.Wait()

	testutil.Eventually(t, unitWait, "stage to match the unit's state", func() error {
		st, us := s.Stage(), u.State()
		switch {
		case st == stage.Running && us == usRunning:
			return nil
		case st == stage.Paused && (us == usPaused || us == usFailed || us == usNew || us == usIdle):
			return nil
		}
		return fmt.Errorf("stage %s, unit %s", st, us)
	})
	checkProtocol(t, u)

	// And it still works: bring it to Running, then Paused.
	if s.Stage() == stage.Paused {
		if err := s.Resume(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitUnit(t, u, usRunning, "unit running")
	if err := s.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Stage() != stage.Paused || u.State() != usPaused {
		t.Fatalf("after final pause: stage %s unit %s", s.Stage(), u.State())
	}
	checkProtocol(t, u)
}
