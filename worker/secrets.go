package worker

import (
	"context"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/secret"
	"github.com/dmworker/dm-worker/unit"
)

// The configs decoded from etcd are never changed: the server and the
// source worker compare them with reflect.DeepEqual to notice changes.
// Passwords are resolved (decrypted when they are ciphertexts) into copies
// that only the data plane sees: the source config given to the relay and
// the unit factory, and the subtask configs given to units and validators.

// resolveSource returns a copy of src whose from.password is the one to log
// in with. The error names the source, never the password.
func resolveSource(src *config.SourceConfig, key *secret.Key) (*config.SourceConfig, error) {
	pw, err := secret.ResolvePassword(src.From.Password, key)
	if err != nil {
		return nil, errs.New(CodePasswordUndecryptable, false, "password of source %q (from.password): %w", src.SourceID, err)
	}
	out := src.Clone()
	out.From.Password = pw
	return out, nil
}

// resolveSubTask returns a copy of cfg whose target-database.password is
// the one to log in with. The error names the task and source.
func resolveSubTask(cfg *config.SubTaskConfig, key *secret.Key) (*config.SubTaskConfig, error) {
	pw, err := secret.ResolvePassword(cfg.TargetDatabase.Password, key)
	if err != nil {
		return nil, errs.New(CodePasswordUndecryptable, false,
			"password of subtask %q of source %q (target-database.password): %w", cfg.Name, cfg.SourceID, err)
	}
	out := cfg.Clone()
	out.TargetDatabase.Password = pw
	return out, nil
}

// secretFactory is a unit.Factory that hands units and validators subtask
// configs with resolved passwords. SubTask also asks it (unitConfig) for
// the config a unit's Update gets, so a unit always compares resolved
// configs with resolved configs. It also runs at most precheckSlots
// prechecks at a time.
type secretFactory struct {
	unit.Factory
	key *secret.Key
	// prechecks holds one token per precheck running; its capacity is
	// precheckSlots.
	prechecks chan struct{}
}

// precheckSlots bounds how many subtask prechecks of one source worker run
// at once. Each opens connections to the source and the target and creates
// and drops a scratch table on the target: a thousand subtasks starting
// together (a worker start, a source bound) would otherwise run a thousand
// prechecks at once, hold a thousand pools and stacks at the same time,
// queue their DDL on the target past check.ServerTimeout and pause with
// precheck-failed. Measured with tests/bench TestManyIdleSubtasksMemory:
// 1,000 idle subtasks started in ~15 s with every precheck at once on an
// idle machine and never converged on a loaded one.
const precheckSlots = 8

// withSecrets wraps f so that units get resolved passwords.
func withSecrets(f unit.Factory, key *secret.Key) unit.Factory {
	return &secretFactory{Factory: f, key: key, prechecks: make(chan struct{}, precheckSlots)}
}

func (f *secretFactory) NewUnit(t unit.Type, cfg *config.SubTaskConfig, logger *zap.Logger) (unit.Unit, error) {
	rc, err := resolveSubTask(cfg, f.key)
	if err != nil {
		return nil, err
	}
	return f.Factory.NewUnit(t, rc, logger)
}

func (f *secretFactory) NewValidator(cfg *config.SubTaskConfig, sync unit.SyncSource, logger *zap.Logger) (unit.Validator, error) {
	rc, err := resolveSubTask(cfg, f.key)
	if err != nil {
		return nil, err
	}
	return f.Factory.NewValidator(rc, sync, logger)
}

// Precheck waits for one of the precheckSlots (or ctx), then runs the
// wrapped factory's precheck with resolved passwords; the wait does not
// count against the precheck's own timeouts.
func (f *secretFactory) Precheck(ctx context.Context, cfg *config.SubTaskConfig) error {
	rc, err := resolveSubTask(cfg, f.key)
	if err != nil {
		return err
	}
	select {
	case f.prechecks <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-f.prechecks }()
	return f.Factory.Precheck(ctx, rc)
}

func (f *secretFactory) unitConfig(cfg *config.SubTaskConfig) (*config.SubTaskConfig, error) {
	return resolveSubTask(cfg, f.key)
}

// unitConfigResolver is implemented by factories whose units get configs
// other than the stored ones (secretFactory).
type unitConfigResolver interface {
	unitConfig(cfg *config.SubTaskConfig) (*config.SubTaskConfig, error)
}

// unitConfigFor is the config units built by factory get for cfg: cfg itself
// (a copy) unless the factory resolves configs.
func unitConfigFor(factory unit.Factory, cfg *config.SubTaskConfig) (*config.SubTaskConfig, error) {
	if r, ok := factory.(unitConfigResolver); ok {
		return r.unitConfig(cfg)
	}
	return cfg.Clone(), nil
}
