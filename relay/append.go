package relay

import (
	"os"
	"path/filepath"

	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
)

// handle writes one whole event from the source.
func (w *writer) handle(raw []byte) error {
	if len(raw) < headerSize {
		return errs.New(CodeRelayPosition, true, "relay of source %q: event of %d bytes", w.r.source, len(raw))
	}
	h := parseHeader(raw)
	switch h.Type {
	case replication.ROTATE_EVENT:
		name, _, err := parseRotate(raw)
		if err != nil {
			return errs.New(CodeRelayPosition, false, "relay of source %q: %w", w.r.source, err)
		}
		if !h.artificial() {
			if err := w.appendEvent(h, raw); err != nil {
				return err
			}
			return w.rotateOut(name)
		}
		if name != w.fileName || w.file == nil {
			return w.rotateOut(name)
		}
		return nil
	case replication.FORMAT_DESCRIPTION_EVENT:
		checksum, err := fdeChecksum(raw)
		if err != nil {
			return errs.New(CodeRelayPosition, false, "relay of source %q: %w", w.r.source, err)
		}
		w.checksum = checksum
		w.tracker = txnTracker{checksum: checksum}
		if w.file != nil {
			return nil // resuming inside a file: its header is already there
		}
		if w.nextName == "" {
			return errs.New(CodeRelayPosition, true, "relay of source %q: format description event without a preceding rotate event", w.r.source)
		}
		return w.createFile(w.nextName, raw)
	}
	if h.Type == replication.MARIADB_GTID_LIST_EVENT && h.artificial() && w.file != nil && !w.hasGroup && !w.tracker.inGroup {
		return w.skipTo(h, raw)
	}
	if h.artificial() {
		return nil
	}
	if w.file == nil {
		return errs.New(CodeRelayPosition, true, "relay of source %q: %s event at %d before any file was started", w.r.source, h.Type, h.LogPos)
	}
	return w.appendEvent(h, raw)
}

// createFile starts a relay file with the magic and the source's format
// description event, and queues its first sync point.
func (w *writer) createFile(name string, fde []byte) error {
	path := filepath.Join(w.dir(), name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, binlogMode)
	if err != nil {
		return errs.New(CodeRelayWrite, false, "relay of source %q: create %s: %w", w.r.source, path, err)
	}
	w.file, w.fileName, w.nextName = f, name, ""
	w.offset, w.spilled, w.delta, w.deltaKnown, w.hasGroup = 0, 0, 0, false, false
	w.headerEnd = int64(len(magic) + len(fde))
	w.pending = append(append(w.pending[:0], magic...), fde...)
	w.complete, w.completeEvents, w.unreported = len(w.pending), 0, 0
	w.r.log.Info("relay file started", zap.String("file", name), zap.String("subdir", w.sub.Name))
	// The file's first sync point makes its directory entry durable too,
	// after the previous file's (see syncQueue): the meta names the file
	// only then.
	w.dirty, w.newFile = true, true
	return w.queueSync(false)
}

// skipTo handles the artificial Gtid_list event a MariaDB source sends when
// a dump started from a GTID set skips the event groups before it: the event
// ends where the next one starts. In a file that holds no group yet, the
// source file's own header events (Gtid_list, Binlog_checkpoint) are
// dropped and this event takes their place, so that the file keeps one
// constant offset delta from here on (see doc.go) and its first Gtid_list
// names the set it starts at. Without a skip it is ignored, like any
// artificial event.
func (w *writer) skipTo(h eventHeader, raw []byte) error {
	start := int64(h.LogPos) - int64(h.Size)
	if w.deltaKnown && start == w.end()+w.delta {
		return nil
	}
	if w.offset > w.headerEnd {
		if err := w.file.Truncate(w.headerEnd); err != nil {
			return errs.New(CodeRelayWrite, false, "relay of source %q: truncate %s: %w", w.r.source, w.fileName, err)
		}
		w.offset = w.headerEnd
		w.dirty = true
	}
	if keep := w.headerEnd - w.offset; keep >= 0 && keep < int64(len(w.pending)) {
		w.pending = w.pending[:keep] // the magic and format description event, when not written yet
	}
	w.complete, w.completeEvents, w.unreported = len(w.pending), 0, 0
	w.deltaKnown = false
	w.r.log.Info("the source skipped to the GTID start; relay file restarts after its header",
		zap.String("file", w.fileName), zap.Uint32("position", h.LogPos))
	return w.appendEvent(h, raw)
}

// appendEvent adds a non-artificial event to pending; whole transactions
// are written once flushSize of them are pending, at a stop event, or on
// the next tick.
func (w *writer) appendEvent(h eventHeader, raw []byte) error {
	if err := w.follows(h); err != nil {
		return err
	}
	if w.gtid.empty() && !w.tracker.inGroup {
		if set, ok, err := gtidListOf(h, raw, w.checksum); err == nil && ok {
			w.gtid = set
		}
	}
	w.pending = append(w.pending, raw...)
	if n := int64(len(w.pending)); n > w.r.pendingPeak.Load() {
		w.r.pendingPeak.Store(n)
	}
	w.events++
	w.unreported++
	if !w.step(h, raw) {
		if len(w.pending)-w.complete >= flushSize {
			return w.spill()
		}
		return nil
	}
	w.complete = len(w.pending)
	if h.Type == replication.STOP_EVENT {
		return w.sync()
	}
	if w.complete >= flushSize {
		return w.flushPending()
	}
	return nil
}

// follows checks that an event starts where the relay's file ends, at the
// file's constant offset delta, which the first event after a file's
// header sets.
func (w *writer) follows(h eventHeader) error {
	start := int64(h.LogPos) - int64(h.Size)
	at := w.end()
	if !w.deltaKnown {
		w.delta, w.deltaKnown = start-at, true
	} else if start != at+w.delta {
		return errs.New(CodeRelayPosition, true,
			"relay of source %q: %s event at %s:%d does not follow the relay's position %d; the relay will reconnect from its last complete transaction",
			w.r.source, h.Type, w.fileName, start, at+w.delta)
	}
	return nil
}

// step follows transactions through an appended event (raw, or its first
// bytes for an event passed through) and reports whether it ends one,
// which makes everything appended so far whole.
func (w *writer) step(h eventHeader, raw []byte) (boundary bool) {
	boundary, done := w.tracker.step(h, raw)
	if done != nil {
		w.gtid.add(*done)
		w.hasGroup = true
	}
	if boundary {
		w.completeEvents, w.completeTS = w.unreported, h.Timestamp
	}
	return boundary
}

// end is the source position of the end of what was appended, minus delta.
func (w *writer) end() int64 { return w.offset + w.spilled + int64(len(w.pending)) }

// spill writes the open transaction's pending bytes ahead of its end, so
// that a large transaction streams to the file instead of growing pending:
// memory stays about flushSize whatever the transaction's size. Readers
// and the meta still stop at offset, the end of the last whole
// transaction; after a crash, recovery truncates the file there, as it
// does any torn tail.
func (w *writer) spill() error {
	if err := w.flushPending(); err != nil {
		return err
	}
	if err := w.writeAhead(w.pending); err != nil {
		return err
	}
	w.pending = w.pending[:0]
	return nil
}

// flushPending appends the whole transactions of pending to the file and
// publishes the new end to readers. w.gtid is the set up to that end: the
// rest of pending is an open transaction, which has not added to it.
func (w *writer) flushPending() error {
	n := w.complete
	if n == 0 {
		return nil
	}
	if err := w.writeFile(w.pending[:n]); err != nil {
		return err
	}
	w.pending = append(w.pending[:0], w.pending[n:]...)
	w.complete = 0
	w.publish(w.spilled + int64(n))
	return nil
}

// writeFile appends b to the file, after the bytes of whole transactions
// (offset) and those spilled ahead of them.
func (w *writer) writeFile(b []byte) error {
	if _, err := w.file.Write(b); err != nil {
		return errs.New(CodeRelayWrite, false, "relay of source %q: write %s: %w", w.r.source, w.fileName, err)
	}
	return nil
}

// publish makes the written bytes after offset, which end a transaction,
// part of the file readers may read, with the events they hold.
func (w *writer) publish(written int64) {
	w.offset += written
	w.spilled = 0
	w.dirty = true
	if m := w.r.cfg.Metrics; m != nil {
		m.BytesWritten.WithLabelValues(w.r.source).Add(float64(written))
		m.EventsWritten.WithLabelValues(w.r.source).Add(float64(w.completeEvents))
	}
	w.unreported -= w.completeEvents
	w.completeEvents = 0
	r := w.r
	r.mu.Lock()
	if w.completeTS != 0 {
		r.lastTS = w.completeTS
	}
	r.active = activeFile{sub: w.sub.Name, name: w.fileName, size: w.offset}
	if w.deltaKnown {
		r.written = binlog.Location{Name: w.fileName, Pos: uint32(w.offset + w.delta), GTID: w.gtid.String()}
	} else if r.written.Name == "" {
		r.written = binlog.Location{Name: w.fileName, Pos: magicSize, GTID: w.gtid.String()}
	}
	r.broadcast()
	r.mu.Unlock()
}
