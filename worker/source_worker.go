package worker

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/periodic"
	"github.com/dmworker/dm-worker/pkg/secret"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/pkg/workqueue"
	"github.com/dmworker/dm-worker/unit"
)

// Queue-key kinds of a SourceWorker, one Reconciler each.
const (
	kindSubTask = "subtask"
	kindRelay   = "relay"
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
	// Streams runs the source's stream tasks; nil: this worker does not
	// watch stream keys.
	Streams *StreamRuntime
}

// SourceWorker manages one bound upstream source: it watches the subtask,
// validator and relay stage keys of the source and reconciles local
// subtasks, validators and the relay holder to them. This file holds its
// lifecycle; each kind of key has its Reconciler (subTaskReconciler,
// relayReconciler).
//
// Watch handlers only enqueue keys; reconcilers read config and stages of
// one object in one etcd transaction and converge local state to them
// (level-triggered). One key is never reconciled twice at the same time.
type SourceWorker struct {
	cfg      SourceWorkerConfig
	source   string
	log      *zap.Logger
	queue    *workqueue.Queue
	watcher  watcher
	subTasks *subTaskReconciler
	relay    *relayReconciler
	streams  *streamReconciler // nil without cfg.Streams

	cancel context.CancelFunc // cancels every goroutine started by Start
	wg     sync.WaitGroup     // Start's goroutines
	// endLife ends the context every subtask, stream and relay holder runs
	// its work under (set by Start); stop calls it once the sweep has
	// stopped them, so nothing of the data plane outlives the SourceWorker.
	endLife context.CancelFunc

	mu sync.Mutex // guards the fields below
	// subWatches and relayWatches are the running watch loops of subtask
	// and relay keys; nil while that handling is disabled.
	subWatches   *watchSet
	relayWatches *watchSet
	closed       bool
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
	log := cfg.Logger.With(zap.String("source", cfg.Source.SourceID))
	queue := workqueue.New(50*time.Millisecond, 10*time.Second)
	w := &SourceWorker{
		cfg:    cfg,
		source: cfg.Source.SourceID,
		log:    log,
		queue:  queue,
		watcher: watcher{client: cfg.Store.Client(), queue: queue, metrics: cfg.Metrics, log: log,
			backoffMin: cfg.WatchBackoffMin, backoffMax: cfg.WatchBackoffMax},
	}
	w.subTasks = newSubTaskReconciler(cfg, log, func() bool { return w.enabled(&w.subWatches) })
	w.relay = newRelayReconciler(cfg, log, func() bool { return w.enabled(&w.relayWatches) }, w.subTasks.purgeBlocker)
	if cfg.Streams != nil {
		w.streams = newStreamReconciler(cfg, log, func() bool { return w.enabled(&w.subWatches) })
	}
	return w
}

// Source is the bound source's id.
func (w *SourceWorker) Source() string { return w.source }

// Start runs the reconcilers, the auto-resume checker and the stage gauge
// until Close or Kill. Enable subtask and relay handling separately.
func (w *SourceWorker) Start(ctx context.Context) {
	// The data plane's life keeps ctx's values, not its cancellation: a
	// graceful Close stops the work itself (checkpoints flushed), and ends
	// this context after.
	life, endLife := context.WithCancel(context.WithoutCancel(ctx))
	w.endLife = endLife
	w.subTasks.life, w.relay.life = life, life
	if w.streams != nil {
		w.streams.life = life
	}
	ctx, w.cancel = context.WithCancel(ctx)
	runner := &reconcileRunner{queue: w.queue, metrics: w.cfg.Metrics, log: w.log,
		byKind: map[string]Reconciler{kindSubTask: w.subTasks, kindRelay: w.relay}}
	if w.streams != nil {
		runner.byKind[kindStream] = w.streams
	}
	runner.start(ctx, &w.wg, w.cfg.Workers)
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

// EnableSubTasks starts watching the subtask, validator and stream keys of
// the source; subtasks and stream tasks are created as their keys say.
func (w *SourceWorker) EnableSubTasks(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.subWatches != nil || w.closed {
		return
	}
	specs := w.subTasks.watchSpecs()
	if w.streams != nil {
		specs = append(specs, w.streams.watchSpecs()...)
	}
	w.subWatches = startWatchSet(ctx, w.watcher, specs...)
}

// closeStreams stops every stream task with its checkpoint saved.
func (w *SourceWorker) closeStreams() {
	if w.streams != nil {
		w.streams.closeAll()
	}
}

// EnableRelay starts watching the relay stage of the source.
func (w *SourceWorker) EnableRelay(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.relayWatches != nil || w.closed {
		return
	}
	w.relay.enable()
	w.relayWatches = startWatchSet(ctx, w.watcher, w.relay.watchSpec())
}

// DisableRelay stops watching the relay stage and closes the relay.
func (w *SourceWorker) DisableRelay() {
	if !w.stopWatches(&w.relayWatches) {
		return
	}
	if r := w.relay.disable(RelayHolder.Close); r != nil {
		r.Close()
	}
}

// enabled reports whether the watch loops in *field run, which is whether
// their reconciler acts.
func (w *SourceWorker) enabled(field **watchSet) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return *field != nil
}

// stopWatches stops the watch loops in *field (nil when disabled), sets it
// to nil and waits for them; false when they were not running.
func (w *SourceWorker) stopWatches(field **watchSet) bool {
	w.mu.Lock()
	ws := *field
	*field = nil
	w.mu.Unlock()
	ws.stop()
	return ws != nil
}

// Close stops watching, closes subtasks and relay gracefully (checkpoints
// flushed) and waits for every goroutine.
func (w *SourceWorker) Close() { w.stop((*SubTask).Close, RelayHolder.Close) }

// Kill stops everything at once without flushing, for lease loss: another
// worker may take the source over, and two workers must never write the
// same target.
func (w *SourceWorker) Kill() { w.stop((*SubTask).Kill, RelayHolder.Kill) }

// stop is one sweep: it seals the subtask and stream sets and the relay
// (a reconcile still running meanwhile cannot add work: it closes what it
// built), stops what they held, ends the data plane's life, then stops
// the control plane and waits for it.
func (w *SourceWorker) stop(stopTask func(*SubTask), stopRelay func(RelayHolder)) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	watches := []*watchSet{w.subWatches, w.relayWatches}
	w.subWatches, w.relayWatches = nil, nil
	w.mu.Unlock()

	// Data plane first: on lease loss every write must stop before anything
	// else happens. Stream tasks stop with their checkpoints saved either
	// way: they write to sinks whose consumers drop replays. Subtasks and
	// streams stop before the relay they read from.
	var wg sync.WaitGroup
	w.subTasks.removeAllAsync(&wg, stopTask)
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.closeStreams()
	}()
	wg.Wait()
	if r := w.relay.disable(stopRelay); r != nil {
		stopRelay(r)
	}
	if w.endLife != nil {
		w.endLife() // whatever a reconcile started on a holder it still had
	}

	for _, ws := range watches {
		if ws != nil {
			ws.cancel()
		}
	}
	w.queue.ShutDown()
	if w.cancel != nil {
		w.cancel()
	}
	for _, ws := range watches {
		ws.stop()
	}
	w.wg.Wait()
	if w.cfg.Streams != nil && w.cfg.Streams.Close != nil {
		w.cfg.Streams.Close()
	}
}

// resumables lists what the auto-resume checker looks at.
func (w *SourceWorker) resumables() []Resumable {
	tasks := w.subTasks.list()
	out := make([]Resumable, 0, len(tasks)+1)
	for _, st := range tasks {
		out = append(out, st)
	}
	if r := w.relay.holder(); r != nil {
		out = append(out, r)
	}
	if w.streams != nil {
		for _, h := range w.streams.list() {
			out = append(out, h)
		}
	}
	return out
}

// SubTask returns the local subtask named name, or nil.
func (w *SourceWorker) SubTask(name string) *SubTask { return w.subTasks.get(name) }

// RelayReader returns a new relay reader while relay runs for the source,
// else nil.
func (w *SourceWorker) RelayReader() binlog.StreamOpener {
	if r := w.relay.holder(); r != nil {
		return r.Reader()
	}
	return nil
}

// Relay returns the relay holder, or nil when relay is not running.
func (w *SourceWorker) Relay() RelayHolder { return w.relay.holder() }

// setStreamGauges sets each stream's lag and state gauges; streams that
// are gone lose their series.
func (w *SourceWorker) setStreamGauges() {
	m := w.cfg.Metrics
	m.StreamLag.Reset()
	m.StreamState.Reset()
	for _, h := range w.streams.list() {
		st := h.Status()
		m.StreamLag.WithLabelValues(st.Name).Set(st.LagSeconds)
		m.StreamState.WithLabelValues(st.Name, st.State).Set(1)
	}
}

// runStageGauge sets the subtasks-by-stage and stream gauges every second.
func (w *SourceWorker) runStageGauge(ctx context.Context) {
	periodic.Run(ctx, time.Second, periodic.AfterInterval, func(context.Context) {
		counts := make(map[stage.Stage]int)
		for _, st := range w.subTasks.list() {
			counts[st.Stage()]++
		}
		for _, s := range stage.All() {
			w.cfg.Metrics.SubTasks.WithLabelValues(string(s)).Set(float64(counts[s]))
		}
		if w.streams != nil {
			w.setStreamGauges()
		}
	})
}
