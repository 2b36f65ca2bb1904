package relay

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

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

// handleEvent hands one whole event to the writer.
func (w *writer) handleEvent(raw []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return w.failed
	}
	w.seen++
	if err := w.handle(raw); err != nil {
		w.failed = err
		return err
	}
	return nil
}

// pump reads events off the dump connection and hands them to the writer
// until reading or writing fails. An event is handed over from the dump
// connection's read buffer, or read into one reused buffer when it is
// larger, or passed through in pieces when it is larger than flushSize
// (see passThrough): memory stays about twice flushSize whatever the
// events' size.
func (w *writer) pump(d *dumpConn) error {
	buf := make([]byte, 64<<10)
	for {
		if err := d.nextEvent(); err != nil {
			return err
		}
		h, raw, err := w.peekEvent(d, buf)
		switch {
		case err != nil:
			return err
		case raw != nil:
			err = w.handleEvent(raw)
			d.skip(len(raw))
		case int(h.Size) > flushSize && passable(h.Type):
			err = w.passThrough(d, h, buf)
		default:
			size := int(h.Size)
			if size > len(buf) {
				buf = append(buf[:headerSize], make([]byte, size-headerSize)...)
			}
			if err = d.read(buf[headerSize:size]); err == nil {
				err = w.handleEvent(buf[:size])
			}
		}
		if err != nil {
			return err
		}
	}
}

// peekEvent returns the header of the next event and, when the whole event
// is in the dump connection's read buffer and at most flushSize, the event
// itself, not read yet. Otherwise the header is read into buf.
func (w *writer) peekEvent(d *dumpConn, buf []byte) (h eventHeader, raw []byte, err error) {
	hdr, ok, err := d.peek(headerSize)
	if err != nil {
		return h, nil, err
	}
	if !ok {
		hdr = buf[:headerSize]
		if err := d.read(hdr); err != nil {
			return h, nil, err
		}
	}
	h = parseHeader(hdr)
	if h.Size < headerSize {
		return h, nil, fmt.Errorf("%w: size %d of a %s event is below the header size", errBadHeader, h.Size, h.Type)
	}
	if !ok || h.Size > flushSize {
		if ok {
			copy(buf, hdr)
			d.skip(headerSize)
		}
		return h, nil, nil
	}
	raw, ok, err = d.peek(int(h.Size))
	if err != nil || ok {
		return h, raw, err
	}
	copy(buf, hdr)
	d.skip(headerSize)
	return h, nil, nil
}

// stream waits while pump feeds the writer: on every tick it publishes
// whole transactions, syncs when SyncInterval has passed and checks that
// the source is alive. It returns at the end of ctx (nil error), when the
// dump fails or when writing fails, after stopping the dump and syncing
// what is whole.
func (w *writer) stream(ctx context.Context, d *dumpConn) (progressed bool, err error) {
	r := w.r
	src := r.cfg.Source
	streamErr := make(chan error, 1)
	go func() { streamErr <- w.pump(d) }()
	ticker := time.NewTicker(min(publishInterval, r.cfg.SyncInterval))
	defer ticker.Stop()
	// Sync points are made durable in order by their own goroutine, at
	// most once per SyncInterval: ticks go on publishing and rotations go
	// on to the next file while the disk works.
	stopSyncer, syncerDone, syncFailed := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(syncerDone)
		w.syncer(stopSyncer, syncFailed, r.cfg.SyncInterval)
	}()

	var failure error
	for failure == nil {
		select {
		case <-ctx.Done():
			failure = ctx.Err()
		case err := <-streamErr:
			streamErr = nil
			failure = pullError(err, "relay of source %q: read binlog from %s:%d", r.source, src.From.Host, src.From.Port)
		case err := <-syncFailed:
			failure = err
			w.fail(err)
		case now := <-ticker.C:
			failure = w.tick(now)
		}
	}
	close(stopSyncer)
	<-syncerDone
	// Stop the dump: closing the connection ends pump's read.
	_ = d.close()
	if streamErr != nil {
		<-streamErr
	}
	r.killDump(ctx, d.id())
	w.mu.Lock()
	defer w.mu.Unlock()
	progressed = w.events > 0
	if w.failed != nil {
		// handleEvent, tick or a sync point failed: a failed write may have
		// left part of its data in the file, so nothing more is written;
		// recovery cuts the file back to its last whole transaction. The
		// sync points taken before, whose data is whole, are still made
		// durable (and their files closed).
		_ = w.q.run(w.finishSync)
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

// killTimeout bounds killDump.
const killTimeout = 2 * time.Second

// killDump ends the source's side of a dump connection that the relay
// closed, as go-mysql's BinlogSyncer does: the source notices a closed
// dump connection only when it next writes to it (an event or a
// heartbeat), keeps the replica registered until then, and makes the
// relay's next connection with the same server id wait while it kills the
// old one. Best effort: the source may be gone, or have dropped the
// connection already.
func (r *Relay) killDump(ctx context.Context, id uint32) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	defer cancel()
	if _, err := r.db.ExecContext(kctx, fmt.Sprintf("KILL %d", id)); err != nil {
		r.log.Debug("could not kill the closed binlog dump connection on the source", zap.Uint32("connection", id), zap.Error(err))
	}
}

// tick publishes pending whole transactions, reports a source that sent
// nothing for deadAfter and, when SyncInterval has passed since the last
// sync and the syncer is idle, queues a sync point for it.
func (w *writer) tick(now time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return w.failed
	}
	if w.seen != w.seenAtTick {
		w.seenAtTick, w.alive = w.seen, now
	} else if idle := now.Sub(w.alive); idle >= deadAfter {
		w.failed = errs.New(CodeRelayPull, true, "relay of source %q: no event or heartbeat from %s:%d for %v; reconnecting",
			w.r.source, w.r.cfg.Source.From.Host, w.r.cfg.Source.From.Port, idle.Round(time.Second))
		return w.failed
	}
	var err error
	if w.dirty && now.Sub(w.lastSync) >= w.r.cfg.SyncInterval && w.q.idle() {
		err = w.queueSync(false)
	} else {
		err = w.flushPending()
	}
	if err != nil {
		w.failed = err
	}
	return err
}

// fail ends the stream with err (a sync point failed) unless it failed
// already.
func (w *writer) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		w.failed = err
	}
}
