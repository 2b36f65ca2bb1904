package validate

import (
	"context"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/errs"
)

// ErrorList is the body of GET /api/v1/subtasks/{task}/validation/errors.
type ErrorList struct {
	Errors []ErrorRecord `json:"errors"`
}

// CodeBadOp is the code of an unknown operation or state.
const CodeBadOp = "validation-bad-request"

// ValidationErrors lists the subtask's validation errors in state (new,
// ignored, resolved or all), from the meta schema, whether or not the
// validator runs.
func (v *Validator) ValidationErrors(ctx context.Context, state string) (any, error) {
	switch state {
	case "", StateAll, StateNew, StateIgnored, StateResolved:
	default:
		return nil, errs.New(CodeBadOp, false, "validation errors of subtask %q: state %q: use new, ignored, resolved or all",
			v.cfg.Name, state)
	}
	out := ErrorList{Errors: []ErrorRecord{}}
	err := v.withStore(ctx, func(s *store) error {
		recs, err := s.list(ctx, state)
		if recs != nil {
			out.Errors = recs
		}
		return err
	})
	return out, err
}

// OperateValidationErrors ignores, resolves or clears (deletes) error id,
// or every error of the subtask when all is set, and returns how many
// changed. The counters in status follow at once.
func (v *Validator) OperateValidationErrors(ctx context.Context, op string, id int64, all bool) (int64, error) {
	switch op {
	case OpIgnore, OpResolve, OpClear:
	default:
		return 0, errs.New(CodeBadOp, false, "validation errors of subtask %q: op %q: use ignore, resolve or clear", v.cfg.Name, op)
	}
	var n int64
	err := v.withStore(ctx, func(s *store) error {
		var err error
		if n, err = s.operate(ctx, op, id, all); err != nil {
			return err
		}
		counts, err := s.counts(ctx)
		if err != nil {
			return err
		}
		v.mu.Lock()
		v.st.counts = counts
		v.mu.Unlock()
		v.metrics.setCounts(counts)
		return nil
	})
	if err == nil {
		v.logger.Info("validation errors changed", zap.String("op", op), zap.Int64("id", id), zap.Bool("all", all), zap.Int64("changed", n))
	}
	return n, err
}
