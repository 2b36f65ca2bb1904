package worker

import (
	"context"
	"fmt"
	"reflect"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/unit"
)

// StartValidator creates the subtask's validator through the factory and
// starts it. It does nothing when the validator already runs with the
// subtask's current config; a validator that stopped by itself, or runs
// with an older config, is replaced. ctx bounds the start only.
func (s *SubTask) StartValidator(ctx context.Context) error {
	s.vops.Lock()
	defer s.vops.Unlock()
	if s.stopping() {
		return fmt.Errorf("%w: start validator of subtask %q", ErrClosed, s.name)
	}
	s.mu.Lock()
	old, running, oldCfg := s.valid, s.vRunning, s.vcfg
	cfg := s.cfg.Clone()
	s.mu.Unlock()
	if running && old.Stage() == stage.Running && reflect.DeepEqual(oldCfg, cfg) {
		return nil
	}
	if running {
		old.Stop()
	}
	v, err := s.factory.NewValidator(cfg, s, s.logger.With(zap.String("unit", string(unit.TypeValidate))))
	if err != nil {
		return fmt.Errorf("start validator of subtask %q: %w", s.name, err)
	}
	if err := v.Start(ctx); err != nil {
		v.Stop()
		return fmt.Errorf("start validator of subtask %q: %w", s.name, err)
	}
	s.mu.Lock()
	s.valid, s.vRunning, s.vcfg = v, true, cfg
	s.mu.Unlock()
	s.logger.Info("validator started")
	return nil
}

// StopValidator stops the validator and waits for it; its last status stays
// visible. It does nothing when no validator runs.
func (s *SubTask) StopValidator() {
	s.vops.Lock()
	defer s.vops.Unlock()
	s.mu.Lock()
	v, running := s.valid, s.vRunning
	s.vRunning = false
	s.mu.Unlock()
	if !running {
		return
	}
	v.Stop()
	s.logger.Info("validator stopped")
}

// Validator returns the running validator, or nil when none runs.
func (s *SubTask) Validator() unit.Validator {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.vRunning {
		return nil
	}
	return s.valid
}

// SyncBehind reports whether the subtask's sync unit is catching up
// (unit.SyncSource), for the validator.
func (s *SubTask) SyncBehind() bool {
	src, is := s.Unit().(unit.SyncSource)
	return is && src.SyncBehind()
}

// SyncProgress is the progress of the subtask's sync unit while it runs
// (unit.SyncSource), for the validator.
func (s *SubTask) SyncProgress() (applied, read binlog.Location, ok bool) {
	if src, is := s.Unit().(unit.SyncSource); is {
		return src.SyncProgress()
	}
	return binlog.Location{}, binlog.Location{}, false
}

// ValidationErrorHandler returns the subtask's validator, running or not,
// to list and handle its validation errors (kept in the target's meta
// schema). A subtask whose validator never ran in this process gets one
// created (not started) from its config. nil when this build has no
// validator.
func (s *SubTask) ValidationErrorHandler() unit.Validator {
	s.vops.Lock()
	defer s.vops.Unlock()
	s.mu.Lock()
	v, cfg := s.valid, s.cfg.Clone()
	s.mu.Unlock()
	if v != nil {
		return v
	}
	v, err := s.factory.NewValidator(cfg, s, s.logger.With(zap.String("unit", string(unit.TypeValidate))))
	if err != nil {
		s.logger.Warn("no validator to handle validation errors", zap.Error(err))
		return nil
	}
	s.mu.Lock()
	s.valid = v
	s.mu.Unlock()
	return v
}
