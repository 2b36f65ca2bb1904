package worker

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/unit"
)

// Run starts a New subtask: stage Running, then (in the supervisor) Init of
// every unit, the choice of the unit to start at (the last unit, scanning
// backwards, that has saved progress; the first unit when none has) and
// processing from there. It returns without waiting for any of that.
//
// The pipeline keeps ctx's values but not its cancellation: it runs until
// Pause, Close or Kill (or the end of its owner's context, for a subtask
// of a SourceWorker), so a caller's short-lived ctx does not stop it.
// A subtask whose pipeline could not be built pauses at once with a
// non-resumable error. Run of a subtask that is not New does nothing.
func (s *SubTask) Run(ctx context.Context) {
	s.ops.Lock()
	defer s.ops.Unlock()
	if err := s.start(); err != nil {
		s.logger.Warn("run ignored", zap.Error(err))
		return
	}
	s.mu.Lock()
	buildErr := s.buildErr
	s.mu.Unlock()
	if buildErr != nil {
		s.failErr(buildErr) // Running → Paused with the error
		return
	}
	s.logger.Info("subtask starting")
	s.startSupervisor(ctx)
}

// Pause pauses a running subtask explicitly (the master asked for Paused or
// Stopped): Running → Pausing → Paused. It cancels the running unit, waits
// until it returned and paused, and marks the subtask so that the checker
// never auto-resumes it. A New subtask becomes Paused without running; a
// subtask already Paused (by an error) is only marked. ctx bounds the wait:
// when it ends first, the pause completes in the background and ctx's error
// is returned. Other stages give ErrNotRunning.
func (s *SubTask) Pause(ctx context.Context) error {
	s.ops.Lock()
	defer s.ops.Unlock()
	stop, err := s.pause()
	if err != nil {
		return err
	}
	if !stop {
		s.logger.Info("subtask paused before it ran")
		return nil
	}
	if err := s.work.Stop(ctx, "pause "+s.what); err != nil {
		return err
	}
	s.logger.Info("subtask paused", zap.String("stage", string(s.Stage())))
	return nil
}

// resume is the subtask's part of Resume and AutoResume; it runs under
// ops. Paused → Resuming → Running: the unit that failed or was paused
// continues with Resume, a unit that has not run yet with Process. A
// subtask still Pausing, or whose supervisor has not exited yet, is waited
// for (bounded by ctx). Like Run, the pipeline outlives ctx.
func (s *SubTask) resume(ctx context.Context, auto bool) error {
	// Pausing or Paused: the supervisor has settled the stage or is about
	// to, and is exiting. Other stages are refused below.
	if st := s.Stage(); st == stage.Pausing || st == stage.Paused {
		if err := s.work.Wait(ctx); err != nil {
			return fmt.Errorf("resume subtask %q: wait for the pause to finish: %w", s.name, err)
		}
	}
	prev, err := s.beginResume(auto)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.units == nil {
		s.units, s.buildErr = s.build(s.cfg)
		s.inited, s.scanned, s.cur, s.started = 0, false, 0, false
	}
	buildErr := s.buildErr
	s.mu.Unlock()
	if buildErr != nil {
		s.failErr(buildErr) // Resuming → Paused with the error
		return fmt.Errorf("resume subtask %q: %w", s.name, buildErr)
	}
	fields := []zap.Field{zap.Bool("auto", auto)}
	if prev.Failed() {
		fields = append(fields, zap.String("error-code", prev.Errors[0].Code))
	}
	s.logger.Info("subtask resuming", fields...)
	s.startSupervisor(ctx)
	return nil
}

// Update applies cfg to a New or Paused subtask. When no unit has been
// processed yet the pipeline is rebuilt with cfg; otherwise cfg must keep
// the task mode and every unit that still has work (the current one and
// those after it) applies it with Update. An error wrapping
// unit.ErrUpdateUnsupported (also for a changed task mode) means the caller
// must recreate the subtask; after any error the units may hold different
// configs, so recreate then too.
func (s *SubTask) Update(ctx context.Context, cfg *config.SubTaskConfig) error {
	s.ops.Lock()
	defer s.ops.Unlock()
	if cfg.Name != s.name {
		return fmt.Errorf("update subtask %q: the new config names task %q; a subtask cannot be renamed", s.name, cfg.Name)
	}
	newCfg := cfg.Clone()
	st := s.Stage()
	if st != stage.New && st != stage.Paused {
		return fmt.Errorf("%w: update subtask %q in stage %s; pause it first", ErrNotPaused, s.name, st)
	}
	s.mu.Lock()
	if !s.scanned {
		// Nothing has run: rebuild the pipeline from the new config.
		old := s.units
		s.units, s.buildErr = s.build(newCfg)
		s.inited, s.cur, s.started = 0, 0, false
		s.cfg = newCfg
		s.mu.Unlock()
		for _, u := range old {
			u.Close()
		}
		s.logger.Info("subtask config replaced; pipeline rebuilt", zap.String("stage", string(st)))
		return nil
	}
	if newCfg.TaskMode != s.cfg.TaskMode {
		from := s.cfg.TaskMode
		s.mu.Unlock()
		return fmt.Errorf("update subtask %q: task-mode %s → %s: %w", s.name, from, newCfg.TaskMode, unit.ErrUpdateUnsupported)
	}
	pending := append([]unit.Unit(nil), s.units[s.cur:]...)
	s.mu.Unlock()
	// Units were built with the factory's configs (passwords resolved):
	// they are updated with the same kind.
	unitCfg, err := unitConfigFor(s.factory, newCfg)
	if err != nil {
		return fmt.Errorf("update subtask %q: %w", s.name, err)
	}
	for _, u := range pending {
		if err := u.Update(ctx, unitCfg.Clone()); err != nil {
			return fmt.Errorf("update subtask %q: %s unit: %w", s.name, u.Type(), err)
		}
	}
	s.mu.Lock()
	s.cfg = newCfg
	s.mu.Unlock()
	s.logger.Info("subtask config updated in place")
	return nil
}

// Close stops the subtask gracefully: Stopping, cancel and wait for the
// supervisor, Close every unit not closed yet (flushing checkpoints), stop
// the validator, Stopped. It is idempotent.
func (s *SubTask) Close() { s.stop(unit.Unit.Close, "closed") }

// Kill stops the subtask at once: like Close, but units are killed without
// flushing.
func (s *SubTask) Kill() { s.stop(unit.Unit.Kill, "killed") }

func (s *SubTask) stop(stopUnit func(unit.Unit), what string) {
	s.ops.Lock()
	defer s.ops.Unlock()
	if !s.beginStop() {
		return
	}
	_ = s.work.Stop(context.Background(), s.what) // waits as long as the supervisor takes
	s.mu.Lock()
	var rest []unit.Unit
	if s.units != nil {
		rest = s.units[s.cur:]
	}
	s.mu.Unlock()
	for _, u := range rest {
		stopUnit(u)
	}
	s.StopValidator()
	s.stopped()
	s.logger.Info("subtask " + what)
}

// startSupervisor runs under ops, with the stage already Running or
// Resuming and the previous supervisor waited for (resume), so at most one
// exists. A supervisor that cannot start fails the run.
func (s *SubTask) startSupervisor(ctx context.Context) {
	if err := s.work.Start(ctx, s.supervise); err != nil {
		s.failErr(fmt.Errorf("start subtask %q: %w", s.name, err))
	}
}
