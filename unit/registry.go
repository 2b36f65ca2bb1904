package unit

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
)

// Error codes of the Registry.
const (
	CodeTaskModeUnsupported  = "task-mode-unsupported"
	CodeUnitUnsupported      = "unit-unsupported"
	CodeValidatorUnsupported = "validator-unsupported"
)

// Factory creates units. The worker is given one; tests pass test units,
// production passes the real ones as they land.
type Factory interface {
	// CheckMode reports whether this factory can build every unit of the
	// mode; the error names the missing unit types and says the task mode
	// is not available in this build.
	CheckMode(mode string) error
	NewUnit(t Type, cfg *config.SubTaskConfig, logger *zap.Logger) (Unit, error)
	// NewValidator creates the subtask's validator, or returns an error if
	// validation is unavailable. sync tells it how far the subtask's sync
	// unit has got.
	NewValidator(cfg *config.SubTaskConfig, sync SyncSource, logger *zap.Logger) (Validator, error)
	// Precheck checks the source and target requirements of cfg's task
	// mode (DESIGN.md §9) before a subtask's first unit runs for the first
	// time; the error lists every unmet requirement.
	Precheck(ctx context.Context, cfg *config.SubTaskConfig) error
}

// PrecheckFunc checks a subtask's requirements; see Factory.Precheck.
type PrecheckFunc func(ctx context.Context, cfg *config.SubTaskConfig) error

// Constructor builds one unit for a subtask.
type Constructor func(cfg *config.SubTaskConfig, logger *zap.Logger) (Unit, error)

// ValidatorConstructor builds the validator of a subtask.
type ValidatorConstructor func(cfg *config.SubTaskConfig, sync SyncSource, logger *zap.Logger) (Validator, error)

// Registry is a Factory built from constructors, so production and tests
// build factories the same way. It is immutable and safe for concurrent use.
type Registry struct {
	units     map[Type]Constructor
	validator ValidatorConstructor
	precheck  PrecheckFunc
}

var _ Factory = (*Registry)(nil)

// NewRegistry returns a Registry of the given unit constructors and an
// optional (nil) validator constructor. The map is copied.
func NewRegistry(units map[Type]Constructor, validator ValidatorConstructor) *Registry {
	r := &Registry{units: make(map[Type]Constructor, len(units)), validator: validator}
	for t, c := range units {
		if c != nil {
			r.units[t] = c
		}
	}
	return r
}

// CheckMode returns nil when every unit of mode is registered, a Coded
// CodeTaskModeInvalid error for an unknown mode, and otherwise a Coded
// CodeTaskModeUnsupported error naming the missing units and the modes this
// build does support.
func (r *Registry) CheckMode(mode string) error {
	types, err := Pipeline(mode)
	if err != nil {
		return err
	}
	missing := r.missing(types)
	if len(missing) == 0 {
		return nil
	}
	var supported []string
	for _, m := range modes {
		ts, _ := Pipeline(m)
		if len(r.missing(ts)) == 0 {
			supported = append(supported, m)
		}
	}
	advice := "no task mode is available in this build"
	if len(supported) > 0 {
		advice = "use task-mode " + strings.Join(supported, " or ")
	}
	return errs.New(CodeTaskModeUnsupported, false,
		"unit: task-mode %q needs units %s, which this build does not have; %s",
		mode, joinTypes(missing), advice)
}

// NewUnit builds a unit of type t, or returns a Coded CodeUnitUnsupported
// error when none is registered.
func (r *Registry) NewUnit(t Type, cfg *config.SubTaskConfig, logger *zap.Logger) (Unit, error) {
	c, ok := r.units[t]
	if !ok {
		return nil, errs.New(CodeUnitUnsupported, false, "unit: %s unit is not available in this build", t)
	}
	u, err := c(cfg, logger)
	if err != nil {
		return nil, fmt.Errorf("unit: create %s unit for subtask %q: %w", t, cfg.Name, err)
	}
	return u, nil
}

// NewValidator builds the validator, or returns a Coded
// CodeValidatorUnsupported error when none is registered.
func (r *Registry) NewValidator(cfg *config.SubTaskConfig, sync SyncSource, logger *zap.Logger) (Validator, error) {
	if r.validator == nil {
		return nil, errs.New(CodeValidatorUnsupported, false,
			"unit: validation of subtask %q is not available in this build", cfg.Name)
	}
	v, err := r.validator(cfg, sync, logger)
	if err != nil {
		return nil, fmt.Errorf("unit: create validator for subtask %q: %w", cfg.Name, err)
	}
	return v, nil
}

// WithPrecheck returns a copy of r whose Precheck runs check.
func (r *Registry) WithPrecheck(check PrecheckFunc) *Registry {
	c := *r
	c.precheck = check
	return &c
}

// Precheck runs the registered check; without one every subtask passes.
func (r *Registry) Precheck(ctx context.Context, cfg *config.SubTaskConfig) error {
	if r.precheck == nil {
		return nil
	}
	return r.precheck(ctx, cfg)
}

func (r *Registry) missing(types []Type) []Type {
	var out []Type
	for _, t := range types {
		if _, ok := r.units[t]; !ok {
			out = append(out, t)
		}
	}
	return out
}

func joinTypes(ts []Type) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}
