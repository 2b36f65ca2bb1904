package fanout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/binlog"
)

// ErrDiverged is the cause of a subscriber's read error when the events
// after a switch between the hub and a private reader do not line up (the
// source's binlog changed under the same name: a failover); resumable:
// the task restarts from its checkpoint.
var ErrDiverged = errors.New("fanout: the binlog read again does not match the events already returned")

// Sub is one stream task's view of a hub: a binlog.StreamOpener whose
// stream is itself. It reads through the hub while attached and through
// a private reader (from own) otherwise. Open, GetEvent and Close are
// called from the task's goroutine, one at a time.
type Sub struct {
	h    *Hub
	name string
	// own builds the task's private reader; hubOpener a reader for a run
	// of the hub that this subscriber starts.
	own, hubOpener func() (binlog.StreamOpener, error)
	wakeCh         chan struct{} // the hub's wake-ups; cap 1

	// Guarded by h.mu.
	cursor   uint64 // the next seq to read from the ring
	waiting  bool   // waits for the next event
	detached bool   // the hub let go of it: read privately
	resync   bool   // a new run began: drop its events up to t
	skipping bool   // it drops events up to skipTo (resync or skipTo set)
	counted  bool   // counted in h.private

	// Owned by the task's goroutine.
	local  []slot
	li     int
	skipTo *binlog.Location // drop events up to the advancing one ending here
	t, b   binlog.Location  // after the last returned advancing event; the last boundary passed
	opened binlog.Location  // where Open started (its GTID names b while b is there)
	priv   binlog.StreamOpener
	pst    binlog.Streamer
	pf     follower
	join   bool // try to attach before the next event
	lastEv time.Time
	err    error // sticky: the hub failed
	isOpen bool
	// toPrivate: s left the hub and reads privately once openPrivate
	// succeeds (retried by every GetEvent until then).
	toPrivate bool
	// memo is the memo of the event GetEvent returned last (nil: none, or
	// read privately).
	memo *Memo
	// openCtx is the context Open was called with (the task's run): the
	// private reader is opened under it, not under one GetEvent's wait.
	openCtx context.Context
}

var (
	_ binlog.StreamOpener = (*Sub)(nil)
	_ binlog.Streamer     = (*Sub)(nil)
)

// Opener returns the opener of one stream task named name: own builds a
// private reader of the task (its relay reader, or its own replication
// connection), hubOpener a reader of the same kind for the hub.
func (h *Hub) Opener(name string, own, hubOpener func() (binlog.StreamOpener, error)) *Sub {
	return &Sub{h: h, name: name, own: own, hubOpener: hubOpener, wakeCh: make(chan struct{}, 1)}
}

// Open starts the subscriber at loc, a transaction boundary (a task's
// checkpoint): through the hub when it can serve loc, else through a
// private reader.
func (s *Sub) Open(ctx context.Context, loc binlog.Location) (binlog.Streamer, error) {
	s.Close()
	s.opened, s.t, s.b = loc, binlog.Location{Name: loc.Name, Pos: loc.Pos}, binlog.Location{Name: loc.Name, Pos: loc.Pos}
	s.local, s.li, s.skipTo, s.err, s.join, s.isOpen, s.toPrivate = s.local[:0], 0, nil, nil, false, true, false
	s.openCtx = ctx
	s.memo = nil
	s.lastEv = time.Now()
	h := s.h
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	ok := h.join(ctx, s, loc, true)
	if !ok {
		h.private++
		s.counted = true
		h.report()
	}
	h.mu.Unlock()
	if !ok {
		if err := s.openPrivate(); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close ends the subscription: the hub stops once none is attached.
func (s *Sub) Close() {
	if !s.isOpen {
		return
	}
	s.isOpen = false
	s.h.mu.Lock()
	s.h.leave(s)
	s.h.mu.Unlock()
	s.closePrivate()
	s.local = s.local[:0]
}

// Memo returns the memo of the event GetEvent returned last: nil when it
// was read privately (its decode is the subscriber's own), is not a rows
// event, or no other subscriber is attached to share it with (a stream
// alone pays nothing for memos).
func (s *Sub) Memo() *Memo {
	if s.memo == nil || s.h.attached.Load() < 2 {
		return nil
	}
	return s.memo
}

// here is where s stands for a (re)start: b, with the GTID set it was
// opened with while b is still the opening position.
func (s *Sub) here() binlog.Location {
	loc := s.b
	if loc.Name == s.opened.Name && loc.Pos == s.opened.Pos {
		loc.GTID = s.opened.GTID
	}
	if loc.Name == "" {
		return s.opened // a start by GTID alone that has not passed a boundary yet
	}
	return loc
}

// openPrivate opens the private reader at b, dropping its events up to t.
func (s *Sub) openPrivate() error {
	s.closePrivate()
	o, err := s.own()
	if err != nil {
		return err
	}
	loc := s.here()
	st, err := o.Open(s.openCtx, loc)
	if err != nil {
		o.Close()
		return err
	}
	s.priv, s.pst, s.pf = o, st, newFollower(loc)
	s.skipTo = nil
	if s.t != s.b {
		t := s.t
		s.skipTo = &t
	}
	return nil
}

// closePrivate closes the private reader, if any.
func (s *Sub) closePrivate() {
	if s.priv != nil {
		s.priv.Close()
		s.priv, s.pst = nil, nil
	}
}

// GetEvent returns the next event, from the hub or the private reader. A
// ctx that ends returns its error and loses nothing.
func (s *Sub) GetEvent(ctx context.Context) (*replication.BinlogEvent, error) {
	if !s.isOpen {
		return nil, ErrClosed
	}
	for {
		if s.err != nil {
			return nil, s.err
		}
		if s.toPrivate {
			if err := s.openPrivate(); err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, err
			}
			s.toPrivate = false
		}
		if s.pst != nil {
			s.memo = nil
			ev, ok, err := s.private(ctx)
			if err != nil || ok {
				return ev, err
			}
			continue
		}
		if s.li < len(s.local) {
			sl := s.local[s.li]
			s.local[s.li] = slot{} // hold the event no longer than the task does
			s.li++
			if s.take(&sl) {
				s.memo = sl.memo
				return sl.ev, nil
			}
			continue
		}
		s.local, s.li = s.local[:0], 0
		switch st, err := s.fill(); {
		case err != nil:
			s.err = err
			return nil, err
		case st == fillDetached:
			s.toPrivate = true
		case st == fillNone:
			select {
			case <-s.wakeCh:
			case <-ctx.Done():
				return nil, s.silent(ctx)
			}
		}
	}
}

// What fill did.
const (
	fillSome     = iota // events were taken
	fillNone            // none yet: wait for a wake-up
	fillDetached        // the hub let go of s: read privately
)

// fill takes the next events of the ring into local.
func (s *Sub) fill() (int, error) {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fillNone, ErrClosed
	}
	if s.detached {
		s.detached = false
		return fillDetached, nil
	}
	if s.resync {
		s.resync = false
		t := s.t
		s.skipTo = &t
	}
	n := h.head - s.cursor
	if n == 0 {
		if h.run == nil && h.err != nil {
			err := h.err
			h.leave(s)
			return fillNone, err
		}
		s.waiting = true
		return fillNone, nil
	}
	n = min(n, fillMax)
	for q := s.cursor; q < s.cursor+n; q++ {
		s.local = append(s.local, h.ring[q%uint64(len(h.ring))])
	}
	s.cursor += n
	if h.wantRoom {
		select {
		case h.room <- struct{}{}:
		default:
		}
	}
	return fillSome, nil
}

// take decides whether the ring's event sl goes to the task (true) or is
// dropped as already returned, and follows the position.
func (s *Sub) take(sl *slot) bool {
	s.lastEv = time.Now()
	if s.skipTo != nil {
		if !sl.adv {
			return false
		}
		switch c := sl.at.Compare(*s.skipTo); {
		case c == 0:
			s.skipTo = nil
			s.h.mu.Lock()
			s.skipping = false
			s.h.mu.Unlock()
		case c > 0:
			// The hub passed the point without an event ending there:
			// read privately from the last boundary instead.
			s.h.mu.Lock()
			s.h.detach(s)
			s.detached = false
			s.h.mu.Unlock()
			s.local, s.li = s.local[:0], 0
			s.toPrivate = true
			return false
		}
		return false
	}
	if sl.adv {
		s.t = sl.at
		if sl.boundary {
			s.b = s.t
		}
	}
	return true
}

// private reads the private reader's next event: ok false when it was
// dropped (already returned) or s attached to the hub instead.
func (s *Sub) private(ctx context.Context) (*replication.BinlogEvent, bool, error) {
	if s.join {
		s.join = false
		if s.tryJoin(ctx) {
			return nil, false, nil
		}
	}
	ev, err := s.pst.GetEvent(ctx)
	if err != nil {
		if ctx.Err() != nil {
			if s.skipTo == nil && s.t == s.b && s.tryJoin(ctx) {
				// Caught up while idle: the hub serves from here.
				return nil, false, ctx.Err()
			}
			return nil, false, s.silent(ctx)
		}
		return nil, false, err
	}
	s.lastEv = time.Now()
	adv, boundary := s.pf.step(ev)
	if s.skipTo != nil {
		if adv {
			switch c := s.pf.at.Compare(*s.skipTo); {
			case c == 0:
				s.skipTo = nil
			case c > 0:
				return nil, false, fmt.Errorf("%w: after %s the binlog has no event ending at %s", ErrDiverged, s.b, *s.skipTo)
			}
		}
		return nil, false, nil
	}
	if adv {
		s.t = s.pf.at
		if boundary {
			s.b = s.t
			s.join = true
		}
	}
	return ev, true, nil
}

// tryJoin attaches s to the hub at t, a boundary, closing the private
// reader when it did.
func (s *Sub) tryJoin(ctx context.Context) bool {
	s.h.mu.Lock()
	ok := s.h.join(ctx, s, s.here(), false)
	s.h.mu.Unlock()
	if ok {
		s.closePrivate()
	}
	return ok
}

// silent is the error of a wait that ctx ended: ctx's, or, with
// Config.Silence, one wrapping binlog.ErrSilent once no event came for
// that long.
func (s *Sub) silent(ctx context.Context) error {
	if d := s.h.cfg.Silence; d > 0 && time.Since(s.lastEv) >= d {
		// A read loop whose own context ended ignores this error.
		return fmt.Errorf("stream %q: %w (for at least %s)", s.name, binlog.ErrSilent, d)
	}
	return ctx.Err()
}
