package relay

import (
	"context"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/errs"
)

const (
	// heartbeatPeriod is how often an idle source sends a heartbeat event.
	heartbeatPeriod = 10 * time.Second
	// deadAfter bounds the handshake with the source, and how long the
	// dump may stay without any event (heartbeats included) before the
	// source counts as lost.
	deadAfter = 3 * heartbeatPeriod
	// flushSize is the amount of whole transactions at which they are
	// written without waiting for the next tick.
	flushSize = 256 << 10
	// publishInterval bounds how long whole transactions stay in memory,
	// unseen by readers, when less than flushSize of them arrived.
	publishInterval = 10 * time.Millisecond
)

// eventHandler adapts a function to go-mysql's EventHandler.
type eventHandler func(*replication.BinlogEvent) error

func (f eventHandler) HandleEvent(ev *replication.BinlogEvent) error { return f(ev) }

// handleEvent is called by go-mysql's reading goroutine for every event.
func (w *writer) handleEvent(ev *replication.BinlogEvent) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return w.failed
	}
	w.seen++
	if err := w.handle(ev); err != nil {
		w.failed = err
		return err
	}
	return nil
}

// stream waits while go-mysql's goroutine feeds handleEvent: on every tick
// it publishes whole transactions, syncs when SyncInterval has passed and
// checks that the source is alive. It returns at the end of ctx (nil
// error), when the dump fails or when writing fails, after stopping the
// dump and syncing what is whole.
func (w *writer) stream(ctx context.Context, syncer *replication.BinlogSyncer, s *replication.BinlogStreamer) (progressed bool, err error) {
	r := w.r
	src := r.cfg.Source
	sctx, cancel := context.WithCancel(ctx)
	streamErr := make(chan error, 1)
	go func() {
		// With a synchronous handler the streamer carries only errors.
		_, err := s.GetEvent(sctx)
		streamErr <- err
	}()
	ticker := time.NewTicker(min(publishInterval, r.cfg.SyncInterval))
	defer ticker.Stop()

	var failure error
	for failure == nil {
		select {
		case <-ctx.Done():
			failure = ctx.Err()
		case err := <-streamErr:
			streamErr = nil
			failure = pullError(err, "relay of source %q: read binlog from %s:%d", r.source, src.From.Host, src.From.Port)
		case now := <-ticker.C:
			failure = w.tick(now)
		}
	}
	// Stop the dump: no handleEvent runs after Close.
	syncer.Close()
	cancel()
	if streamErr != nil {
		<-streamErr
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	progressed = w.events > 0
	if w.failed != nil {
		// handleEvent or tick failed: a failed write may have left part of
		// its data in the file, so nothing more is written; recovery cuts
		// the file back to its last whole transaction.
		if ctx.Err() != nil {
			return progressed, nil
		}
		return progressed, w.failed
	}
	if err := w.sync(); err != nil {
		return progressed, err
	}
	if ctx.Err() != nil {
		return progressed, nil
	}
	return progressed, failure
}

// tick publishes pending whole transactions, syncs when SyncInterval has
// passed since the last sync, and reports a source that sent nothing for
// deadAfter. The fsync runs without w.mu, so events keep being handled
// while the disk works.
func (w *writer) tick(now time.Time) error {
	p, err := w.tickLocked(now)
	if err != nil || p == nil {
		return err
	}
	if err := w.finishSync(p); err != nil {
		w.mu.Lock()
		if w.failed == nil {
			w.failed = err
		}
		w.mu.Unlock()
		return err
	}
	return nil
}

func (w *writer) tickLocked(now time.Time) (*syncPoint, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return nil, w.failed
	}
	if w.seen != w.seenAtTick {
		w.seenAtTick, w.alive = w.seen, now
	} else if idle := now.Sub(w.alive); idle >= deadAfter {
		w.failed = errs.New(CodeRelayPull, true, "relay of source %q: no event or heartbeat from %s:%d for %v; reconnecting",
			w.r.source, w.r.cfg.Source.From.Host, w.r.cfg.Source.From.Port, idle.Round(time.Second))
		return nil, w.failed
	}
	var (
		p   *syncPoint
		err error
	)
	if w.dirty && now.Sub(w.lastSync) >= w.r.cfg.SyncInterval {
		p, err = w.prepareSync()
	} else {
		err = w.flushPending()
	}
	if err != nil {
		w.failed = err
	}
	return p, err
}
