package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/pkg/supervise"
	"github.com/dmworker/dm-worker/unit"
)

// SubTask runs one subtask: the pipeline of units its task mode needs (dump,
// load, sync) and its optional validator.
//
// Its stage, last error and explicit-pause mark are the shared lifecycle.
// One supervisor goroutine drives the pipeline while it runs (Init of every
// unit, the IsFreshTask scan, Process/Resume of the current unit, hand-over
// to the next unit). Pause, Close and Kill cancel it and wait for it; only
// the supervisor moves the stage away from Running, Resuming or Pausing
// (the lifecycle's compare-and-swap), so the reported stage is always the
// real one.
// Units are only called by the supervisor while it runs and by the
// lifecycle methods (under ops) while it does not, never by both.
//
// All methods are safe for concurrent use.
type SubTask struct {
	lifecycle
	name    string
	factory unit.Factory
	logger  *zap.Logger

	// work is the supervisor goroutine, started, stopped and waited for
	// under the lifecycle's ops, which serialises Run, Pause, Resume,
	// AutoResume, Update, Close and Kill (the supervisor never takes it).
	work *supervise.Work

	// vops serialises StartValidator and StopValidator.
	vops sync.Mutex

	mu sync.Mutex
	// guarded by mu:
	cfg      *config.SubTaskConfig
	buildErr error       // the factory's error for the current config
	units    []unit.Unit // the pipeline in order; nil when buildErr is set
	inited   int         // units[:inited] were initialised successfully
	scanned  bool        // cur was chosen by the IsFreshTask scan
	// prechecked: the factory's precheck passed (or was not needed).
	prechecked bool
	cur        int  // index of the current unit; units[:cur] are closed
	started    bool // units[cur] ran (Process), so it continues with Resume
	valid      unit.Validator
	vRunning   bool                  // valid was started and not stopped by StopValidator
	vcfg       *config.SubTaskConfig // the config valid was started with
}

// NewSubTask returns a SubTask in stage New with the pipeline of cfg's task
// mode built by factory. Errors of the factory surface when the subtask
// runs: it then pauses with a non-resumable error.
func NewSubTask(cfg *config.SubTaskConfig, factory unit.Factory, logger *zap.Logger) *SubTask {
	return newSubTask(nil, cfg, factory, logger)
}

// newSubTask is NewSubTask for an owner whose context life (nil: none)
// ends the subtask's pipeline when it ends, however it was started.
func newSubTask(life context.Context, cfg *config.SubTaskConfig, factory unit.Factory, logger *zap.Logger) *SubTask {
	s := &SubTask{
		name:    cfg.Name,
		factory: factory,
		logger:  logger.With(zap.String("task", cfg.Name)),
		cfg:     cfg.Clone(),
		work:    supervise.NewWork(life),
	}
	s.lifecycle = newLifecycle(fmt.Sprintf("subtask %q", cfg.Name), s.resume)
	s.units, s.buildErr = s.build(s.cfg)
	return s
}

// build creates the units of cfg's task mode, closing the ones already
// built when a later one fails.
func (s *SubTask) build(cfg *config.SubTaskConfig) ([]unit.Unit, error) {
	if err := s.factory.CheckMode(cfg.TaskMode); err != nil {
		return nil, buildError(cfg.Name, err)
	}
	types, err := unit.Pipeline(cfg.TaskMode)
	if err != nil {
		return nil, buildError(cfg.Name, err)
	}
	units := make([]unit.Unit, 0, len(types))
	for _, t := range types {
		u, err := s.factory.NewUnit(t, cfg.Clone(), s.logger.With(zap.String("unit", string(t))))
		if err != nil {
			for _, b := range units {
				b.Close()
			}
			return nil, buildError(cfg.Name, fmt.Errorf("create %s unit: %w", t, err))
		}
		units = append(units, u)
	}
	return units, nil
}

// buildError makes err of building subtask name's pipeline non-resumable,
// keeping the code of a non-resumable Coded error (task-mode-unsupported,
// task-mode-invalid).
func buildError(name string, err error) error {
	if errs.Code(err) != errs.CodeInternal && !errs.IsResumable(err) {
		return fmt.Errorf("subtask %q: %w", name, err)
	}
	return errs.New(CodeUnitCreate, false, "subtask %q: %w", name, err)
}

// Name is the subtask's (task's) name.
func (s *SubTask) Name() string { return s.name }

// Kind labels the subtask in auto-resume metrics.
func (s *SubTask) Kind() string { return "subtask" }

// Config returns a copy of the current config.
func (s *SubTask) Config() *config.SubTaskConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Clone()
}

// CurrentUnit is the type of the unit the pipeline is at ("" when the
// pipeline could not be built).
func (s *SubTask) CurrentUnit() unit.Type {
	if u := s.Unit(); u != nil {
		return u.Type()
	}
	return ""
}

// Unit returns the unit the pipeline is at, or nil when the pipeline could
// not be built. Callers may use only the unit's methods that are safe
// concurrently with Process (Status, and extension interfaces documented so).
func (s *SubTask) Unit() unit.Unit {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.units) == 0 {
		return nil
	}
	return s.units[s.cur]
}

// SubTaskStatus is the subtask object of the status API (DESIGN.md §6).
type SubTaskStatus struct {
	Name      string           `json:"name"`
	Stage     stage.Stage      `json:"stage"`
	Unit      unit.Type        `json:"unit"`
	Errors    []errs.Error     `json:"errors"`
	Progress  any              `json:"progress"`
	Validator *ValidatorStatus `json:"validator,omitempty"`
	// ShardDDL is set while a shard DDL lock involves the subtask.
	ShardDDL *unit.ShardDDLStatus `json:"shard-ddl,omitempty"`
	// TargetConnections is the task's share of the worker's connections
	// to its target (set by Server.Status); absent while the task has no
	// pool open there.
	TargetConnections *dbconn.TargetConnections `json:"target-connections,omitempty"`
}

// ValidatorStatus is the "validator" object of a subtask's status.
type ValidatorStatus = unit.ValidatorStatus

// Status returns a snapshot for the status API: errors is [] and progress is
// {} when there are none, and the validator shows Stopped with zero counts
// when there is no validator.
func (s *SubTask) Status() SubTaskStatus {
	stg, errors := s.snapshot()
	st := SubTaskStatus{Name: s.name, Stage: stg, Errors: errors}
	s.mu.Lock()
	var u unit.Unit
	if len(s.units) > 0 {
		u = s.units[s.cur]
		st.Unit = u.Type()
	}
	v := s.valid
	s.mu.Unlock()

	st.Progress = map[string]any{}
	if u != nil {
		if p := u.Status(); p != nil {
			st.Progress = p
		}
		if r, ok := u.(unit.ShardDDLReporter); ok {
			st.ShardDDL = r.ShardDDL()
		}
	}
	vs := ValidatorStatus{Stage: stage.Stopped}
	if v != nil {
		vs = v.Status()
	}
	st.Validator = &vs
	return st
}

// failRun records a failed run: live stages become Paused, a subtask being
// stopped stays Stopping (Close or Kill finishes it).
func (s *SubTask) failRun(entries []errs.Error) {
	from, to := s.fail(entries)
	for _, e := range entries {
		s.logger.Warn("subtask failed", zap.String("from", string(from)), zap.String("stage", string(to)),
			zap.String("error-code", e.Code), zap.Bool("resumable", e.Resumable), zap.String("error", e.Message))
	}
}

// failErr is failRun for one error, stamped now.
func (s *SubTask) failErr(err error) {
	s.failRun([]errs.Error{errs.Entry(err, time.Now())})
}
