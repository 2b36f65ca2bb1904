package relay

import (
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/errs"
)

// passPrefix is how much of an event passed through the transaction
// tracker sees: the header and the start of the body, where a query
// event's statement starts.
const passPrefix = 4 << 10

// passable reports whether an event of type t may be written as it
// arrives instead of whole: any event but those the writer decodes in
// full. A query event is classified by its first passPrefix bytes, which
// is enough for a statement that long: BEGIN, COMMIT and ROLLBACK are
// short, XA statements are recognised by their start.
func passable(t replication.EventType) bool {
	switch t {
	case replication.FORMAT_DESCRIPTION_EVENT, replication.ROTATE_EVENT,
		replication.MARIADB_GTID_LIST_EVENT, replication.PREVIOUS_GTIDS_EVENT:
		return false
	}
	return true
}

// passThrough writes an event larger than flushSize to the file as it
// arrives, in pieces of len(buf) (which holds its header), after the open
// transaction's pending bytes (see spill): a row event of any size takes
// no more memory than buf. As for spilled bytes, readers and the meta see
// the event once its transaction is whole. w.mu is taken for each piece,
// never while reading from the source, so that ticks go on.
func (w *writer) passThrough(d *dumpConn, h eventHeader, buf []byte) error {
	size := int(h.Size)
	first := min(size, len(buf))
	if err := d.read(buf[headerSize:first]); err != nil {
		return err
	}
	var prefix [passPrefix]byte
	n := copy(prefix[:], buf[:first])
	keep, err := w.beginPass(h, buf[:first])
	if err != nil {
		return err
	}
	for left := size - first; left > 0; {
		piece := buf[:min(left, len(buf))]
		if err := d.read(piece); err != nil {
			return err
		}
		left -= len(piece)
		if err := w.passPiece(piece, keep); err != nil {
			return err
		}
	}
	if !keep {
		return nil
	}
	return w.endPass(h, prefix[:n])
}

// beginPass starts passing an event through with its first piece; keep
// is false for an artificial event, which is read and dropped.
func (w *writer) beginPass(h eventHeader, first []byte) (keep bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return false, w.failed
	}
	w.seen++
	if h.artificial() {
		return false, nil
	}
	if w.file == nil {
		err = errs.New(CodeRelayPosition, true, "relay of source %q: %s event at %d before any file was started", w.r.source, h.Type, h.LogPos)
	} else if err = w.follows(h); err == nil {
		if err = w.spill(); err == nil {
			err = w.writeAhead(first)
		}
	}
	if err != nil {
		w.failed = err
		return false, err
	}
	w.events++
	w.unreported++
	return true, nil
}

// passPiece writes the next piece of an event passed through; a piece of
// a dropped event only counts as a sign of life.
func (w *writer) passPiece(piece []byte, keep bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return w.failed
	}
	w.seen++
	if !keep {
		return nil
	}
	if err := w.writeAhead(piece); err != nil {
		w.failed = err
		return err
	}
	return nil
}

// endPass follows transactions through an event passed through, given its
// first bytes, and publishes its transaction if it ended with it.
func (w *writer) endPass(h eventHeader, prefix []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return w.failed
	}
	if !w.step(h, prefix) {
		return nil
	}
	// Everything before the event was spilled: the whole transaction is
	// in the file, nothing of it is pending.
	w.publish(w.spilled)
	return nil
}

// writeAhead writes bytes of the open transaction after what pending
// held, which spill wrote.
func (w *writer) writeAhead(b []byte) error {
	if err := w.writeFile(b); err != nil {
		return err
	}
	w.spilled += int64(len(b))
	return nil
}
