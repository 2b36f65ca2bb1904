package worker

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/unit"
)

// Reconcile converges the local subtask name to its etcd keys, read in one
// transaction. It returns an error only when it should be retried (etcd
// unreachable); problems with the keys' contents are reported in status
// and logged.
func (r *subTaskReconciler) Reconcile(ctx context.Context, name string) error {
	if !r.enabled() {
		return nil
	}
	item, rev, err := r.store.GetSubTask(ctx, r.source, name)
	if err != nil {
		return fmt.Errorf("read subtask %q of source %q: %w", name, r.source, err)
	}
	log := r.log.With(zap.String("task", name), zap.Int64("rev", rev))
	ts, _ := r.tasks.get(name)

	if !r.runnable(name, item, ts, log) {
		return nil
	}
	if ts == nil {
		ts = &taskState{st: newSubTask(r.life, item.Config, r.factory, r.log), configRev: item.ConfigRevision}
		if err := r.tasks.put(name, ts); err != nil {
			r.refused(ts.st, log, err)
			return nil
		}
		log.Info("subtask created", zap.String("expect", string(item.Stage.Expect)))
	} else if item.ConfigRevision != ts.configRev {
		if ts = r.applyConfig(ctx, name, ts, item, log); ts == nil {
			return nil
		}
	}
	r.applyStage(ctx, ts, item.Stage, log)
	r.applyValidator(ctx, ts, item.ValidatorStage, log)
	return nil
}

// runnable records what is wrong with the keys of task name, if anything,
// and reports whether the subtask may run as they say. Without a stage the
// subtask must not exist (a config alone is a task being prepared by the
// master); a stage without config removes it; a value that cannot be read
// or used leaves whatever runs as it is, since it says nothing about what
// the master wants.
func (r *subTaskReconciler) runnable(name string, item *ha.SubTaskItem, ts *taskState, log *zap.Logger) bool {
	switch {
	case item == nil || (item.Stage == nil && item.Err == nil):
		r.setErr(name, nil)
		r.setWarn(name, nil)
		if ts != nil {
			log.Info("stage deleted; closing subtask")
			r.remove(name, ts)
		}
		return false
	case item.Err != nil:
		log.Error("malformed subtask key in etcd; fix the value, the subtask keeps its current state",
			zap.Error(item.Err))
		r.setErr(name, errs.New(CodeSubTaskValueMalformed, false,
			"subtask %q: malformed etcd value: %v; rewrite the key with valid JSON", name, item.Err))
		return false
	case item.Config == nil:
		log.Error("stage without config: subtask removed; put the task config or delete the stage")
		r.setErr(name, errs.New(CodeSubTaskStageWithoutConfig, false,
			"subtask %q: stage key exists but config key %s is missing; put the config or delete the stage",
			name, r.store.Keys().SubTaskConfig(r.source, name)))
		if ts != nil {
			r.remove(name, ts)
		}
		return false
	}
	changed := ts == nil || item.ConfigRevision != ts.configRev
	r.setWarn(name, r.warning(item, changed, log))
	if err := r.checkConfig(name, item.Config); err != nil {
		log.Error("invalid subtask config; the subtask keeps its current state", zap.Error(err))
		r.setErr(name, errs.New(CodeSubTaskConfigInvalid, false, "subtask %q: %v", name, err))
		return false
	}
	if _, err := resolveSubTask(item.Config, r.secretKey); err != nil {
		log.Error("subtask password cannot be decrypted; the subtask keeps its current state", zap.Error(err))
		r.setErr(name, err)
		return false
	}
	r.setErr(name, nil)
	return true
}

// warning is configWarning for a subtask's config, stage and validator
// stage values.
func (r *subTaskReconciler) warning(item *ha.SubTaskItem, changed bool, log *zap.Logger) *errs.Error {
	keys := r.store.Keys()
	values := []valueNotes{{key: keys.SubTaskConfig(r.source, item.Name), unknown: item.Config.Notes.Unknown, ignored: item.Config.Notes.Ignored}}
	for _, st := range []struct {
		stage *ha.Stage
		key   string
	}{{item.Stage, keys.SubTaskStage(r.source, item.Name)}, {item.ValidatorStage, keys.ValidatorStage(r.source, item.Name)}} {
		if st.stage != nil && st.stage.Unknown != "" {
			values = append(values, valueNotes{key: st.key, unknown: st.stage.UnknownFields()})
		}
	}
	return configWarning(log, fmt.Sprintf("subtask %q", item.Name), r.clock.Now(), changed, values...)
}

func (r *subTaskReconciler) checkConfig(name string, cfg *config.SubTaskConfig) error {
	if cfg.Name != name || cfg.SourceID != r.source {
		return fmt.Errorf("config names task %q of source %q but sits under the key of task %q of source %q",
			cfg.Name, cfg.SourceID, name, r.source)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	return r.factory.CheckMode(cfg.TaskMode)
}

// applyConfig applies a new config revision to an existing subtask: through
// pause → update → resume when its unit supports it, else by recreating the
// subtask (it then resumes from its saved progress).
// It returns the task's state, which is new when the subtask was recreated,
// or nil when the source worker is stopping and refused the new one.
func (r *subTaskReconciler) applyConfig(ctx context.Context, name string, ts *taskState, item *ha.SubTaskItem, log *zap.Logger) *taskState {
	if reflect.DeepEqual(ts.st.Config(), item.Config) {
		ts.configRev = item.ConfigRevision
		return ts
	}
	wasRunning := ts.st.Stage() == stage.Running
	if wasRunning {
		if err := ts.st.Pause(ctx); err != nil {
			log.Warn("pause for config update failed; recreating the subtask", zap.Error(err))
		}
	}
	err := ts.st.Update(ctx, item.Config)
	switch {
	case err == nil:
		log.Info("config updated in place (pause, update, resume)")
		ts.configRev = item.ConfigRevision
		if wasRunning && item.Stage.Expect == stage.Running {
			if err := ts.st.Resume(ctx); err != nil {
				log.Warn("resume after config update failed", zap.Error(err))
			}
		}
		return ts
	case errors.Is(err, unit.ErrUpdateUnsupported):
		log.Info("unit cannot update in place; recreating the subtask with the new config")
	default:
		log.Warn("config update failed; recreating the subtask with the new config", zap.Error(err))
	}
	ts.st.Close()
	nts := &taskState{st: newSubTask(r.life, item.Config, r.factory, r.log), configRev: item.ConfigRevision}
	if err := r.tasks.put(name, nts); err != nil {
		r.refused(nts.st, log, err)
		return nil
	}
	return nts
}

// applyStage moves the subtask toward the expected stage (driveStage).
func (r *subTaskReconciler) applyStage(ctx context.Context, ts *taskState, want *ha.Stage, log *zap.Logger) {
	driveStage(ctx, ts.st, want, ts.stageRev, func(ctx context.Context) error {
		ts.st.Run(ctx)
		return nil
	}, nil, log)
	ts.stageRev = want.Revision
}

// applyValidator starts the subtask's validator when its stage is Running
// and stops it otherwise (Stopped, or no validator stage).
func (r *subTaskReconciler) applyValidator(ctx context.Context, ts *taskState, want *ha.Stage, log *zap.Logger) {
	if want == nil || want.Expect != stage.Running {
		ts.st.StopValidator()
		return
	}
	if err := ts.st.StartValidator(ctx); err != nil {
		log.Error("validator did not start", zap.Error(err))
		r.setErr(ts.st.Name(), err)
	}
}
