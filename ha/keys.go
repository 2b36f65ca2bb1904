package ha

import (
	"fmt"
	"strings"

	"github.com/dmworker/dm-worker/config"
)

// DefaultPrefix is the cluster prefix P when none is configured.
const DefaultPrefix = "/dm"

// Key kinds under the prefix (DESIGN.md §3).
const (
	kindWorkerInfo     = "/worker/info/"
	kindKeepalive      = "/worker/keepalive/"
	kindSourceConfig   = "/source/config/"
	kindBound          = "/source/bound/"
	kindRelayBound     = "/source/relay/"
	kindRelayStage     = "/stage/relay/"
	kindSubTaskConfig  = "/task/config/"
	kindSubTaskStage   = "/stage/subtask/"
	kindValidatorStage = "/stage/validator/"
	kindStreamConfig   = "/stream/config/"
	kindStreamStage    = "/stage/stream/"
	kindStatus         = "/status/"
	// kindSchedulerLeader is the election prefix itself (no trailing slash:
	// concurrency.NewElection appends one).
	kindSchedulerLeader = "/scheduler/leader"
)

// Keys builds and parses the keys of one cluster prefix. Prefix has no
// trailing slash ("/dm"). Builders do not validate names; the Store does
// before writing.
type Keys struct{ Prefix string }

// WorkerInfo is P/worker/info/{worker}.
func (k Keys) WorkerInfo(worker string) string { return k.WorkerInfoPrefix() + worker }

// WorkerInfoPrefix is P/worker/info/.
func (k Keys) WorkerInfoPrefix() string { return k.Prefix + kindWorkerInfo }

// Keepalive is P/worker/keepalive/{worker}.
func (k Keys) Keepalive(worker string) string { return k.KeepalivePrefix() + worker }

// KeepalivePrefix is P/worker/keepalive/.
func (k Keys) KeepalivePrefix() string { return k.Prefix + kindKeepalive }

// SourceConfig is P/source/config/{source}.
func (k Keys) SourceConfig(source string) string { return k.SourceConfigPrefix() + source }

// SourceConfigPrefix is P/source/config/.
func (k Keys) SourceConfigPrefix() string { return k.Prefix + kindSourceConfig }

// Bound is P/source/bound/{worker}.
func (k Keys) Bound(worker string) string { return k.BoundPrefix() + worker }

// BoundPrefix is P/source/bound/.
func (k Keys) BoundPrefix() string { return k.Prefix + kindBound }

// RelayBound is P/source/relay/{worker}.
func (k Keys) RelayBound(worker string) string { return k.RelayBoundPrefix() + worker }

// RelayBoundPrefix is P/source/relay/.
func (k Keys) RelayBoundPrefix() string { return k.Prefix + kindRelayBound }

// RelayStage is P/stage/relay/{source}.
func (k Keys) RelayStage(source string) string { return k.RelayStagePrefix() + source }

// RelayStagePrefix is P/stage/relay/.
func (k Keys) RelayStagePrefix() string { return k.Prefix + kindRelayStage }

// SubTaskConfig is P/task/config/{source}/{task}.
func (k Keys) SubTaskConfig(source, task string) string { return k.SubTaskConfigPrefix(source) + task }

// SubTaskConfigPrefix is P/task/config/{source}/.
func (k Keys) SubTaskConfigPrefix(source string) string {
	return k.perSource(kindSubTaskConfig, source)
}

// SubTaskStage is P/stage/subtask/{source}/{task}.
func (k Keys) SubTaskStage(source, task string) string { return k.SubTaskStagePrefix(source) + task }

// SubTaskStagePrefix is P/stage/subtask/{source}/.
func (k Keys) SubTaskStagePrefix(source string) string { return k.perSource(kindSubTaskStage, source) }

// ValidatorStage is P/stage/validator/{source}/{task}.
func (k Keys) ValidatorStage(source, task string) string {
	return k.ValidatorStagePrefix(source) + task
}

// ValidatorStagePrefix is P/stage/validator/{source}/.
func (k Keys) ValidatorStagePrefix(source string) string {
	return k.perSource(kindValidatorStage, source)
}

// StreamConfig is P/stream/config/{source}/{stream}.
func (k Keys) StreamConfig(source, stream string) string {
	return k.StreamConfigPrefix(source) + stream
}

// StreamConfigPrefix is P/stream/config/{source}/.
func (k Keys) StreamConfigPrefix(source string) string { return k.perSource(kindStreamConfig, source) }

// StreamStage is P/stage/stream/{source}/{stream}.
func (k Keys) StreamStage(source, stream string) string { return k.StreamStagePrefix(source) + stream }

// StreamStagePrefix is P/stage/stream/{source}/.
func (k Keys) StreamStagePrefix(source string) string { return k.perSource(kindStreamStage, source) }

// Status is P/status/{worker}.
func (k Keys) Status(worker string) string { return k.StatusPrefix() + worker }

// StatusPrefix is P/status/.
func (k Keys) StatusPrefix() string { return k.Prefix + kindStatus }

// SchedulerLeader is P/scheduler/leader, the prefix of the scheduler's
// concurrency.Election; the value of its keys is the leader worker's name.
func (k Keys) SchedulerLeader() string { return k.Prefix + kindSchedulerLeader }

// perSource is P+kind+{source}/, the prefix of the named keys of a source.
func (k Keys) perSource(kind, source string) string { return k.Prefix + kind + source + "/" }

// parse1 returns the one name of a key of the given kind (P+kind+{name}),
// validated as a nameKind name.
func (k Keys) parse1(key, kind, nameKind string) (string, error) {
	name, err := k.trim(key, kind)
	if err != nil {
		return "", err
	}
	return name, validKeyName(key, nameKind, name)
}

// parse2 returns the source and the task/stream name of a key of the given
// kind (P+kind+{source}/{name}), both validated.
func (k Keys) parse2(key, kind, nameKind string) (source, name string, err error) {
	rest, err := k.trim(key, kind)
	if err != nil {
		return "", "", err
	}
	source, name, ok := strings.Cut(rest, "/")
	if !ok {
		return "", "", fmt.Errorf("%w: %q has no {source}/{%s} after %s", ErrBadKey, key, nameKind, k.Prefix+kind)
	}
	if err := validKeyName(key, "source", source); err != nil {
		return "", "", err
	}
	if err := validKeyName(key, nameKind, name); err != nil {
		return "", "", err
	}
	return source, name, nil
}

// trim returns what follows P+kind in key.
func (k Keys) trim(key, kind string) (string, error) {
	rest, ok := strings.CutPrefix(key, k.Prefix+kind)
	if !ok {
		return "", fmt.Errorf("%w: %q is not under %s", ErrBadKey, key, k.Prefix+kind)
	}
	return rest, nil
}

// validKeyName checks a nameKind name read from key.
func validKeyName(key, nameKind, name string) error {
	if err := config.ValidateName(nameKind, name); err != nil {
		return fmt.Errorf("key %s: %w", key, err)
	}
	return nil
}

// lastSegment returns what follows prefix in key, for listing keys whose
// name is invalid under the raw name.
func lastSegment(key, prefix string) string {
	return strings.TrimPrefix(key, prefix)
}
