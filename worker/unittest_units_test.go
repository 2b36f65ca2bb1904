package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
)

// unitState is where a testUnit is in the unit protocol.
type unitState string

const (
	usNew      unitState = "new"
	usIdle     unitState = "idle"     // initialised, never run
	usRunning  unitState = "running"  // inside Process or Resume
	usCanceled unitState = "canceled" // returned because ctx was cancelled; Pause is due
	usPaused   unitState = "paused"
	usFailed   unitState = "failed"
	usFinished unitState = "finished"
	usClosed   unitState = "closed"
)

// testUnit is a Unit the tests drive. With steps > 0 Process/Resume finish
// after that many steps; with steps == 0 they block until ctx is cancelled
// or a command arrives (send): a nil command finishes, an error fails. It
// records every call and every breach of the unit protocol.
type testUnit struct {
	typ   unit.Type
	steps int
	cmds  chan error

	mu sync.Mutex
	// guarded by mu:
	fresh      bool
	initErr    error
	freshErr   error
	updateErr  error
	state      unitState
	calls      []string
	violations []string
	cfg        *config.SubTaskConfig
	progress   int
}

func newTestUnit(t unit.Type, steps int) *testUnit {
	return &testUnit{typ: t, steps: steps, cmds: make(chan error), fresh: true, state: usNew}
}

func (u *testUnit) Type() unit.Type { return u.typ }

// enter records a call and checks that the unit is in one of the states the
// protocol allows for it.
func (u *testUnit) enter(call string, allowed ...unitState) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls = append(u.calls, call)
	for _, s := range allowed {
		if u.state == s {
			return
		}
	}
	u.violations = append(u.violations, fmt.Sprintf("%s %s in state %s", u.typ, call, u.state))
}

func (u *testUnit) setState(s unitState) {
	u.mu.Lock()
	u.state = s
	u.mu.Unlock()
}

func (u *testUnit) Init(context.Context) error {
	u.enter("Init", usNew)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.initErr != nil {
		return u.initErr
	}
	u.state = usIdle
	return nil
}

func (u *testUnit) IsFreshTask(context.Context) (bool, error) {
	u.enter("IsFreshTask", usIdle)
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.fresh, u.freshErr
}

func (u *testUnit) Process(ctx context.Context) unit.Result {
	u.enter("Process", usIdle)
	return u.run(ctx)
}

func (u *testUnit) Resume(ctx context.Context) unit.Result {
	u.enter("Resume", usPaused, usFailed)
	return u.run(ctx)
}

func (u *testUnit) run(ctx context.Context) unit.Result {
	u.setState(usRunning)
	if u.steps > 0 {
		for range u.steps {
			if ctx.Err() != nil {
				u.setState(usCanceled)
				return unit.Result{IsCanceled: true}
			}
			u.mu.Lock()
			u.progress++
			u.mu.Unlock()
		}
		u.setState(usFinished)
		return unit.Result{}
	}
	select {
	case <-ctx.Done():
		u.setState(usCanceled)
		return unit.Result{IsCanceled: true}
	case err := <-u.cmds:
		if err == nil {
			u.setState(usFinished)
			return unit.Result{}
		}
		u.setState(usFailed)
		return unit.Result{Errors: []errs.Error{errs.Entry(err, time.Now())}}
	}
}

func (u *testUnit) Pause() {
	u.enter("Pause", usCanceled)
	u.setState(usPaused)
}

func (u *testUnit) Update(_ context.Context, cfg *config.SubTaskConfig) error {
	u.enter("Update", usPaused, usFailed, usIdle)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.updateErr != nil {
		return u.updateErr
	}
	u.cfg = cfg
	return nil
}

func (u *testUnit) Close() {
	u.enter("Close", usNew, usIdle, usPaused, usFailed, usFinished, usCanceled)
	u.setState(usClosed)
}

func (u *testUnit) Kill() {
	u.enter("Kill", usNew, usIdle, usPaused, usFailed, usFinished, usCanceled)
	u.setState(usClosed)
}

func (u *testUnit) Status() any {
	u.mu.Lock()
	defer u.mu.Unlock()
	return map[string]any{"progress": u.progress, "state": string(u.state)}
}

// send hands a command to a blocked Process/Resume.
func (u *testUnit) send(t *testing.T, err error) {
	t.Helper()
	select {
	case u.cmds <- err:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s unit did not take the command %v: not running", u.typ, err)
	}
}

func (u *testUnit) Calls() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.calls...)
}

func (u *testUnit) count(call string) int {
	n := 0
	for _, c := range u.Calls() {
		if c == call {
			n++
		}
	}
	return n
}

func (u *testUnit) State() unitState {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.state
}

func (u *testUnit) Violations() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.violations...)
}

func (u *testUnit) set(f func(u *testUnit)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f(u)
}

// testValidator runs one goroutine between Start and Stop.
type testValidator struct {
	mu sync.Mutex
	// guarded by mu:
	stop chan struct{}
	done chan struct{}
}

func (v *testValidator) Start(context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.stop, v.done = make(chan struct{}), make(chan struct{})
	go func(stop, done chan struct{}) {
		defer close(done)
		<-stop
	}(v.stop, v.done)
	return nil
}

func (v *testValidator) Stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.stop == nil {
		return
	}
	close(v.stop)
	<-v.done
	v.stop = nil
}

func (v *testValidator) Stage() stage.Stage {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.stop == nil {
		return stage.Stopped
	}
	return stage.Running
}

// testValidatorCheckpoint is the checkpoint every test validator shows.
const testValidatorCheckpoint = "mariadb-bin.000002:99"

func (v *testValidator) Status() unit.ValidatorStatus {
	return unit.ValidatorStatus{Stage: v.Stage(), Pending: 3, Errors: unit.ValidationErrorCounts{New: 2, Ignored: 1},
		Checkpoint: testValidatorCheckpoint}
}

// testFactory builds the given units (one per type) and, when validators
// is not nil, records every validator it creates.
type testFactory struct {
	*unit.Registry
	mu sync.Mutex
	// guarded by mu:
	builds     map[unit.Type]int
	validators []*testValidator
}

func newTestFactory(withValidator bool, units ...*testUnit) *testFactory {
	f := &testFactory{builds: make(map[unit.Type]int)}
	ctors := make(map[unit.Type]unit.Constructor)
	for _, u := range units {
		ctors[u.typ] = func(*config.SubTaskConfig, *zap.Logger) (unit.Unit, error) {
			f.mu.Lock()
			f.builds[u.typ]++
			f.mu.Unlock()
			return u, nil
		}
	}
	var vc unit.ValidatorConstructor
	if withValidator {
		vc = func(*config.SubTaskConfig, unit.SyncSource, *zap.Logger) (unit.Validator, error) {
			v := &testValidator{}
			f.mu.Lock()
			f.validators = append(f.validators, v)
			f.mu.Unlock()
			return v, nil
		}
	}
	f.Registry = unit.NewRegistry(ctors, vc)
	return f
}

func (f *testFactory) Builds(t unit.Type) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.builds[t]
}

func (f *testFactory) Validators() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.validators)
}

func testConfig(mode string) *config.SubTaskConfig {
	return &config.SubTaskConfig{Name: "task1", SourceID: "mysql-01", TaskMode: mode, MetaSchema: "dm_meta"}
}

// unitWait is how long the subtask and checker tests wait for a unit, a
// stage or the checker.
const unitWait = 10 * time.Second

// checkUnitState is nil when u is in state want.
func checkUnitState(u *testUnit, want unitState) error {
	if u == nil {
		return errors.New("no unit built yet")
	}
	if got := u.State(); got != want {
		return fmt.Errorf("%s unit %s", u.typ, got)
	}
	return nil
}

// waitUnit waits up to unitWait for u to be in state want; a timeout names
// what and u's state at the deadline.
func waitUnit(t testing.TB, u *testUnit, want unitState, what string) {
	t.Helper()
	testutil.Eventually(t, unitWait, what, func() error { return checkUnitState(u, want) })
}

// waitStage waits up to unitWait for s to be in stage want; a timeout names
// the stage and the unit state at the deadline.
func waitStage(t testing.TB, s *SubTask, want stage.Stage) {
	t.Helper()
	testutil.Eventually(t, unitWait, "stage "+string(want), func() error {
		if got := s.Stage(); got != want {
			return fmt.Errorf("stage %s", got)
		}
		return nil
	})
}

func checkProtocol(t *testing.T, units ...*testUnit) {
	t.Helper()
	for _, u := range units {
		if v := u.Violations(); len(v) > 0 {
			t.Errorf("%s unit protocol violations: %v", u.typ, v)
		}
	}
}
