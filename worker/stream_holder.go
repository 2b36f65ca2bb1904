package worker

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/pkg/supervise"
	"github.com/dmworker/dm-worker/stream"
)

// StreamTask is one run of a stream task (stream.Task): Run until ctx is
// done or it fails; Status at any time.
type StreamTask interface {
	Run(ctx context.Context) error
	Status() stream.TaskStatus
}

// StreamFactory builds the task of a stream that resumes at start; save
// persists its checkpoints (meta store and etcd mirror). A stream whose
// task cannot be built pauses with the error.
type StreamFactory func(cfg *config.StreamConfig, start stream.Checkpoint,
	save func(context.Context, stream.Checkpoint) error, logger *zap.Logger) (StreamTask, error)

// StreamStatus is a stream object of the status API (DESIGN.md §6).
type StreamStatus struct {
	Name           string      `json:"name"`
	Stage          stage.Stage `json:"stage"`
	State          string      `json:"state"`
	Checkpoint     string      `json:"checkpoint"`
	CheckpointGTID string      `json:"checkpoint-gtid"`
	Events         int64       `json:"events"`
	// SkippedDDLs counts statements skipped as never replicated
	// (triggers, procedures, functions, events, views...).
	SkippedDDLs int64              `json:"skipped-ddls"`
	LagSeconds  float64            `json:"lag-seconds"`
	FillHistory *stream.FillStatus `json:"fill-history,omitempty"`
	// Skipped is the range an ignore-untreated resume skipped, when one
	// did.
	Skipped string       `json:"skipped,omitempty"`
	Errors  []errs.Error `json:"errors"`
}

// StreamHolder runs one stream task through the shared lifecycle: Start
// runs it, Pause stops it with its checkpoint saved, resume builds a new
// task from the saved checkpoint (or, with ignore-untreated, from the
// source's current position), Close stops it. An error pauses it; the
// auto-resume checker resumes it when the error is resumable.
type StreamHolder struct {
	lifecycle
	cfg     *config.StreamConfig
	factory StreamFactory
	// checkpoint returns the saved checkpoint to resume from; current
	// the source's position for ignore-untreated.
	checkpoint func() (stream.Checkpoint, error)
	current    func(ctx context.Context) (binlog.Location, error)
	save       func(context.Context, stream.Checkpoint) error
	clock      Clock
	log        *zap.Logger

	work *supervise.Work // the running task

	mu sync.Mutex // guards the fields below
	// task is the running task (nil once its Run returned).
	task StreamTask
	last stream.TaskStatus // status of the last task, kept while none runs
	// eventsBefore sums the events of the finished runs, so that status
	// counts events since the stream was deployed on this worker.
	eventsBefore int64
	// skippedBefore does the same for the statements skipped as never
	// replicated.
	skippedBefore int64
	skipped       string
	// ignoreUntreated makes the next resume start at the current position.
	ignoreUntreated bool
}

// streamHolderDeps are what a StreamHolder needs besides its config.
type streamHolderDeps struct {
	// life is the owner's context: its end cancels the stream's task.
	life       context.Context
	factory    StreamFactory
	checkpoint func(name string) (stream.Checkpoint, error)
	current    func(ctx context.Context) (binlog.Location, error)
	save       func(name string) func(context.Context, stream.Checkpoint) error
	clock      Clock
	log        *zap.Logger
}

func newStreamHolder(cfg *config.StreamConfig, d streamHolderDeps) *StreamHolder {
	h := &StreamHolder{
		cfg: cfg, factory: d.factory, current: d.current, save: d.save(cfg.Name), clock: d.clock,
		checkpoint: func() (stream.Checkpoint, error) { return d.checkpoint(cfg.Name) },
		log:        d.log.With(zap.String("stream", cfg.Name)),
		work:       supervise.NewWork(d.life),
	}
	h.lifecycle = newLifecycle(fmt.Sprintf("stream %q", cfg.Name), h.resume)
	return h
}

// Name is the stream's name.
func (h *StreamHolder) Name() string { return h.cfg.Name }

// Kind labels the stream in auto-resume metrics.
func (h *StreamHolder) Kind() string { return "stream" }

// Config is the config the holder runs.
func (h *StreamHolder) Config() *config.StreamConfig { return h.cfg }

// Start runs the task from the saved checkpoint (New → Running). Like a
// subtask, it keeps ctx's values but not its cancellation; it runs until
// Pause or Close, or until the owner's context (streamHolderDeps.life)
// ends.
func (h *StreamHolder) Start(ctx context.Context) error {
	h.ops.Lock()
	defer h.ops.Unlock()
	if err := h.start(); err != nil {
		return err
	}
	h.run(ctx)
	return nil
}

// SetIgnoreUntreated makes the next resume start at the source's current
// position instead of the checkpoint (the stage value's
// "ignore-untreated": true).
func (h *StreamHolder) SetIgnoreUntreated(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ignoreUntreated = on
}

// run builds the task from the saved checkpoint and runs it; ops is held
// and the stage is Running or Resuming. A task that cannot be built fails
// the run at once.
func (h *StreamHolder) run(ctx context.Context) {
	start, err := h.checkpoint()
	if err == nil {
		start, err = h.skipUntreated(ctx, start)
	}
	var task StreamTask
	if err == nil {
		task, err = h.factory(h.cfg, start, h.save, h.log)
	}
	if err != nil {
		h.fail([]errs.Error{errs.Entry(err, h.clock.Now())})
		h.log.Error("stream task could not start", zap.Error(err), zap.Bool("resumable", errs.IsResumable(err)))
		return
	}
	h.mu.Lock()
	h.task = task
	h.mu.Unlock()
	h.log.Info("stream task running", zap.Stringer("checkpoint", start.Location))
	h.runWork(ctx, h.work, h.clock, task.Run, func(err error) {
		h.mu.Lock()
		h.last = task.Status()
		h.eventsBefore += h.last.Events
		h.skippedBefore += h.last.SkippedDDLs
		h.last.Events, h.last.SkippedDDLs = 0, 0
		if h.task == task {
			h.task = nil
		}
		h.mu.Unlock()
		if err != nil {
			h.log.Error("stream task paused by an error", zap.Error(err), zap.Bool("resumable", errs.IsResumable(err)))
		}
	})
}

// skipUntreated moves start to the source's current position when the
// next resume ignores untreated changes, recording the skipped range.
func (h *StreamHolder) skipUntreated(ctx context.Context, start stream.Checkpoint) (stream.Checkpoint, error) {
	h.mu.Lock()
	skip := h.ignoreUntreated
	h.ignoreUntreated = false
	h.mu.Unlock()
	if !skip {
		return start, nil
	}
	cur, err := h.current(ctx)
	if err != nil {
		return start, errs.Wrap(err, CodeStreamIgnoreUntreated, "stream %q: read the source's current position to ignore untreated changes", h.cfg.Name)
	}
	skipped := fmt.Sprintf("%s (gtid %q) to %s (gtid %q)", start.Location, start.Location.GTID, cur, cur.GTID)
	h.log.Warn("ignore-untreated: changes between the checkpoint and the current position are skipped",
		zap.Stringer("from", start.Location), zap.Stringer("to", cur))
	start.Location, start.Txn, start.SnapshotDone = cur, nil, true
	if err := h.save(ctx, start); err != nil {
		return start, err
	}
	h.mu.Lock()
	h.skipped = skipped
	h.mu.Unlock()
	return start, nil
}

// Pause stops reading and delivering with the checkpoint saved; the
// checker never resumes an explicit pause.
func (h *StreamHolder) Pause(ctx context.Context) error {
	h.ops.Lock()
	defer h.ops.Unlock()
	err := h.pauseWork(ctx, h.work)
	h.log.Info("stream paused")
	return err
}

// resume is the stream's part of Resume and AutoResume; it runs under ops.
func (h *StreamHolder) resume(ctx context.Context, auto bool) error {
	return h.restartWork(ctx, auto, h.work, h.run)
}

// Close stops the task (its checkpoint saved by the task) and waits.
func (h *StreamHolder) Close() {
	h.ops.Lock()
	defer h.ops.Unlock()
	if h.stopWork(h.work, nil) {
		h.log.Info("stream stopped")
	}
}

// Status is the stream object of the status API.
func (h *StreamHolder) Status() StreamStatus {
	stg, errors := h.snapshot()
	h.mu.Lock()
	task, ts, skipped, before, skippedBefore := h.task, h.last, h.skipped, h.eventsBefore, h.skippedBefore
	if task != nil {
		ts = task.Status()
	}
	h.mu.Unlock()
	st := StreamStatus{
		Name: h.cfg.Name, Stage: stg, State: ts.State, Events: before + ts.Events, LagSeconds: ts.LagSeconds,
		SkippedDDLs: skippedBefore + ts.SkippedDDLs,
		FillHistory: ts.FillHistory, Skipped: skipped, Errors: errors,
		Checkpoint: ts.Checkpoint.String(), CheckpointGTID: ts.Checkpoint.GTID,
	}
	if ts.Checkpoint.IsZero() {
		st.Checkpoint = ""
	}
	switch stg {
	case stage.Paused, stage.Pausing:
		st.State = stream.StatePaused
	case stage.Stopping, stage.Stopped, stage.New:
		st.State = stream.StateStopped
	case stage.Resuming:
		st.State = stream.StateRestarting
	}
	if ts.Err != nil && stg == stage.Running {
		st.Errors = append(st.Errors, errs.Entry(ts.Err, h.clock.Now()))
	}
	return st
}
