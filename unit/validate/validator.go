package validate

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/backoff"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/pkg/supervise"
	"github.com/dmworker/dm-worker/unit"
)

// Error codes of the validator.
const (
	CodeConfig = "validator-config"
	CodeRead   = "validator-read-binlog"
)

// Validator is the continuous validator of one subtask (unit.Validator).
type Validator struct {
	cfg     *config.SubTaskConfig
	src     *config.SourceConfig
	relay   func() binlog.StreamOpener
	sync    unit.SyncSource
	metrics *unitMetrics
	logger  *zap.Logger
	full    bool
	delay   time.Duration
	workers int
	// limit bounds the unjudged rows held in memory (back-pressure on the
	// binlog reader beyond it).
	limit   int
	budget  *dbconn.Budget // target connections (UseConnBudget, before Start); nil: pools of its own
	sources *dbconn.Budget // source connections (UseSourceBudget, before Start); nil: a pool of its own

	// work runs supervise, from Start to Stop (a run that stopped itself on
	// an error stays started until Stop).
	work *supervise.Work

	mu sync.Mutex
	// guarded by mu:
	stage   stage.Stage
	started bool // Start ran and Stop has not
	st      progress
	store   *store // the running run's; nil between runs
}

// progress is what status shows besides the stage.
type progress struct {
	state      string
	pending    int64
	counts     unit.ValidationErrorCounts
	checked    int64
	checkpoint string
	binlog     string
	lag        float64
	skipped    []string
	err        *errs.Error
}

var (
	_ unit.Validator = (*Validator)(nil)
)

// States of a validator (unit.ValidatorStatus.State).
const (
	StateWaiting    = "waiting-for-sync"
	StateValidating = "validating"
	StateYielding   = "yielding"
	StateStopped    = "stopped"
)

// defaultLimit is how many unjudged rows a validator holds at most.
const defaultLimit = 50000

// New creates the validator of subtask cfg of source src. relay returns the
// relay reader while relay runs for the source (else nil: the validator
// reads from the source itself); sync tells how far the subtask's sync unit
// has got. A validator mode of none means full, as DM's `validation start`
// without --mode. metrics may be nil.
func New(cfg *config.SubTaskConfig, src *config.SourceConfig, relay func() binlog.StreamOpener,
	sync unit.SyncSource, metrics *Metrics, logger *zap.Logger) (*Validator, error) {
	if cfg == nil || src == nil || sync == nil {
		return nil, errs.New(CodeConfig, false, "validate: subtask and source configs and a sync source are required")
	}
	if cfg.MetaSchema == "" {
		return nil, errs.New(CodeConfig, false, "validate: subtask %q has no meta-schema for its checkpoint and errors", cfg.Name)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	c := cfg.Validator
	v := &Validator{cfg: cfg, src: src, relay: relay, sync: sync, logger: logger, work: supervise.NewWork(nil),
		metrics: &unitMetrics{m: metrics, task: cfg.Name, source: cfg.SourceID},
		full:    c.Mode != config.ValidationFast, delay: c.RowErrorDelay.Duration,
		workers: max(c.WorkerCount, 1), limit: defaultLimit, stage: stage.Stopped}
	v.st.state = StateStopped
	return v, nil
}

// Mode is the comparison mode the validator runs in.
func (v *Validator) Mode() string {
	if v.full {
		return config.ValidationFull
	}
	return config.ValidationFast
}

// Start starts the validator's goroutine. Connection problems do not fail
// Start: the validator retries them with backoff and shows them in status.
func (v *Validator) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.started {
		return nil
	}
	v.started = true
	v.stage, v.st.state, v.st.err = stage.Running, StateWaiting, nil
	v.logger.Info("validator starts", zap.String("mode", v.Mode()), zap.Int("worker-count", v.workers),
		zap.Duration("row-error-delay", v.delay))
	// Stop waits for every run, so none is running here and Start cannot
	// wait or fail.
	return v.work.Start(ctx, v.supervise)
}

// Stop stops the validator and waits for it; its checkpoint is saved.
func (v *Validator) Stop() {
	v.mu.Lock()
	started := v.started
	v.mu.Unlock()
	if !started {
		return
	}
	_ = v.work.Stop(context.Background(), "validator") // waits as long as the run takes
	v.mu.Lock()
	v.started = false
	v.stage, v.st.state = stage.Stopped, StateStopped
	v.mu.Unlock()
}

// Stage is Running while the validator's goroutine runs, else Stopped.
func (v *Validator) Stage() stage.Stage {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.stage
}

// Status is the validator object of the subtask status.
func (v *Validator) Status() unit.ValidatorStatus {
	v.mu.Lock()
	defer v.mu.Unlock()
	p := v.st
	return unit.ValidatorStatus{Stage: v.stage, Pending: p.pending, Errors: p.counts, Mode: v.Mode(),
		State: p.state, RowsChecked: p.checked, Checkpoint: p.checkpoint, Binlog: p.binlog,
		LagSeconds: p.lag, SkippedTables: append([]string(nil), p.skipped...), Error: p.err}
}

// supervise runs the validator until ctx ends: a resumable error (target
// or source unreachable) is retried with backoff, any other stops the
// validator with the error in status.
func (v *Validator) supervise(ctx context.Context) {
	bo := backoff.New(time.Second, time.Minute)
	for {
		started := time.Now()
		err := v.runOnce(ctx)
		if ctx.Err() != nil {
			v.logger.Info("validator stopped")
			return
		}
		entry := errs.Entry(err, time.Now())
		v.mu.Lock()
		v.st.err = &entry
		v.mu.Unlock()
		if !errs.IsResumable(err) {
			v.logger.Error("validator stopped by an error; fix the cause, then `dmctl validation stop` and `start`",
				zap.Error(err))
			v.mu.Lock()
			v.stage, v.st.state = stage.Stopped, StateStopped
			v.mu.Unlock()
			return
		}
		if time.Since(started) > time.Minute {
			bo.Reset()
		}
		d := bo.Next()
		v.logger.Warn("validator run failed, retrying", zap.Error(err), zap.Duration("in", d))
		if !backoff.Sleep(ctx, backoff.RealClock{}, d) {
			return
		}
	}
}

// setYielding shows in status that the validator yields to its sync unit
// (or no longer does).
func (v *Validator) setYielding(on bool) {
	if on {
		v.logger.Debug("validator yields to the sync unit, which is catching up")
		v.setState(StateYielding)
		return
	}
	v.setState(StateValidating)
}

// setState records what the running validator does.
func (v *Validator) setState(s string) {
	v.mu.Lock()
	v.st.state = s
	v.mu.Unlock()
}

// withStore runs fn on the running validator's store, or on one over a
// connection of its own while the validator does not run, so errors can be
// listed and handled while it is stopped.
func (v *Validator) withStore(ctx context.Context, fn func(*store) error) error {
	v.mu.Lock()
	s := v.store
	v.mu.Unlock()
	if s != nil {
		return fn(s)
	}
	db, err := v.openTarget(2)
	if err != nil {
		return err
	}
	defer closeDB(db, v.logger)
	s = newStore(db, v.cfg.MetaSchema, v.cfg.Name, v.cfg.SourceID)
	if err := s.prepare(ctx); err != nil {
		return err
	}
	return fn(s)
}

// closeDB closes a pool, logging a failure.
func closeDB(db *sql.DB, logger *zap.Logger) {
	if err := db.Close(); err != nil {
		logger.Warn("close target pool", zap.Error(err))
	}
}
