package ha

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/stage"
)

// SubTaskItem is what etcd holds for one task of a source, read at one
// revision.
type SubTaskItem struct {
	Name           string
	Config         *config.SubTaskConfig // nil when the config key is absent
	ConfigRevision int64                 // ModRevision of the config key (0 when absent)
	Stage          *Stage                // nil when absent
	ValidatorStage *Stage                // nil when absent
	// Err is set when a config or stage value is malformed or the key holds
	// an invalid name; the item is still listed, with whatever did decode.
	Err error
}

// SubTaskSnapshot is every task of a source that has any of its config,
// stage or validator stage key, by task name, at Revision.
type SubTaskSnapshot struct {
	Revision int64
	Items    map[string]*SubTaskItem
}

// PutSubTaskConfig writes P/task/config/{cfg.SourceID}/{cfg.Name}.
func (s *Store) PutSubTaskConfig(ctx context.Context, cfg *config.SubTaskConfig) (int64, error) {
	if err := validateSubTaskConfig(cfg); err != nil {
		return 0, err
	}
	return s.put(ctx, s.keys.SubTaskConfig(cfg.SourceID, cfg.Name), cfg)
}

// DeleteSubTaskConfig deletes P/task/config/{source}/{task}.
func (s *Store) DeleteSubTaskConfig(ctx context.Context, source, task string) (int64, error) {
	return s.del(ctx, s.keys.SubTaskConfig(source, task))
}

// PutSubTaskStage writes P/stage/subtask/{st.Source}/{st.Task}.
func (s *Store) PutSubTaskStage(ctx context.Context, st Stage) (int64, error) {
	if err := validateStage("subtask stage", "task", st, stage.Stage.IsExpectable); err != nil {
		return 0, err
	}
	return s.put(ctx, s.keys.SubTaskStage(st.Source, st.Task), st)
}

// DeleteSubTaskStage deletes P/stage/subtask/{source}/{task}, which drops
// the subtask.
func (s *Store) DeleteSubTaskStage(ctx context.Context, source, task string) (int64, error) {
	return s.del(ctx, s.keys.SubTaskStage(source, task))
}

// PutValidatorStage writes P/stage/validator/{st.Source}/{st.Task}; only
// Running and Stopped are allowed.
func (s *Store) PutValidatorStage(ctx context.Context, st Stage) (int64, error) {
	if err := validateStage("validator stage", "task", st, validatorExpectable); err != nil {
		return 0, err
	}
	return s.put(ctx, s.keys.ValidatorStage(st.Source, st.Task), st)
}

// DeleteValidatorStage deletes P/stage/validator/{source}/{task}.
func (s *Store) DeleteValidatorStage(ctx context.Context, source, task string) (int64, error) {
	return s.del(ctx, s.keys.ValidatorStage(source, task))
}

// PutSubTask writes a subtask's config and stage in one transaction. Empty
// st.Source and st.Task are taken from cfg; other values must agree with it.
func (s *Store) PutSubTask(ctx context.Context, cfg *config.SubTaskConfig, st Stage) (int64, error) {
	if err := validateSubTaskConfig(cfg); err != nil {
		return 0, err
	}
	if st.Source == "" {
		st.Source = cfg.SourceID
	}
	if st.Task == "" {
		st.Task = cfg.Name
	}
	if st.Source != cfg.SourceID || st.Task != cfg.Name {
		return 0, fmt.Errorf("ha: put subtask %s/%s: stage names %s/%s disagree with the config",
			cfg.SourceID, cfg.Name, st.Source, st.Task)
	}
	if err := validateStage("subtask stage", "task", st, stage.Stage.IsExpectable); err != nil {
		return 0, err
	}
	cfgOp, err := putOp(s.keys.SubTaskConfig(cfg.SourceID, cfg.Name), cfg)
	if err != nil {
		return 0, err
	}
	stOp, err := putOp(s.keys.SubTaskStage(st.Source, st.Task), st)
	if err != nil {
		return 0, err
	}
	_, rev, err := s.txn(ctx, "put subtask "+cfg.SourceID+"/"+cfg.Name, cfgOp, stOp)
	return rev, err
}

// subTaskKind is a subtask's keys: config, stage, validator stage.
var subTaskKind = itemKind[*SubTaskItem]{
	what:     "subtask",
	nameKind: "task",
	newItem:  func(name string) *SubTaskItem { return &SubTaskItem{Name: name} },
	parts: []itemPart[*SubTaskItem]{
		part(Keys.SubTaskConfigPrefix, (*Store).DecodeSubTaskConfig, func(it *SubTaskItem, cfg *config.SubTaskConfig, rev int64) {
			it.Config, it.ConfigRevision = cfg, rev
		}),
		part(Keys.SubTaskStagePrefix, (*Store).DecodeSubTaskStage, func(it *SubTaskItem, st Stage, _ int64) { it.Stage = &st }),
		part(Keys.ValidatorStagePrefix, (*Store).DecodeValidatorStage, func(it *SubTaskItem, st Stage, _ int64) { it.ValidatorStage = &st }),
	},
}

// GetSubTasks reads the configs, stages and validator stages of every task
// of source in one transaction.
func (s *Store) GetSubTasks(ctx context.Context, source string) (SubTaskSnapshot, error) {
	items, rev, err := getItems(ctx, s, &subTaskKind, source)
	if err != nil {
		return SubTaskSnapshot{}, err
	}
	return SubTaskSnapshot{Revision: rev, Items: items}, nil
}

// GetSubTask reads the config, stage and validator stage of one task in one
// transaction. The item is nil when none of the three keys exists.
func (s *Store) GetSubTask(ctx context.Context, source, task string) (*SubTaskItem, int64, error) {
	return getItem(ctx, s, &subTaskKind, source, task)
}

func validateSubTaskConfig(cfg *config.SubTaskConfig) error {
	if cfg == nil {
		return errors.New("ha: put subtask config: nil config")
	}
	if err := validateNames(cfg.SourceID, "task", cfg.Name); err != nil {
		return fmt.Errorf("ha: put subtask config: %w", err)
	}
	return nil
}

// validateNames checks a source name and a task or stream name.
func validateNames(source, nameKind, name string) error {
	if err := config.ValidateName("source", source); err != nil {
		return err
	}
	return config.ValidateName(nameKind, name)
}

// validateStage checks the names and the expected stage of a stage to write.
func validateStage(what, nameKind string, st Stage, allowed func(stage.Stage) bool) error {
	if err := validateNames(st.Source, nameKind, st.Task); err != nil {
		return fmt.Errorf("ha: put %s: %w", what, err)
	}
	if !allowed(st.Expect) {
		return fmt.Errorf("ha: put %s of %s/%s: expect %q is not allowed here", what, st.Source, st.Task, st.Expect)
	}
	return nil
}

// putOp is a Put of v as JSON at key, for transactions.
func putOp(key string, v any) (clientv3.Op, error) {
	data, err := jsonValue(key, v)
	if err != nil {
		return clientv3.Op{}, err
	}
	return clientv3.OpPut(key, data), nil
}
