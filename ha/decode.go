package ha

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/stage"
)

// Decoding of single key-values, used by the watcher and by the Get*
// functions. The key gives the names (validated), the value the rest. A nil
// value means the key was deleted: stage and bound values then have
// IsDeleted set and their names from the key; config decoders return nil.
// Every error wraps ErrMalformed, ErrBadKey or config.ErrInvalidName.
//
// Config values are decoded like files (config.DecodeXxx over the same
// defaults, then Adjust) in config.Lenient mode: a field the worker does not
// know does not fail the decode; its path is listed in the config's
// Notes.Unknown, DM fields without effect in Notes.Ignored. Stage, bound,
// worker-info and keepalive values may omit the names their key holds
// (source, task, worker, name): they are taken from the key; a name that is
// given must agree with the key.

// DecodeWorkerInfo decodes P/worker/info/{worker}. On delete it returns
// the worker name from the key.
func (s *Store) DecodeWorkerInfo(key string, value []byte) (WorkerInfo, error) {
	worker, err := s.keys.parse1(key, kindWorkerInfo, "worker")
	if err != nil {
		return WorkerInfo{}, err
	}
	if value == nil {
		return WorkerInfo{Name: worker}, nil
	}
	var info WorkerInfo
	if err := unmarshal("worker info", key, value, &info); err != nil {
		return WorkerInfo{}, err
	}
	if info.Name == "" {
		info.Name = worker // omitted: the key names it
	}
	if info.Name != worker {
		return WorkerInfo{}, mismatch("worker info", key, "name", info.Name, worker)
	}
	return info, nil
}

// DecodeKeepalive decodes P/worker/keepalive/{worker}. On delete it returns
// the worker name from the key.
func (s *Store) DecodeKeepalive(key string, value []byte) (KeepaliveInfo, error) {
	worker, err := s.keys.parse1(key, kindKeepalive, "worker")
	if err != nil {
		return KeepaliveInfo{}, err
	}
	if value == nil {
		return KeepaliveInfo{Name: worker}, nil
	}
	var ka KeepaliveInfo
	if err := unmarshal("keepalive", key, value, &ka); err != nil {
		return KeepaliveInfo{}, err
	}
	if ka.Name == "" {
		ka.Name = worker // omitted: the key names it
	}
	if ka.Name != worker {
		return KeepaliveInfo{}, mismatch("keepalive", key, "name", ka.Name, worker)
	}
	return ka, nil
}

// DecodeSourceConfig decodes P/source/config/{source}; nil on delete.
func (s *Store) DecodeSourceConfig(key string, value []byte) (*config.SourceConfig, error) {
	source, err := s.keys.parse1(key, kindSourceConfig, "source")
	if err != nil || value == nil {
		return nil, err
	}
	cfg, err := config.DecodeSourceConfig(value, config.Lenient)
	if err != nil {
		return nil, malformed("source config", key, err)
	}
	if cfg.SourceID != source {
		return nil, mismatch("source config", key, "source-id", cfg.SourceID, source)
	}
	return cfg, nil
}

// DecodeBound decodes P/source/bound/{worker}.
func (s *Store) DecodeBound(key string, value []byte) (Bound, error) {
	return s.decodeBound(key, value, kindBound, "bound")
}

// DecodeRelayBound decodes P/source/relay/{worker}.
func (s *Store) DecodeRelayBound(key string, value []byte) (Bound, error) {
	return s.decodeBound(key, value, kindRelayBound, "relay bound")
}

func (s *Store) decodeBound(key string, value []byte, kind, what string) (Bound, error) {
	worker, err := s.keys.parse1(key, kind, "worker")
	if err != nil {
		return Bound{}, err
	}
	if value == nil {
		return Bound{Worker: worker, IsDeleted: true}, nil
	}
	var b Bound
	if err := unmarshal(what, key, value, &b); err != nil {
		return Bound{}, err
	}
	if b.Worker == "" {
		b.Worker = worker // omitted: the key names it
	}
	if b.Worker != worker {
		return Bound{}, mismatch(what, key, "worker", b.Worker, worker)
	}
	if err := config.ValidateName("source", b.Source); err != nil {
		return Bound{}, malformed(what, key, err)
	}
	return b, nil
}

// DecodeRelayStage decodes P/stage/relay/{source}.
func (s *Store) DecodeRelayStage(key string, value []byte) (Stage, error) {
	source, err := s.keys.parse1(key, kindRelayStage, "source")
	if err != nil {
		return Stage{}, err
	}
	return decodeStage("relay stage", key, value, source, "", stage.Stage.IsExpectable)
}

// DecodeSubTaskConfig decodes P/task/config/{source}/{task}; nil on delete.
func (s *Store) DecodeSubTaskConfig(key string, value []byte) (*config.SubTaskConfig, error) {
	source, task, err := s.keys.parse2(key, kindSubTaskConfig, "task")
	if err != nil || value == nil {
		return nil, err
	}
	cfg, err := config.DecodeSubTaskConfig(value, config.Lenient)
	if err != nil {
		return nil, malformed("subtask config", key, err)
	}
	if cfg.SourceID != source {
		return nil, mismatch("subtask config", key, "source-id", cfg.SourceID, source)
	}
	if cfg.Name != task {
		return nil, mismatch("subtask config", key, "name", cfg.Name, task)
	}
	return cfg, nil
}

// DecodeSubTaskStage decodes P/stage/subtask/{source}/{task}.
func (s *Store) DecodeSubTaskStage(key string, value []byte) (Stage, error) {
	source, task, err := s.keys.parse2(key, kindSubTaskStage, "task")
	if err != nil {
		return Stage{}, err
	}
	return decodeStage("subtask stage", key, value, source, task, stage.Stage.IsExpectable)
}

// DecodeValidatorStage decodes P/stage/validator/{source}/{task}; only
// Running and Stopped are valid.
func (s *Store) DecodeValidatorStage(key string, value []byte) (Stage, error) {
	source, task, err := s.keys.parse2(key, kindValidatorStage, "task")
	if err != nil {
		return Stage{}, err
	}
	return decodeStage("validator stage", key, value, source, task, validatorExpectable)
}

// DecodeStreamConfig decodes P/stream/config/{source}/{stream}; nil on
// delete.
func (s *Store) DecodeStreamConfig(key string, value []byte) (*config.StreamConfig, error) {
	source, stream, err := s.keys.parse2(key, kindStreamConfig, "stream")
	if err != nil || value == nil {
		return nil, err
	}
	cfg, err := config.DecodeStreamConfig(value, config.Lenient)
	if err != nil {
		return nil, malformed("stream config", key, err)
	}
	if cfg.SourceID != source {
		return nil, mismatch("stream config", key, "source-id", cfg.SourceID, source)
	}
	if cfg.Name != stream {
		return nil, mismatch("stream config", key, "name", cfg.Name, stream)
	}
	return cfg, nil
}

// DecodeStreamStage decodes P/stage/stream/{source}/{stream}; Task holds
// the stream name.
func (s *Store) DecodeStreamStage(key string, value []byte) (Stage, error) {
	source, stream, err := s.keys.parse2(key, kindStreamStage, "stream")
	if err != nil {
		return Stage{}, err
	}
	return decodeStage("stream stage", key, value, source, stream, stage.Stage.IsExpectable)
}

// DecodeStatus checks the worker name of P/status/{worker} and returns the
// value as is (nil on delete).
func (s *Store) DecodeStatus(key string, value []byte) ([]byte, error) {
	if _, err := s.keys.parse1(key, kindStatus, "worker"); err != nil {
		return nil, err
	}
	return value, nil
}

func validatorExpectable(st stage.Stage) bool {
	return st == stage.Running || st == stage.Stopped
}

// decodeStage decodes a stage value whose key names source and task (task
// is empty for relay) and accepts only the stages allowed says.
func decodeStage(what, key string, value []byte, source, task string, allowed func(stage.Stage) bool) (Stage, error) {
	if value == nil {
		return Stage{Source: source, Task: task, IsDeleted: true}, nil
	}
	var st Stage
	notes, err := config.DecodeValue(what, value, &st, config.Lenient)
	if err != nil {
		return Stage{}, malformed(what, key, err)
	}
	st.Unknown = strings.Join(notes.Unknown, unknownSep)
	// Names the value leaves out come from the key; names it gives must
	// agree with the key.
	if st.Source == "" {
		st.Source = source
	}
	if st.Task == "" {
		st.Task = task
	}
	if !allowed(st.Expect) {
		return Stage{}, malformed(what, key, fmt.Errorf("expect %q is not allowed here", st.Expect))
	}
	if st.Source != source {
		return Stage{}, mismatch(what, key, "source", st.Source, source)
	}
	if st.Task != task {
		return Stage{}, mismatch(what, key, "task", st.Task, task)
	}
	return st, nil
}

func unmarshal(what, key string, value []byte, v any) error {
	if err := json.Unmarshal(value, v); err != nil {
		return malformed(what, key, err)
	}
	return nil
}

func mismatch(what, key, field, got, want string) error {
	return malformed(what, key, fmt.Errorf("%s %q disagrees with the key's %q", field, got, want))
}
