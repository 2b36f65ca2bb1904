package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/secret"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/pkg/workqueue"
	"github.com/dmworker/dm-worker/unit"
)

// Queue keys: one per subtask, one for the relay.
const (
	subtaskKeyPrefix = "subtask/"
	relayKey         = "relay"
)

// Error codes of control-plane problems with a task's etcd keys.
const (
	CodeStageWithoutConfig = "subtask-stage-without-config"
	CodeMalformedValue     = "subtask-value-malformed"
	CodeInvalidConfig      = "subtask-config-invalid"
	CodeRelayMalformed     = "relay-stage-malformed"
	CodeRelayCreate        = "relay-create-failed"
	CodeInvalidTaskName    = "subtask-name-invalid"
)

// SourceWorkerConfig is what a SourceWorker is built from.
type SourceWorkerConfig struct {
	Source  *config.SourceConfig
	Store   *ha.Store
	Factory unit.Factory
	// SecretKey is the --secret-key-path key (nil: none). Subtask configs
	// whose target password cannot be resolved with it are refused in
	// status; the Factory resolves passwords for the units.
	SecretKey *secret.Key
	// NewRelay creates the relay holder; nil means relay cannot be enabled.
	NewRelay RelayFactory
	Metrics  *Metrics
	Logger   *zap.Logger
	Clock    Clock
	// Workers is the number of concurrent reconcilers (default 8).
	Workers int
	// CheckInterval is how often the auto-resume checker looks (default 1s).
	CheckInterval time.Duration
	// QuietWindow is how long work must run without error before its
	// auto-resume backoff rolls back to the minimum (default 5m).
	QuietWindow time.Duration
	// WatchBackoffMin/Max bound the relist backoff of the watch loops.
	WatchBackoffMin, WatchBackoffMax time.Duration
}

// SourceWorker manages one bound upstream source: it watches the subtask,
// validator and relay stage keys of the source and reconciles local
// subtasks, validators and the relay holder to them.
//
// Watch handlers only enqueue keys; reconcilers read config and stages of
// one task in one etcd transaction and converge local state to them
// (level-triggered). One key is never reconciled twice at the same time.
type SourceWorker struct {
	cfg    SourceWorkerConfig
	source string
	log    *zap.Logger
	queue  *workqueue.Queue
	// badKeys are subtask keys whose task names are invalid, for status.
	badKeys *badKeys

	cancel context.CancelFunc // cancels every goroutine started by Start
	wg     sync.WaitGroup     // Start's goroutines

	mu sync.Mutex // guards the fields below
	// subTasks are the local subtasks; only the reconciler of a task's key
	// adds, replaces or removes its entry.
	subTasks map[string]*taskState
	// taskErrs are control-plane errors of tasks (orphan stage, malformed
	// value, invalid config), by task name.
	taskErrs map[string]errs.Error
	// taskWarns are config warnings of tasks (config-unknown-field), by
	// task name; shown in status beside taskErrs.
	taskWarns map[string]errs.Error
	relay     RelayHolder
	relayErr  *errs.Error
	// relayWarn is the warning about unknown fields of the relay stage
	// value (config-unknown-field), nil when there are none.
	relayWarn *errs.Error
	// relayStageRev is the revision of the relay stage last acted on.
	relayStageRev int64
	// subWatches and relayWatches are the running watch loops of subtask
	// and relay keys; nil while that handling is disabled.
	subWatches   *watchSet
	relayWatches *watchSet
	closed       bool
}

// taskState is a local subtask and the etcd revisions it was last
// reconciled with.
type taskState struct {
	st        *SubTask
	configRev int64
	stageRev  int64
}

// NewSourceWorker builds a SourceWorker; nothing runs until Start.
func NewSourceWorker(cfg SourceWorkerConfig) *SourceWorker {
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = time.Second
	}
	if cfg.QuietWindow <= 0 {
		cfg.QuietWindow = 5 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	return &SourceWorker{
		cfg:       cfg,
		source:    cfg.Source.SourceID,
		log:       cfg.Logger.With(zap.String("source", cfg.Source.SourceID)),
		queue:     workqueue.New(50*time.Millisecond, 10*time.Second),
		subTasks:  make(map[string]*taskState),
		taskErrs:  make(map[string]errs.Error),
		taskWarns: make(map[string]errs.Error),
		badKeys:   &badKeys{now: cfg.Clock.Now, keys: make(map[string]time.Time)},
	}
}

// Source is the bound source's id.
func (w *SourceWorker) Source() string { return w.source }

// Start runs the reconcilers and the auto-resume checker until Close or
// Kill. Enable subtask and relay handling separately.
func (w *SourceWorker) Start(ctx context.Context) {
	ctx, w.cancel = context.WithCancel(ctx)
	for range w.cfg.Workers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.runReconciler(ctx)
		}()
	}
	chk := NewChecker(CheckerConfig{
		Enable:      w.cfg.Source.Checker.CheckEnable,
		Interval:    w.cfg.CheckInterval,
		BackoffMin:  w.cfg.Source.Checker.BackoffMin.Duration,
		BackoffMax:  w.cfg.Source.Checker.BackoffMax.Duration,
		QuietWindow: w.cfg.QuietWindow,
	}, w.resumables, w.cfg.Clock, w.cfg.Metrics, w.log)
	w.wg.Add(2)
	go func() {
		defer w.wg.Done()
		chk.Run(ctx)
	}()
	go func() {
		defer w.wg.Done()
		w.runStageGauge(ctx)
	}()
}

// EnableSubTasks starts watching the subtask and validator keys of the
// source; subtasks are created as their keys say.
func (w *SourceWorker) EnableSubTasks(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.subWatches != nil || w.closed {
		return
	}
	ws := &watchSet{}
	ctx, ws.cancel = context.WithCancel(ctx)
	w.subWatches = ws
	keys := ha.Keys{Prefix: w.cfg.Store.Prefix()}
	for kind, prefix := range map[string]string{
		"subtask-config":  keys.SubTaskConfigPrefix(w.source),
		"subtask-stage":   keys.SubTaskStagePrefix(w.source),
		"validator-stage": keys.ValidatorStagePrefix(w.source),
	} {
		w.watch(ctx, &ws.wg, kind, prefix, func(rest string) (string, bool) {
			return subtaskKeyPrefix + rest, config.ValidateName("task", rest) == nil
		}, w.localSubtaskKeys, w.badKeys)
	}
}

// DisableSubTasks stops watching subtask keys and closes every subtask
// gracefully.
func (w *SourceWorker) DisableSubTasks() {
	if !w.stopWatches(&w.subWatches) {
		return
	}
	w.removeAllSubTasks(func(st *SubTask) { st.Close() })
}

// EnableRelay starts watching the relay stage of the source.
func (w *SourceWorker) EnableRelay(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.relayWatches != nil || w.closed {
		return
	}
	ws := &watchSet{}
	ctx, ws.cancel = context.WithCancel(ctx)
	w.relayWatches = ws
	key := ha.Keys{Prefix: w.cfg.Store.Prefix()}.RelayStage(w.source)
	w.watch(ctx, &ws.wg, "relay-stage", key, func(rest string) (string, bool) {
		// The prefix is the key itself; longer keys belong to other sources.
		return relayKey, rest == ""
	}, func() []string { return []string{relayKey} }, nil)
}

// DisableRelay stops watching the relay stage and closes the relay.
func (w *SourceWorker) DisableRelay() {
	if !w.stopWatches(&w.relayWatches) {
		return
	}
	w.mu.Lock()
	r := w.relay
	w.relay, w.relayErr, w.relayWarn, w.relayStageRev = nil, nil, nil, 0
	w.mu.Unlock()
	if r != nil {
		r.Close()
	}
}

// watchSet is a group of watch loops started and stopped together.
type watchSet struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// stopWatches stops the watch loops in *field (nil when disabled), sets it
// to nil and waits for them; false when they were not running.
func (w *SourceWorker) stopWatches(field **watchSet) bool {
	w.mu.Lock()
	ws := *field
	*field = nil
	w.mu.Unlock()
	if ws == nil {
		return false
	}
	ws.cancel()
	ws.wg.Wait()
	return true
}

// RelayEnabled reports whether relay handling is on.
func (w *SourceWorker) RelayEnabled() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.relayWatches != nil
}

// Close stops watching, closes subtasks and relay gracefully (checkpoints
// flushed) and waits for every goroutine.
func (w *SourceWorker) Close() { w.stop(func(st *SubTask) { st.Close() }, RelayHolder.Close) }

// Kill stops everything at once without flushing, for lease loss: another
// worker may take the source over, and two workers must never write the
// same target.
func (w *SourceWorker) Kill() { w.stop(func(st *SubTask) { st.Kill() }, RelayHolder.Kill) }

func (w *SourceWorker) stop(stopTask func(*SubTask), stopRelay func(RelayHolder)) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	var watches []*watchSet
	for _, ws := range []*watchSet{w.subWatches, w.relayWatches} {
		if ws != nil {
			watches = append(watches, ws)
		}
	}
	w.subWatches, w.relayWatches = nil, nil
	r := w.relay
	w.relay = nil
	w.mu.Unlock()

	// Data plane first: on lease loss every write must stop before anything
	// else happens.
	var wg sync.WaitGroup
	w.removeAllSubTasksAsync(&wg, stopTask)
	if r != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stopRelay(r)
		}()
	}
	wg.Wait()

	for _, ws := range watches {
		ws.cancel()
	}
	w.queue.ShutDown()
	if w.cancel != nil {
		w.cancel()
	}
	for _, ws := range watches {
		ws.wg.Wait()
	}
	w.wg.Wait()
	// A reconciler may have created a subtask between the first sweep and
	// its exit; nothing can create one now.
	w.removeAllSubTasks(stopTask)
}

func (w *SourceWorker) removeAllSubTasks(stop func(*SubTask)) {
	var wg sync.WaitGroup
	w.removeAllSubTasksAsync(&wg, stop)
	wg.Wait()
}

// removeAllSubTasksAsync removes every subtask from the map and stops them
// concurrently; the caller waits on wg.
func (w *SourceWorker) removeAllSubTasksAsync(wg *sync.WaitGroup, stop func(*SubTask)) {
	w.mu.Lock()
	tasks := w.subTasks
	w.subTasks = make(map[string]*taskState)
	w.taskErrs = make(map[string]errs.Error)
	w.taskWarns = make(map[string]errs.Error)
	w.mu.Unlock()
	for _, ts := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stop(ts.st)
		}()
	}
}

// watch runs the generic watch loop over prefix in a goroutine owned by wg.
// keyOf maps the part of an etcd key after prefix to a queue key; extra
// lists queue keys to enqueue on every resync besides those listed, so that
// local work whose keys vanished during a gap is reconciled away.
func (w *SourceWorker) watch(ctx context.Context, wg *sync.WaitGroup, kind, prefix string,
	keyOf func(rest string) (string, bool), extra func() []string, bad *badKeys) {
	h := &enqueueHandler{kind: kind, prefix: prefix, keyOf: keyOf, extra: extra, queue: w.queue, log: w.log, bad: bad}
	opts := ha.WatchOptions{
		Logger:     w.log.With(zap.String("watch", kind)),
		BackoffMin: w.cfg.WatchBackoffMin,
		BackoffMax: w.cfg.WatchBackoffMax,
		OnRestart: func(reason string) {
			w.cfg.Metrics.WatchRestarts.WithLabelValues(kind, reason).Inc()
		},
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Watch returns only when ctx is done.
		_ = ha.Watch(ctx, w.cfg.Store.Client(), prefix, keyDecoder, h, opts)
	}()
}

// keyDecoder ignores values: reconcilers read values themselves, in one
// transaction per task, so a watch only needs to know which key changed.
func keyDecoder(string, []byte) (struct{}, error) { return struct{}{}, nil }

// enqueueHandler turns watch snapshots and events into queue keys.
type enqueueHandler struct {
	kind   string
	prefix string
	// keyOf maps the key part after prefix to a queue key; false means the
	// key is not one this handler follows.
	keyOf func(rest string) (string, bool)
	extra func() []string
	queue *workqueue.Queue
	log   *zap.Logger
	// bad, when set, records keys keyOf refused as invalid names, for
	// status; without it such keys simply belong to someone else (a
	// longer worker or source name under an exact-key prefix).
	bad *badKeys
}

func (h *enqueueHandler) Resync(_ context.Context, items []ha.Item[struct{}], rev int64) error {
	h.log.Debug("resync", zap.String("watch", h.kind), zap.Int64("rev", rev), zap.Int("keys", len(items)))
	var bad []string
	for _, it := range items {
		if !h.add(it.Key) {
			bad = append(bad, it.Key)
		}
	}
	if h.bad != nil {
		h.bad.replace(h.prefix, bad)
	}
	for _, k := range h.extra() {
		h.queue.Add(k)
	}
	return nil
}

func (h *enqueueHandler) Changed(_ context.Context, it ha.Item[struct{}]) error {
	if !h.add(it.Key) && h.bad != nil {
		h.bad.set(it.Key, !it.Deleted)
	}
	return nil
}

// add enqueues the queue key of an etcd key; false when keyOf refuses it.
func (h *enqueueHandler) add(key string) bool {
	qk, ok := h.keyOf(strings.TrimPrefix(key, h.prefix))
	if !ok {
		if h.bad != nil {
			h.log.Warn("ignoring key with an invalid name under a watched prefix; delete or rename it",
				zap.String("watch", h.kind), zap.String("key", key))
		}
		return false
	}
	h.queue.Add(qk)
	return true
}

// badKeys is the set of watched etcd keys whose names are invalid, with
// the time each was first seen.
type badKeys struct {
	now func() time.Time
	mu  sync.Mutex
	// guarded by mu:
	keys map[string]time.Time
}

func (b *badKeys) set(key string, present bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !present {
		delete(b.keys, key)
	} else if _, ok := b.keys[key]; !ok {
		b.keys[key] = b.now()
	}
}

// replace makes keys the bad keys under prefix.
func (b *badKeys) replace(prefix string, keys []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	seen := make(map[string]time.Time)
	for k, t := range b.keys {
		if strings.HasPrefix(k, prefix) {
			seen[k] = t
			delete(b.keys, k)
		}
	}
	for _, k := range keys {
		if t, ok := seen[k]; ok {
			b.keys[k] = t
		} else {
			b.keys[k] = b.now()
		}
	}
}

// list returns the bad keys, sorted, with their first-seen times.
func (b *badKeys) list() ([]string, map[string]time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.keys)), maps.Clone(b.keys)
}

func (w *SourceWorker) localSubtaskKeys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]string, 0, len(w.subTasks)+len(w.taskErrs))
	for name := range w.subTasks {
		keys = append(keys, subtaskKeyPrefix+name)
	}
	for name := range w.taskErrs {
		if _, ok := w.subTasks[name]; !ok {
			keys = append(keys, subtaskKeyPrefix+name)
		}
	}
	return keys
}

func (w *SourceWorker) runReconciler(ctx context.Context) {
	for {
		key, ok := w.queue.Get(ctx)
		if !ok {
			return
		}
		kind := "subtask"
		if key == relayKey {
			kind = "relay"
		}
		start := time.Now()
		var err error
		if kind == "relay" {
			err = w.reconcileRelay(ctx)
		} else {
			err = w.reconcileSubTask(ctx, strings.TrimPrefix(key, subtaskKeyPrefix))
		}
		w.cfg.Metrics.ReconcileDuration.WithLabelValues(kind).Observe(time.Since(start).Seconds())
		if err != nil {
			w.cfg.Metrics.ReconcileTotal.WithLabelValues(kind, "error").Inc()
			if ctx.Err() == nil {
				w.log.Warn("reconcile failed; will retry", zap.String("key", key), zap.Error(err))
				w.queue.AddRateLimited(key)
			}
		} else {
			w.cfg.Metrics.ReconcileTotal.WithLabelValues(kind, "ok").Inc()
			w.queue.Forget(key)
		}
		w.queue.Done(key)
	}
}

// reconcileSubTask converges the local subtask `name` to its etcd keys,
// read in one transaction. It returns an error only when it should be
// retried (etcd unreachable); problems with the keys' contents are reported
// in status and logged.
func (w *SourceWorker) reconcileSubTask(ctx context.Context, name string) error {
	w.mu.Lock()
	enabled := w.subWatches != nil
	w.mu.Unlock()
	if !enabled {
		return nil
	}
	item, rev, err := w.cfg.Store.GetSubTask(ctx, w.source, name)
	if err != nil {
		return fmt.Errorf("read subtask %q of source %q: %w", name, w.source, err)
	}
	log := w.log.With(zap.String("task", name), zap.Int64("rev", rev))

	w.mu.Lock()
	ts := w.subTasks[name]
	w.mu.Unlock()

	switch {
	case item == nil || (item.Stage == nil && item.Err == nil):
		// No stage: the subtask must not exist (a config alone is a task
		// being prepared by the master).
		w.setTaskErr(name, nil)
		w.setTaskWarn(name, nil)
		if ts != nil {
			log.Info("stage deleted; closing subtask")
			w.removeSubTask(name, ts)
		}
		return nil
	case item.Err != nil:
		// Keep whatever runs as it is: a value we cannot read says nothing
		// about what the master wants.
		log.Error("malformed subtask key in etcd; fix the value, the subtask keeps its current state",
			zap.Error(item.Err))
		w.setTaskErr(name, errs.New(CodeMalformedValue, false,
			"subtask %q: malformed etcd value: %v; rewrite the key with valid JSON", name, item.Err))
		return nil
	case item.Config == nil:
		log.Error("stage without config: subtask removed; put the task config or delete the stage")
		w.setTaskErr(name, errs.New(CodeStageWithoutConfig, false,
			"subtask %q: stage key exists but config key %s is missing; put the config or delete the stage",
			name, ha.Keys{Prefix: w.cfg.Store.Prefix()}.SubTaskConfig(w.source, name)))
		if ts != nil {
			w.removeSubTask(name, ts)
		}
		return nil
	}

	changed := ts == nil || item.ConfigRevision != ts.configRev
	w.setTaskWarn(name, w.subTaskWarning(item, changed, log))
	if err := w.checkSubTaskConfig(name, item.Config); err != nil {
		log.Error("invalid subtask config; the subtask keeps its current state", zap.Error(err))
		w.setTaskErr(name, errs.New(CodeInvalidConfig, false, "subtask %q: %v", name, err))
		return nil
	}
	if _, err := resolveSubTask(item.Config, w.cfg.SecretKey); err != nil {
		log.Error("subtask password cannot be decrypted; the subtask keeps its current state", zap.Error(err))
		w.setTaskErr(name, err)
		return nil
	}
	w.setTaskErr(name, nil)

	if ts == nil {
		ts = &taskState{st: NewSubTask(item.Config, w.cfg.Factory, w.log), configRev: item.ConfigRevision}
		w.mu.Lock()
		w.subTasks[name] = ts
		w.mu.Unlock()
		log.Info("subtask created", zap.String("expect", string(item.Stage.Expect)))
	} else if item.ConfigRevision != ts.configRev {
		ts = w.applyConfig(ctx, name, ts, item, log)
	}

	w.applyStage(ctx, ts, item.Stage, log)
	w.applyValidator(ctx, ts, item.ValidatorStage, log)
	return nil
}

func (w *SourceWorker) checkSubTaskConfig(name string, cfg *config.SubTaskConfig) error {
	if cfg.Name != name || cfg.SourceID != w.source {
		return fmt.Errorf("config names task %q of source %q but sits under the key of task %q of source %q",
			cfg.Name, cfg.SourceID, name, w.source)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	return w.cfg.Factory.CheckMode(cfg.TaskMode)
}

// applyConfig applies a new config revision to an existing subtask: through
// pause → update → resume when its unit supports it, else by recreating the
// subtask (it then resumes from its saved progress).
// It returns the task's state, which is new when the subtask was recreated.
func (w *SourceWorker) applyConfig(ctx context.Context, name string, ts *taskState, item *ha.SubTaskItem, log *zap.Logger) *taskState {
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
	nts := &taskState{st: NewSubTask(item.Config, w.cfg.Factory, w.log), configRev: item.ConfigRevision}
	w.mu.Lock()
	w.subTasks[name] = nts
	w.mu.Unlock()
	return nts
}

// applyStage moves the subtask toward the expected stage. A new stage
// revision is an operator's command and is always carried out (Running
// resumes even a subtask paused by an error); under an unchanged revision
// only drift is corrected, so that a subtask paused by an error is left to
// the auto-resume checker.
func (w *SourceWorker) applyStage(ctx context.Context, ts *taskState, want *ha.Stage, log *zap.Logger) {
	newCommand := want.Revision != ts.stageRev
	ts.stageRev = want.Revision
	cur := ts.st.Stage()
	switch want.Expect {
	case stage.Running:
		switch {
		case cur == stage.New:
			ts.st.Run(ctx)
		case cur == stage.Paused && (newCommand || ts.st.ExplicitlyPaused()):
			if err := ts.st.Resume(ctx); err != nil {
				log.Warn("resume failed", zap.Error(err))
			}
		}
	case stage.Paused, stage.Stopped:
		// A subtask paused by an error is paused again explicitly, so the
		// auto-resume checker leaves it alone as the master wants.
		if cur == stage.Running || cur == stage.New || cur == stage.Resuming ||
			(cur == stage.Paused && !ts.st.ExplicitlyPaused()) {
			if err := ts.st.Pause(ctx); err != nil {
				log.Warn("pause failed", zap.Error(err))
			}
		}
	}
}

// applyValidator starts the subtask's validator when its stage is Running
// and stops it otherwise (Stopped, or no validator stage).
func (w *SourceWorker) applyValidator(ctx context.Context, ts *taskState, want *ha.Stage, log *zap.Logger) {
	if want == nil || want.Expect != stage.Running {
		ts.st.StopValidator()
		return
	}
	if err := ts.st.StartValidator(ctx); err != nil {
		log.Error("validator did not start", zap.Error(err))
		w.setTaskErr(ts.st.Name(), err)
	}
}

func (w *SourceWorker) removeSubTask(name string, ts *taskState) {
	w.mu.Lock()
	if w.subTasks[name] == ts {
		delete(w.subTasks, name)
	}
	w.mu.Unlock()
	ts.st.StopValidator()
	ts.st.Close()
}

// setTaskErr records (err != nil) or clears a control-plane error of a task.
func (w *SourceWorker) setTaskErr(name string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		delete(w.taskErrs, name)
		return
	}
	w.taskErrs[name] = errs.Entry(err, w.cfg.Clock.Now())
}

// reconcileRelay converges the relay holder to the relay stage key.
func (w *SourceWorker) reconcileRelay(ctx context.Context) error {
	w.mu.Lock()
	enabled, r := w.relayWatches != nil, w.relay
	w.mu.Unlock()
	if !enabled {
		return nil
	}
	st, ok, rev, err := w.cfg.Store.GetRelayStage(ctx, w.source)
	if err != nil {
		if !errors.Is(err, ha.ErrMalformed) {
			return fmt.Errorf("read relay stage of source %q: %w", w.source, err)
		}
		w.log.Error("malformed relay stage in etcd; the relay keeps its current state", zap.Error(err))
		e := errs.Entry(errs.New(CodeRelayMalformed, false,
			"relay stage of source %q: %v; rewrite the key with valid JSON", w.source, err), w.cfg.Clock.Now())
		w.mu.Lock()
		w.relayErr = &e
		w.mu.Unlock()
		return nil
	}
	log := w.log.With(zap.Int64("rev", rev))
	w.mu.Lock()
	w.relayErr = nil
	newCommand := ok && st.Revision != w.relayStageRev
	w.relayWarn = nil
	if ok && st.Unknown != "" {
		w.relayWarn = configWarning(log, fmt.Sprintf("relay of source %q", w.source), w.cfg.Clock.Now(), newCommand,
			valueNotes{key: w.cfg.Store.Keys().RelayStage(w.source), unknown: st.UnknownFields()})
	}
	if ok {
		w.relayStageRev = st.Revision
	}
	w.mu.Unlock()

	if !ok {
		if r != nil {
			log.Info("relay stage deleted; stopping relay")
			w.mu.Lock()
			w.relay, w.relayStageRev, w.relayWarn = nil, 0, nil
			w.mu.Unlock()
			r.Close()
		}
		return nil
	}
	if r == nil {
		if w.cfg.NewRelay == nil {
			return w.relayCreateFailed(errors.New("this worker was built without a relay"))
		}
		nr, err := w.cfg.NewRelay(w.cfg.Source, w.log)
		if err != nil {
			return w.relayCreateFailed(err)
		}
		if fr, ok := nr.(*FileRelay); ok {
			fr.AddPurgeBlocker(w.purgeBlocker)
		}
		w.mu.Lock()
		w.relay = nr
		w.mu.Unlock()
		r = nr
		if st.Expect == stage.Running {
			log.Info("starting relay")
			if err := r.Start(ctx); err != nil {
				log.Error("relay did not start", zap.Error(err))
			}
		}
		return nil
	}
	cur := r.Stage()
	switch st.Expect {
	case stage.Running:
		if cur == stage.Paused && (newCommand || r.ExplicitlyPaused()) {
			if err := r.Resume(ctx); err != nil {
				log.Warn("relay resume failed", zap.Error(err))
			}
		} else if cur == stage.New || cur == stage.Stopped {
			if err := r.Start(ctx); err != nil {
				log.Error("relay did not start", zap.Error(err))
			}
		}
	case stage.Paused, stage.Stopped:
		if cur == stage.Running {
			if err := r.Pause(ctx); err != nil {
				log.Warn("relay pause failed", zap.Error(err))
			}
		}
	}
	return nil
}

// purgeBlocker names the paused or new subtask that needs the oldest relay
// location: its unit's checkpoint, or its config's start location when it
// has none. Running subtasks register their own relay readers.
func (w *SourceWorker) purgeBlocker() (string, binlog.Location, bool) {
	w.mu.Lock()
	tasks := make([]*SubTask, 0, len(w.subTasks))
	for _, ts := range w.subTasks {
		tasks = append(tasks, ts.st)
	}
	w.mu.Unlock()
	var (
		name  string
		first binlog.Location
	)
	for _, st := range tasks {
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

func (w *SourceWorker) relayCreateFailed(err error) error {
	w.log.Error("relay could not be created; fix the source config or the relay dir", zap.Error(err))
	e := errs.Entry(errs.Wrap(err, CodeRelayCreate, "create relay of source %q", w.source), w.cfg.Clock.Now())
	w.mu.Lock()
	w.relayErr = &e
	w.mu.Unlock()
	// Retried with backoff: the cause (disk, permissions) may go away.
	return err
}

// resumables lists what the auto-resume checker looks at.
func (w *SourceWorker) resumables() []Resumable {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Resumable, 0, len(w.subTasks)+1)
	for _, ts := range w.subTasks {
		out = append(out, ts.st)
	}
	if w.relay != nil {
		out = append(out, w.relay)
	}
	return out
}

// SubTask returns the local subtask named name, or nil.
func (w *SourceWorker) SubTask(name string) *SubTask {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ts, ok := w.subTasks[name]; ok {
		return ts.st
	}
	return nil
}

// RelayReader returns the relay's reader while relay runs for the source
// and its holder offers one, else nil.
func (w *SourceWorker) RelayReader() binlog.StreamOpener {
	r, ok := w.Relay().(interface{ Reader() binlog.StreamOpener })
	if !ok {
		return nil
	}
	return r.Reader()
}

// Relay returns the relay holder, or nil when relay is not running.
func (w *SourceWorker) Relay() RelayHolder {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.relay
}

func (w *SourceWorker) runStageGauge(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		counts := make(map[stage.Stage]int)
		for _, r := range w.resumables() {
			if st, ok := r.(*SubTask); ok {
				counts[st.Stage()]++
			}
		}
		for _, s := range stage.All() {
			w.cfg.Metrics.SubTasks.WithLabelValues(string(s)).Set(float64(counts[s]))
		}
	}
}
