package relay

import (
	"context"
	"fmt"
	"os"
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
	stopWriteback, writebackDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(writebackDone)
		w.writeback(stopWriteback)
	}()
	ticker := time.NewTicker(min(publishInterval, r.cfg.SyncInterval))
	defer ticker.Stop()
	// At most one sync point is made durable at a time, by its own
	// goroutine: ticks go on publishing while the disk works.
	syncDone := make(chan error, 1)
	syncing := false

	var failure error
	for failure == nil {
		select {
		case <-ctx.Done():
			failure = ctx.Err()
		case err := <-streamErr:
			streamErr = nil
			failure = pullError(err, "relay of source %q: read binlog from %s:%d", r.source, src.From.Host, src.From.Port)
		case err := <-syncDone:
			syncing = false
			failure = err
		case now := <-ticker.C:
			var p *syncPoint
			if p, failure = w.tick(now, !syncing); p != nil {
				syncing = true
				go func() { syncDone <- w.syncTo(p) }()
			}
		}
	}
	if syncing {
		<-syncDone
	}
	close(stopWriteback)
	<-writebackDone
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

// writeback starts writing what pump wrote to disk as soon as it is
// written, until stop is closed: the disk then works while the relay
// reads, and the fsyncs of sync points and rotations find little left to
// write. It runs on its own goroutine so that a busy disk never holds up
// pump.
func (w *writer) writeback(stop <-chan struct{}) {
	var (
		f    *os.File
		done int64
	)
	for {
		select {
		case <-stop:
			return
		case <-w.kick:
		}
		w.mu.Lock()
		file, end := w.file, w.fileEnd
		w.mu.Unlock()
		if file != f {
			f, done = file, 0
		}
		if f != nil && end > done {
			startWriteback(f, done, end-done)
			done = end
		}
	}
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
// nothing for deadAfter and, when sync is true and SyncInterval has passed
// since the last sync, takes a sync point for syncTo.
func (w *writer) tick(now time.Time, sync bool) (*syncPoint, error) {
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
	if sync && w.dirty && now.Sub(w.lastSync) >= w.r.cfg.SyncInterval {
		p, err = w.prepareSync()
	} else {
		err = w.flushPending()
	}
	if err != nil {
		w.failed = err
	}
	return p, err
}

// syncTo makes a sync point of tick durable without w.mu, so that events
// keep being handled while the disk works; a failure ends the stream.
func (w *writer) syncTo(p *syncPoint) error {
	err := w.finishSync(p)
	if err != nil {
		w.mu.Lock()
		if w.failed == nil {
			w.failed = err
		}
		w.mu.Unlock()
	}
	return err
}
