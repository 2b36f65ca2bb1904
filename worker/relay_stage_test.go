package worker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/pkg/supervise"
	"github.com/dmworker/dm-worker/relay"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// fakeRelay is a RelayHolder whose pull is a test-controlled goroutine on
// the shared lifecycle and supervise.Work, as FileRelay's is: the real relay cannot
// be made to fail on command. Each run of the pull counts in runs and
// returns failing at once when set, else the error sent on fail, or nil
// when cancelled.
type fakeRelay struct {
	lifecycle
	pull *supervise.Work
	fail chan error

	mu      sync.Mutex // guards the fields below
	runs    int
	failing error
}

var _ RelayHolder = (*fakeRelay)(nil)

// fakeRelays is a RelayFactory of fakeRelays that remembers them; hold,
// when set, is received from before each holder is built, after a send on
// entered (when set).
type fakeRelays struct {
	hold, entered chan struct{}

	mu  sync.Mutex // guards all
	all []*fakeRelay
}

func (f *fakeRelays) factory(ctx context.Context, cfg *config.SourceConfig, _ *zap.Logger) (RelayHolder, error) {
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.hold != nil {
		<-f.hold
	}
	h := &fakeRelay{pull: supervise.NewWork(ctx), fail: make(chan error, 1)}
	h.lifecycle = newLifecycle(fmt.Sprintf("relay of source %q", cfg.SourceID), func(ctx context.Context, auto bool) error {
		return h.restartWork(ctx, auto, h.pull, h.run)
	})
	f.mu.Lock()
	f.all = append(f.all, h)
	f.mu.Unlock()
	return h, nil
}

// built returns the holders built so far.
func (f *fakeRelays) built() []*fakeRelay {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*fakeRelay(nil), f.all...)
}

func (h *fakeRelay) run(ctx context.Context) {
	h.runWork(ctx, h.pull, RealClock{}, func(ctx context.Context) error {
		h.mu.Lock()
		h.runs++
		failing := h.failing
		h.mu.Unlock()
		if failing != nil {
			return failing
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-h.fail:
			return err
		}
	}, func(error) {})
}

func (h *fakeRelay) Name() string { return "relay/" + testSource }
func (h *fakeRelay) Kind() string { return "relay" }
func (h *fakeRelay) Start(ctx context.Context) error {
	h.ops.Lock()
	defer h.ops.Unlock()
	if err := h.start(); err != nil {
		return err
	}
	h.run(ctx)
	return nil
}
func (h *fakeRelay) Pause(ctx context.Context) error {
	h.ops.Lock()
	defer h.ops.Unlock()
	return h.pauseWork(ctx, h.pull)
}
func (h *fakeRelay) Close() {
	h.ops.Lock()
	defer h.ops.Unlock()
	h.stopWork(h.pull, nil)
}
func (h *fakeRelay) Kill() { h.Close() }
func (h *fakeRelay) Status() RelayStatus {
	stg, errors := h.snapshot()
	return RelayStatus{Enabled: true, Stage: stg, Errors: errors}
}
func (h *fakeRelay) Reader() binlog.StreamOpener   { return nil }
func (h *fakeRelay) AddPurgeBlocker(relay.Blocker) {}
func (h *fakeRelay) Purge(context.Context, PurgeRequest) ([]string, error) {
	return nil, nil
}

// failAlways makes every run of the pull fail at once with err (nil:
// none does).
func (h *fakeRelay) failAlways(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failing = err
}

func (h *fakeRelay) runCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runs
}

// relayEnv is a SourceWorker with relay handling on, whose relay holders
// are fakeRelays; the checker's backoff is fixed at backoff.
type relayEnv struct {
	*swEnv
	relays *fakeRelays
}

func startRelaySW(t *testing.T, backoff time.Duration, relays *fakeRelays) *relayEnv {
	e := startSWWith(t, 2, func(c *SourceWorkerConfig) {
		c.NewRelay = relays.factory
		c.Source.Checker.BackoffMin = config.Duration{Duration: backoff}
		c.Source.Checker.BackoffMax = config.Duration{Duration: backoff}
	})
	e.sw.EnableRelay(e.ctx())
	return &relayEnv{swEnv: e, relays: relays}
}

func (e *relayEnv) putRelay(expect stage.Stage) {
	e.t.Helper()
	if _, err := e.master.PutRelayStage(e.ctx(), ha.Stage{Expect: expect, Source: testSource}); err != nil {
		e.t.Fatal(err)
	}
}

// relayIs is nil when the source worker holds h and h is in stage want,
// explicitly paused exactly when explicit is true.
func (e *relayEnv) relayIs(h *fakeRelay, want stage.Stage, explicit bool) error {
	if got := e.sw.Relay(); got != RelayHolder(h) {
		return fmt.Errorf("source worker holds %v, not %p", got, h)
	}
	if got, exp := h.Stage(), h.ExplicitlyPaused(); got != want || exp != explicit {
		return fmt.Errorf("relay %s, explicitly paused %v; want %s, %v", got, exp, want, explicit)
	}
	return nil
}

// onlyRelay waits for the one relay holder built and returns it.
func (e *relayEnv) onlyRelay() *fakeRelay {
	e.t.Helper()
	var h *fakeRelay
	testutil.Eventually(e.t, 10*time.Second, "relay holder built", func() error {
		all := e.relays.built()
		if len(all) != 1 {
			return fmt.Errorf("%d relay holders built", len(all))
		}
		h = all[0]
		return nil
	})
	return h
}

// A relay paused by a resumable error and then Paused by the master is
// paused explicitly, so the auto-resume checker leaves it alone. The
// relay's own converge used to pause only a Running relay: the error
// pause stayed a resumable one and the checker resumed the relay against
// the master's stage.
func TestRelayPausedByErrorThenByMasterStaysPaused(t *testing.T) {
	const backoff = 300 * time.Millisecond
	e := startRelaySW(t, backoff, &fakeRelays{})
	e.putRelay(stage.Running)
	h := e.onlyRelay()
	testutil.Eventually(t, 10*time.Second, "relay Running", func() error { return e.relayIs(h, stage.Running, false) })

	// The first run fails, and every auto-resume after it fails again at
	// once: the relay is paused by the error all but a moment of each
	// backoff. The first run has read failing (nil) once it counted.
	testutil.WaitFor(t, 10*time.Second, "the pull to run", func() bool { return h.runCount() == 1 })
	lost := errs.New("test-source-gone", true, "source connection lost")
	h.fail <- lost
	h.failAlways(lost)
	testutil.Eventually(t, 10*time.Second, "relay paused by the error", func() error {
		if !h.Result().Resumable() {
			return fmt.Errorf("result %+v, want a resumable error", h.Result())
		}
		return e.relayIs(h, stage.Paused, false)
	})
	e.putRelay(stage.Paused)
	testutil.Eventually(t, 10*time.Second, "relay paused by the master", func() error { return e.relayIs(h, stage.Paused, true) })
	runs := h.runCount()
	testutil.Consistently(t, 4*backoff, "relay left paused by the checker", func() error {
		if n := h.runCount(); n != runs {
			return fmt.Errorf("the pull ran %d times, %d when paused by the master", n, runs)
		}
		return e.relayIs(h, stage.Paused, true)
	})

	// The master's Running resumes it.
	h.failAlways(nil)
	e.putRelay(stage.Running)
	testutil.Eventually(t, 10*time.Second, "relay resumed by the master", func() error {
		if n := h.runCount(); n != runs+1 {
			return fmt.Errorf("the pull ran %d times, want %d", n, runs+1)
		}
		return e.relayIs(h, stage.Running, false)
	})
}

// The relay's stage is driven as a subtask's: created under Paused it is
// Paused (explicitly) without pulling, Stopped pauses it as Paused does,
// Running resumes it.
func TestRelayStageDrivenLikeSubTasks(t *testing.T) {
	e := startRelaySW(t, 20*time.Millisecond, &fakeRelays{})
	e.putRelay(stage.Paused)
	h := e.onlyRelay()
	testutil.Eventually(t, 10*time.Second, "relay created Paused", func() error { return e.relayIs(h, stage.Paused, true) })
	if n := h.runCount(); n != 0 {
		t.Fatalf("a relay created Paused pulled %d times", n)
	}
	e.putRelay(stage.Running)
	testutil.Eventually(t, 10*time.Second, "relay Running", func() error { return e.relayIs(h, stage.Running, false) })
	e.putRelay(stage.Stopped)
	testutil.Eventually(t, 10*time.Second, "relay paused by Stopped", func() error { return e.relayIs(h, stage.Paused, true) })
	e.putRelay(stage.Running)
	testutil.Eventually(t, 10*time.Second, "relay Running again", func() error { return e.relayIs(h, stage.Running, false) })
}

// A relay holder that was stopped (its relay released) cannot run again:
// the master's Running replaces it with a new holder that runs. The
// relay's own converge used to call Start on it, which the lifecycle
// refuses, and the relay stayed Stopped.
func TestStoppedRelayAskedToRunIsReplaced(t *testing.T) {
	e := startRelaySW(t, 20*time.Millisecond, &fakeRelays{})
	e.putRelay(stage.Running)
	old := e.onlyRelay()
	testutil.Eventually(t, 10*time.Second, "relay Running", func() error { return e.relayIs(old, stage.Running, false) })
	old.Close()

	e.putRelay(stage.Running) // a new revision: the master's command again
	testutil.Eventually(t, 10*time.Second, "a new relay holder Running", func() error {
		all := e.relays.built()
		if len(all) != 2 {
			return fmt.Errorf("%d relay holders built, want 2", len(all))
		}
		return e.relayIs(all[1], stage.Running, false)
	})
	if got := old.Stage(); got != stage.Stopped {
		t.Fatalf("the old holder is %s, want Stopped", got)
	}
}
