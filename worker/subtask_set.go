package worker

import (
	"context"
	"maps"
	"sync"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/secret"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/unit"
)

// subTaskReconciler is the Reconciler of a source's subtask and validator
// keys and the owner of the local subtasks (this file: their set and what
// is recorded about them; subtask_reconcile.go: the reconcile).
type subTaskReconciler struct {
	source    string
	store     *ha.Store
	factory   unit.Factory
	secretKey *secret.Key
	clock     Clock
	log       *zap.Logger
	// enabled reports whether subtask handling is on; reconciles do nothing
	// while it is off.
	enabled func() bool
	// life is the SourceWorker's context (set by its Start, before any
	// reconcile): its end cancels every subtask's pipeline.
	life context.Context
	// bad are subtask keys whose task names are invalid, for status.
	bad *badKeys

	// tasks are the local subtasks, and the control-plane errors of tasks
	// (orphan stage, malformed value, invalid config).
	tasks *localSet[*taskState]

	mu sync.Mutex // guards the fields below
	// warns are config warnings of tasks (config-unknown-field), by task
	// name; shown in status beside the errors.
	warns map[string]errs.Error
	// sealStop is how the shutdown sweep stops subtasks (Close or Kill),
	// set when it seals the set; a subtask the sealed set refuses is
	// stopped with it. nil before.
	sealStop func(*SubTask)
}

// taskState is a local subtask and the etcd revisions it was last
// reconciled with.
type taskState struct {
	st        *SubTask
	configRev int64
	stageRev  int64
}

func newSubTaskReconciler(cfg SourceWorkerConfig, log *zap.Logger, enabled func() bool) *subTaskReconciler {
	return &subTaskReconciler{
		source: cfg.Source.SourceID, store: cfg.Store, factory: cfg.Factory, secretKey: cfg.SecretKey,
		clock: cfg.Clock, log: log, enabled: enabled,
		bad:   newBadKeys(cfg.Clock.Now),
		tasks: newLocalSet[*taskState](cfg.Clock, "subtask"),
		warns: make(map[string]errs.Error),
	}
}

// watchSpecs are the watched prefixes of the source's subtask config,
// subtask stage and validator stage keys; each key enqueues its task.
func (r *subTaskReconciler) watchSpecs() []watchSpec {
	keys := r.store.Keys()
	keyOf := func(rest string) (string, bool) {
		return queueKey(kindSubTask, rest), config.ValidateName("task", rest) == nil
	}
	var specs []watchSpec
	for _, p := range []struct{ kind, prefix string }{
		{"subtask-config", keys.SubTaskConfigPrefix(r.source)},
		{"subtask-stage", keys.SubTaskStagePrefix(r.source)},
		{"validator-stage", keys.ValidatorStagePrefix(r.source)},
	} {
		specs = append(specs, watchSpec{kind: p.kind, prefix: p.prefix, keyOf: keyOf, extra: r.localKeys, bad: r.bad})
	}
	return specs
}

// localKeys are the queue keys of every task known locally: a running
// subtask or a recorded error. A resync enqueues them so that those whose
// keys vanished during a gap are reconciled away.
func (r *subTaskReconciler) localKeys() []string {
	var keys []string
	for _, name := range r.tasks.names() {
		keys = append(keys, queueKey(kindSubTask, name))
	}
	return keys
}

// get returns the local subtask named name, or nil.
func (r *subTaskReconciler) get(name string) *SubTask {
	if ts, ok := r.tasks.get(name); ok {
		return ts.st
	}
	return nil
}

// list returns the local subtasks.
func (r *subTaskReconciler) list() []*SubTask {
	var out []*SubTask
	for _, ts := range r.tasks.values() {
		out = append(out, ts.st)
	}
	return out
}

// remove forgets ts (unless it was replaced meanwhile) and closes its
// subtask and validator.
func (r *subTaskReconciler) remove(name string, ts *taskState) {
	r.tasks.forget(name, ts)
	ts.st.StopValidator()
	ts.st.Close()
}

// removeAllAsync removes every subtask and what is recorded about the
// tasks, seals the set (a reconcile can add none after it) and stops the
// subtasks concurrently; the caller waits on wg.
func (r *subTaskReconciler) removeAllAsync(wg *sync.WaitGroup, stop func(*SubTask)) {
	r.mu.Lock()
	r.sealStop = stop
	r.mu.Unlock()
	tasks := r.tasks.takeAll()
	r.mu.Lock()
	r.warns = make(map[string]errs.Error)
	r.mu.Unlock()
	for _, ts := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stop(ts.st)
		}()
	}
}

// refused stops st, which the sealed set refused, as the shutdown sweep
// stops the subtasks it took (Close or Kill).
func (r *subTaskReconciler) refused(st *SubTask, log *zap.Logger, err error) {
	r.mu.Lock()
	stop := r.sealStop
	r.mu.Unlock()
	if stop == nil {
		stop = (*SubTask).Close
	}
	stop(st)
	log.Info("subtask not kept", zap.Error(err))
}

// setErr records (err != nil) or clears a control-plane error of a task.
func (r *subTaskReconciler) setErr(name string, err error) { r.tasks.setErr(name, err) }

// setWarn records (or, with nil, clears) the config warning of a task.
func (r *subTaskReconciler) setWarn(name string, warn *errs.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if warn == nil {
		delete(r.warns, name)
		return
	}
	if old, ok := r.warns[name]; ok && old.Message == warn.Message {
		return // keep the time it was first seen
	}
	r.warns[name] = *warn
}

// recorded returns copies of the errors and warnings of tasks, for status.
func (r *subTaskReconciler) recorded() (taskErrs, taskWarns map[string]errs.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tasks.errors(), maps.Clone(r.warns)
}

// purgeBlocker names the subtask that needs the oldest relay location: its
// unit's checkpoint, or its config's start location when it has none, or
// its running validator's checkpoint. Paused
// and new subtasks count, and so do subtasks in their dump or load unit,
// whatever their stage: a task in mode all starts syncing at its snapshot
// when the load is done, hours later maybe. Subtasks running their sync
// unit register their own relay readers.
func (r *subTaskReconciler) purgeBlocker() (string, binlog.Location, bool) {
	var (
		name  string
		first binlog.Location
	)
	for _, st := range r.list() {
		u := st.Unit()
		copying := u != nil && (u.Type() == unit.TypeDump || u.Type() == unit.TypeLoad)
		if s := st.Stage(); s != stage.Paused && s != stage.New && !copying {
			continue
		}
		loc, ok := binlog.Location{}, false
		if h, isHolder := u.(unit.CheckpointHolder); isHolder {
			loc, ok = h.CheckpointLocation()
		}
		if !ok {
			m := st.Config().Meta
			loc, ok = binlog.Location{Name: m.BinlogName, Pos: m.BinlogPos, GTID: m.BinlogGTID}, m.BinlogName != ""
		}
		if ok && (name == "" || loc.Compare(first) < 0) {
			name, first = "subtask "+st.Name(), loc
		}
	}
	for _, st := range r.list() {
		if loc, ok := validatorCheckpoint(st); ok && (name == "" || loc.Compare(first) < 0) {
			name, first = "the validator of subtask "+st.Name(), loc
		}
	}
	return name, first, name != ""
}

// validatorCheckpoint is the checkpoint of the subtask's running validator:
// it re-reads from there after a restart, while its relay reader only
// holds the files from where it reads now.
func validatorCheckpoint(st *SubTask) (binlog.Location, bool) {
	v := st.Validator()
	if v == nil {
		return binlog.Location{}, false
	}
	vs := v.Status()
	if vs.Stage != stage.Running || vs.Checkpoint == "" {
		return binlog.Location{}, false
	}
	loc, err := binlog.ParseLocation(vs.Checkpoint)
	return loc, err == nil
}
