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
// owner of the source's relay holder.
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

	mu sync.Mutex // guards the fields below
	r  RelayHolder
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

// disable forgets the holder and what is recorded about the relay, and
// returns the holder for the caller to stop (nil when there was none).
func (r *relayReconciler) disable() RelayHolder {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.r
	r.r, r.err, r.warn, r.stageRev = nil, nil, nil, 0
	return h
}

// recorded returns the relay's holder, control-plane error and warning,
// for status.
func (r *relayReconciler) recorded() (RelayHolder, *errs.Error, *errs.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r, r.err, r.warn
}

// Reconcile converges the relay holder to the relay stage key; the relay
// has one key per source, so name is always "".
func (r *relayReconciler) Reconcile(ctx context.Context, _ string) error {
	if !r.enabled() {
		return nil
	}
	st, newCommand, act, err := r.readStage(ctx)
	if err != nil || !act {
		return err
	}
	h := r.holder()
	switch {
	case st == nil:
		if h != nil {
			r.log.Info("relay stage deleted; stopping relay")
			if h := r.disable(); h != nil {
				h.Close()
			}
		}
		return nil
	case h == nil:
		return r.create(ctx, st.Expect)
	}
	r.converge(ctx, h, st.Expect, newCommand)
	return nil
}

// readStage reads the relay stage: nil when the key does not exist, and
// whether its revision changed since it was last acted on (an operator's
// command). act is false when the value is malformed: that is recorded in
// status and the relay keeps its current state.
func (r *relayReconciler) readStage(ctx context.Context) (st *ha.Stage, newCommand, act bool, err error) {
	stg, ok, rev, err := r.store.GetRelayStage(ctx, r.source)
	if err != nil {
		if !errors.Is(err, ha.ErrMalformed) {
			return nil, false, false, fmt.Errorf("read relay stage of source %q: %w", r.source, err)
		}
		r.log.Error("malformed relay stage in etcd; the relay keeps its current state", zap.Error(err))
		e := errs.Entry(errs.New(CodeRelayStageMalformed, false,
			"relay stage of source %q: %v; rewrite the key with valid JSON", r.source, err), r.clock.Now())
		r.mu.Lock()
		r.err = &e
		r.mu.Unlock()
		return nil, false, false, nil
	}
	log := r.log.With(zap.Int64("rev", rev))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err, r.warn = nil, nil
	if !ok {
		return nil, false, true, nil
	}
	newCommand = stg.Revision != r.stageRev
	if stg.Unknown != "" {
		r.warn = configWarning(log, fmt.Sprintf("relay of source %q", r.source), r.clock.Now(), newCommand,
			valueNotes{key: r.store.Keys().RelayStage(r.source), unknown: stg.UnknownFields()})
	}
	r.stageRev = stg.Revision
	return &stg, newCommand, true, nil
}

// create builds the relay holder and starts it when expect is Running. A
// failure is recorded in status and returned, to be retried with backoff:
// the cause (disk, permissions) may go away.
func (r *relayReconciler) create(ctx context.Context, expect stage.Stage) error {
	if r.newRelay == nil {
		return r.createFailed(errors.New("this worker was built without a relay"))
	}
	h, err := r.newRelay(r.cfg, r.log)
	if err != nil {
		return r.createFailed(err)
	}
	h.AddPurgeBlocker(r.blocker)
	r.mu.Lock()
	r.r = h
	r.mu.Unlock()
	if expect == stage.Running {
		r.log.Info("starting relay")
		if err := h.Start(ctx); err != nil {
			r.log.Error("relay did not start", zap.Error(err))
		}
	}
	return nil
}

func (r *relayReconciler) createFailed(err error) error {
	r.log.Error("relay could not be created; fix the source config or the relay dir", zap.Error(err))
	e := errs.Entry(errs.Wrap(err, CodeRelayCreateFailed, "create relay of source %q", r.source), r.clock.Now())
	r.mu.Lock()
	r.err = &e
	r.mu.Unlock()
	return err
}

// converge moves an existing holder toward expect. Like a subtask's stage,
// a new stage revision resumes even a relay paused by an error; under an
// unchanged one only an explicit pause is undone, so errors are left to
// the auto-resume checker.
func (r *relayReconciler) converge(ctx context.Context, h RelayHolder, expect stage.Stage, newCommand bool) {
	cur := h.Stage()
	switch expect {
	case stage.Running:
		if cur == stage.Paused && (newCommand || h.ExplicitlyPaused()) {
			if err := h.Resume(ctx); err != nil {
				r.log.Warn("relay resume failed", zap.Error(err))
			}
		} else if cur == stage.New || cur == stage.Stopped {
			if err := h.Start(ctx); err != nil {
				r.log.Error("relay did not start", zap.Error(err))
			}
		}
	case stage.Paused, stage.Stopped:
		if cur == stage.Running {
			if err := h.Pause(ctx); err != nil {
				r.log.Warn("relay pause failed", zap.Error(err))
			}
		}
	}
}
