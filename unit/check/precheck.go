package check

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
)

// Precheck returns the worker's precheck of the subtasks of source src
// (with resolved passwords), of the form of unit.PrecheckFunc: it runs
// Run, logs every warning and failure, and returns Report.Err.
func Precheck(src *config.SourceConfig, logger *zap.Logger) func(ctx context.Context, cfg *config.SubTaskConfig) error {
	return PrecheckBudgeted(src, Budgets{}, logger)
}

// PrecheckBudgeted is Precheck whose connections come from b, the
// worker's budgets of connections to each target and source (RunBudgeted).
func PrecheckBudgeted(src *config.SourceConfig, b Budgets, logger *zap.Logger) func(ctx context.Context, cfg *config.SubTaskConfig) error {
	return func(ctx context.Context, cfg *config.SubTaskConfig) error {
		began := time.Now()
		r := RunBudgeted(ctx, cfg, src, b)
		log := logger.With(zap.String("task", r.Task), zap.String("source", r.Source))
		for _, it := range r.Items {
			switch it.State {
			case StateWarn:
				log.Warn("precheck warning", zap.String("check", it.Name), zap.String("object", it.Object),
					zap.String("message", it.Message), zap.String("fix", it.Fix))
			case StateFail:
				log.Error("precheck failure", zap.String("check", it.Name), zap.String("object", it.Object),
					zap.String("message", it.Message), zap.String("fix", it.Fix))
			}
		}
		log.Info("precheck done", zap.Int("failures", len(r.Failures())), zap.Int("warnings", len(r.Warnings())),
			zap.Int("checks", len(r.Items)), zap.Duration("took", time.Since(began)))
		// A setting that makes every connection fail (TLS, a password that
		// cannot be decrypted) keeps its own code, as when a unit meets it.
		if cause := r.Cause(); cause != nil && errs.Code(cause) != errs.CodeInternal {
			return cause
		}
		return r.Err()
	}
}
