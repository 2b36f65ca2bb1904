package worker

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
)

// relayWaitLogEvery bounds the warnings of a reader waiting for the relay.
const relayWaitLogEvery = 30 * time.Second

// relayOpener is what the source's units, validators and streams read its
// binlog through: the relay reader while the relay holder exists; while
// relay is enabled for the source but its holder is not there yet (the
// source worker has just started, the relay stage is not reconciled yet),
// an opener that waits for it, so that no reader opens a binlog dump of
// its own meanwhile (200 subtasks starting before the relay would hold 200
// connections to the source for as long as they run); nil when relay is
// off for the source (readers use a replication connection of their own).
func (w *SourceWorker) relayOpener() binlog.StreamOpener {
	if r := w.RelayReader(); r != nil {
		return r
	}
	if w.enabled(&w.relayWatches) {
		return &awaitRelay{w: w}
	}
	return nil
}

// awaitRelay is a binlog.StreamOpener that waits for the relay of its
// source worker to exist and then reads it.
type awaitRelay struct {
	w *SourceWorker

	mu    sync.Mutex
	inner binlog.StreamOpener // the relay reader once there; guarded by mu
}

// Open waits, under ctx, until the relay holder exists and opens its
// reader at loc. Relay turned off meanwhile is a resumable error: the
// resumed reader reads the source itself.
func (a *awaitRelay) Open(ctx context.Context, loc binlog.Location) (binlog.Streamer, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	began, logged := time.Now(), time.Now()
	for {
		if r := a.w.RelayReader(); r != nil {
			a.mu.Lock()
			a.inner = r
			a.mu.Unlock()
			return r.Open(ctx, loc)
		}
		if !a.w.enabled(&a.w.relayWatches) {
			return nil, errs.New(CodeRelayOff, true, "relay of source %q was turned off before it ran; "+
				"the binlog is read from the source when the reader resumes", a.w.source)
		}
		if time.Since(logged) >= relayWaitLogEvery {
			logged = time.Now()
			a.w.log.Warn("a binlog reader waits for the relay of its source to start (relay is enabled for the source); "+
				"check the relay stage in status", zap.Duration("waited", time.Since(began).Round(time.Second)))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// Close closes the relay reader, if Open reached it.
func (a *awaitRelay) Close() {
	a.mu.Lock()
	inner := a.inner
	a.mu.Unlock()
	if inner != nil {
		inner.Close()
	}
}
