package worker

import (
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
	// bad are subtask keys whose task names are invalid, for status.
	bad *badKeys

	mu sync.Mutex // guards the fields below
	// tasks are the local subtasks; only the reconcile of a task's key
	// adds, replaces or removes its entry.
	tasks map[string]*taskState
	// errs are control-plane errors of tasks (orphan stage, malformed
	// value, invalid config), by task name.
	errs map[string]errs.Error
	// warns are config warnings of tasks (config-unknown-field), by task
	// name; shown in status beside errs.
	warns map[string]errs.Error
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
		tasks: make(map[string]*taskState),
		errs:  make(map[string]errs.Error),
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
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.tasks)+len(r.errs))
	for name := range r.tasks {
		keys = append(keys, queueKey(kindSubTask, name))
	}
	for name := range r.errs {
		if _, ok := r.tasks[name]; !ok {
			keys = append(keys, queueKey(kindSubTask, name))
		}
	}
	return keys
}

// get returns the local subtask named name, or nil.
func (r *subTaskReconciler) get(name string) *SubTask {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ts, ok := r.tasks[name]; ok {
		return ts.st
	}
	return nil
}

// list returns the local subtasks.
func (r *subTaskReconciler) list() []*SubTask {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*SubTask, 0, len(r.tasks))
	for _, ts := range r.tasks {
		out = append(out, ts.st)
	}
	return out
}

// put makes ts the local state of task name.
func (r *subTaskReconciler) put(name string, ts *taskState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tasks[name] = ts
}

// remove forgets ts (unless it was replaced meanwhile) and closes its
// subtask and validator.
func (r *subTaskReconciler) remove(name string, ts *taskState) {
	r.mu.Lock()
	if r.tasks[name] == ts {
		delete(r.tasks, name)
	}
	r.mu.Unlock()
	ts.st.StopValidator()
	ts.st.Close()
}

// removeAll removes every subtask and stops them concurrently with stop.
func (r *subTaskReconciler) removeAll(stop func(*SubTask)) {
	var wg sync.WaitGroup
	r.removeAllAsync(&wg, stop)
	wg.Wait()
}

// removeAllAsync removes every subtask and what is recorded about the
// tasks, and stops the subtasks concurrently; the caller waits on wg.
func (r *subTaskReconciler) removeAllAsync(wg *sync.WaitGroup, stop func(*SubTask)) {
	r.mu.Lock()
	tasks := r.tasks
	r.tasks = make(map[string]*taskState)
	r.errs = make(map[string]errs.Error)
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

// setErr records (err != nil) or clears a control-plane error of a task.
func (r *subTaskReconciler) setErr(name string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.errs, name)
		return
	}
	r.errs[name] = errs.Entry(err, r.clock.Now())
}

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
	return maps.Clone(r.errs), maps.Clone(r.warns)
}

// purgeBlocker names the paused or new subtask that needs the oldest relay
// location: its unit's checkpoint, or its config's start location when it
// has none. Running subtasks register their own relay readers.
func (r *subTaskReconciler) purgeBlocker() (string, binlog.Location, bool) {
	var (
		name  string
		first binlog.Location
	)
	for _, st := range r.list() {
		if s := st.Stage(); s != stage.Paused && s != stage.New {
			continue
		}
		loc, ok := binlog.Location{}, false
		if h, isHolder := st.Unit().(unit.CheckpointHolder); isHolder {
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
	return name, first, name != ""
}
