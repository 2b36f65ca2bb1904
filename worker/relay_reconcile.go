package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/relay"
)

// relayReconciler is the Reconciler of a source's relay stage key and the
// owner of the source's relay holder. The holder's stage is driven by
// driveStage, as subtasks' and streams' are.
type relayReconciler struct {
	source   string
	cfg      *config.SourceConfig
	store    *ha.Store
	newRelay RelayFactory
	clock    Clock
	log      *zap.Logger
	// enabled reports whether relay handling is on; reconciles do nothing
	// while it is off.
	enabled func() bool
	// blocker is added to every relay holder created: the positions paused
	// and new subtasks still need.
	blocker relay.Blocker
	// life is the SourceWorker's context (set by its Start, before any
	// reconcile), given to every holder created: its end cancels the
	// relay's pull and purger.
	life context.Context

	mu sync.Mutex // guards the fields below
	r  RelayHolder
	// sealStop is set by disable and cleared by enable: a holder created
	// meanwhile is stopped with it (Close or Kill) instead of kept.
	sealStop func(RelayHolder)
	// err is the control-plane error of the relay (malformed stage, create
	// failed); warn the unknown fields of its stage value.
	err, warn *errs.Error
	// stageRev is the revision of the relay stage last acted on.
	stageRev int64
}

func newRelayReconciler(cfg SourceWorkerConfig, log *zap.Logger, enabled func() bool, blocker relay.Blocker) *relayReconciler {
	return &relayReconciler{source: cfg.Source.SourceID, cfg: cfg.Source, store: cfg.Store, newRelay: cfg.NewRelay,
		clock: cfg.Clock, log: log, enabled: enabled, blocker: blocker}
}

// watchSpec is the watched relay stage key of the source.
func (r *relayReconciler) watchSpec() watchSpec {
	key := queueKey(kindRelay, "")
	return watchSpec{kind: "relay-stage", prefix: r.store.Keys().RelayStage(r.source), exact: true,
		keyOf: func(string) (string, bool) { return key, true },
		extra: func() []string { return []string{key} }}
}

// holder returns the relay holder, or nil.
func (r *relayReconciler) holder() RelayHolder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r
}

// enable lifts the seal of disable (EnableRelay): reconciles may create a
// holder again.
func (r *relayReconciler) enable() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sealStop = nil
}

// disable seals the reconciler (a holder a reconcile creates meanwhile is
// stopped with stop), forgets the holder and what is recorded about the
// relay, and returns the holder for the caller to stop with stop (nil
// when there was none).
func (r *relayReconciler) disable(stop func(RelayHolder)) RelayHolder {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.r
	r.r, r.err, r.warn, r.stageRev, r.sealStop = nil, nil, nil, 0, stop
	return h
}

// forget drops h, unless another holder (or none) is held by now, and
// reports whether it did; the caller stops h. Unlike disable it does not
// seal: the next stage value creates a holder again.
func (r *relayReconciler) forget(h RelayHolder) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.r != h {
		return false
	}
	r.r, r.stageRev = nil, 0
	return true
}

// recorded returns the relay's holder, control-plane error and warning,
// for status.
func (r *relayReconciler) recorded() (RelayHolder, *errs.Error, *errs.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r, r.err, r.warn
}

// Reconcile converges the relay holder to the relay stage key; the relay
// has one key per source, so name is always "". A holder that was stopped
// cannot run again (its relay is released): it is replaced by a new one,
// which continues from the relay's files.
func (r *relayReconciler) Reconcile(ctx context.Context, _ string) error {
	if !r.enabled() {
		return nil
	}
	st, lastRev, act, err := r.readStage(ctx)
	if err != nil || !act {
		return err
	}
	h := r.holder()
	if h != nil && h.Stage() == stage.Stopped && r.forget(h) {
		r.log.Info("relay holder was stopped; a new holder replaces it")
		h = nil
	}
	switch {
	case st == nil:
		if h != nil && r.forget(h) {
			r.log.Info("relay stage deleted; stopping relay")
			h.Close()
		}
		return nil
	case h == nil:
		if h, err = r.create(); err != nil || h == nil {
			return err
		}
		lastRev = 0
	}
	driveStage(ctx, h, st, lastRev, h.Start, nil, r.log.With(zap.String("relay", r.source)))
	return nil
}

// readStage reads the relay stage: nil when the key does not exist, and
// the revision of the stage value last acted on (a different revision is
// an operator's command). act is false when the value is malformed: that
// is recorded in status and the relay keeps its current state.
func (r *relayReconciler) readStage(ctx context.Context) (st *ha.Stage, lastRev int64, act bool, err error) {
	stg, ok, rev, err := r.store.GetRelayStage(ctx, r.source)
	if err != nil {
		if !errors.Is(err, ha.ErrMalformed) {
			return nil, 0, false, fmt.Errorf("read relay stage of source %q: %w", r.source, err)
		}
		r.log.Error("malformed relay stage in etcd; the relay keeps its current state", zap.Error(err))
		e := errs.Entry(errs.New(CodeRelayStageMalformed, false,
			"relay stage of source %q: %v; rewrite the key with valid JSON", r.source, err), r.clock.Now())
		r.mu.Lock()
		r.err = &e
		r.mu.Unlock()
		return nil, 0, false, nil
	}
	log := r.log.With(zap.Int64("rev", rev))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err, r.warn = nil, nil
	lastRev = r.stageRev
	if !ok {
		return nil, lastRev, true, nil
	}
	if stg.Unknown != "" {
		r.warn = configWarning(log, fmt.Sprintf("relay of source %q", r.source), r.clock.Now(), stg.Revision != lastRev,
			valueNotes{key: r.store.Keys().RelayStage(r.source), unknown: stg.UnknownFields()})
	}
	r.stageRev = stg.Revision
	return &stg, lastRev, true, nil
}

// create builds the relay holder and keeps it, unless the reconciler was
// disabled meanwhile (then it is closed again and nil is returned). A
// failure is recorded in status and returned, to be retried with backoff:
// the cause (disk, permissions) may go away.
func (r *relayReconciler) create() (RelayHolder, error) {
	if r.newRelay == nil {
		return nil, r.createFailed(errors.New("this worker was built without a relay"))
	}
	h, err := r.newRelay(r.life, r.cfg, r.log)
	if err != nil {
		return nil, r.createFailed(err)
	}
	h.AddPurgeBlocker(r.blocker)
	r.mu.Lock()
	sealStop := r.sealStop
	if sealStop == nil {
		r.r = h
	}
	r.mu.Unlock()
	if sealStop != nil {
		sealStop(h)
		r.log.Info("relay not kept: relay handling was disabled meanwhile")
		return nil, nil
	}
	r.log.Info("relay created")
	return h, nil
}

func (r *relayReconciler) createFailed(err error) error {
	r.log.Error("relay could not be created; fix the source config or the relay dir", zap.Error(err))
	e := errs.Entry(errs.Wrap(err, CodeRelayCreateFailed, "create relay of source %q", r.source), r.clock.Now())
	r.mu.Lock()
	r.err = &e
	r.mu.Unlock()
	return err
}
