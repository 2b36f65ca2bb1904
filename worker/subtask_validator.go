package worker

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/unit"
)

// StartValidator creates the subtask's validator through the factory and
// starts it. It does nothing when the validator already runs; a validator
// that stopped by itself is replaced. ctx bounds the start only.
func (s *SubTask) StartValidator(ctx context.Context) error {
	s.vops.Lock()
	defer s.vops.Unlock()
	if s.stopping() {
		return fmt.Errorf("%w: start validator of subtask %q", ErrClosed, s.name)
	}
	s.mu.Lock()
	old, running := s.valid, s.vRunning
	cfg := s.cfg.Clone()
	s.mu.Unlock()
	if running && old.Stage() == stage.Running {
		return nil
	}
	if running {
		old.Stop()
	}
	v, err := s.factory.NewValidator(cfg, s.logger.With(zap.String("unit", string(unit.TypeValidate))))
	if err != nil {
		return fmt.Errorf("start validator of subtask %q: %w", s.name, err)
	}
	if err := v.Start(ctx); err != nil {
		v.Stop()
		return fmt.Errorf("start validator of subtask %q: %w", s.name, err)
	}
	s.mu.Lock()
	s.valid, s.vRunning = v, true
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
