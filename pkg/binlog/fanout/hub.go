// Package fanout shares one binlog reader among the stream tasks of one
// source: a Hub reads and decodes each event once and hands the same
// *replication.BinlogEvent to every subscriber, each through its own
// binlog.StreamOpener, so a task reads as it did with a reader of its own.
//
// Events are shared read-only: neither a subscriber nor go-mysql may
// change an event once the hub handed it out (the stream package only
// reads events; go-mysql's lazily cached TableMapEvent strings, such as
// ColumnNameString, must not be used by subscribers).
//
// Each run of the hub keeps the events it read in a ring bounded by
// events and bytes (Config.Events, Config.Bytes). A subscriber reads the
// ring at its own cursor; the hub waits for the slowest one while the
// ring is full, and once another subscriber has waited for new events for
// Config.Stall while the ring is full, it detaches the slowest ones. A
// detached subscriber, or one that starts where the hub cannot serve it,
// reads through a private reader of its own (from the last transaction
// boundary it passed, dropping the events it already returned) and
// attaches again at a transaction boundary the hub holds or is about to
// read. Positions are the source's file and offset after each event, so a
// switch neither loses nor repeats an event.
//
// The hub owns its runs' readers (one at a time, opened lazily by the
// first subscriber and closed when none is attached) and nothing else; it
// knows no checkpoints, sinks or tables. Each rows event in the ring
// carries a Memo, where subscribers that derive the same thing from the
// event (stream tasks with the same encoding settings) derive it once.
package fanout

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
)

// Defaults of Config.
const (
	// DefaultEvents and DefaultBytes bound a hub's ring: as many events as
	// 16 go-mysql readers cache between their parser and their consumer
	// (upstream.EventCache each), and their raw bytes; a decoded rows
	// event holds about three times its raw size.
	DefaultEvents = 1024
	DefaultBytes  = 16 << 20
	// DefaultStall is how long a caught-up subscriber may wait on a full
	// ring before the slowest subscribers are detached.
	DefaultStall = 2 * time.Second
	// DefaultReach is how far (bytes of one binlog file) a subscriber may
	// be ahead of the hub's read position and still attach, waiting for
	// the hub; and how far behind the hub a new subscriber may start and
	// make the hub read again from its position (a rewind) rather than
	// read privately. Streams started together thus share from the start.
	DefaultReach = 16 << 20
	// fillMax is how many events a subscriber takes from the ring at once.
	fillMax = 64
)

// Gauge and Counter are what the hub reports to (prometheus metrics).
type (
	Gauge   interface{ Set(float64) }
	Counter interface{ Inc() }
)

// Metrics are the hub's metrics; nil fields are not reported.
type Metrics struct {
	// Shared counts the subscribers reading through the hub, Private the
	// ones reading through a private reader.
	Shared, Private Gauge
	// Detaches counts slow subscribers detached, Attaches subscribers
	// that attached (at open or again after reading privately), Rewinds
	// runs restarted at a new subscriber's earlier position.
	Detaches, Attaches, Rewinds Counter
}

// Config configures a Hub.
type Config struct {
	// Events and Bytes bound the ring (0: DefaultEvents, DefaultBytes).
	Events, Bytes int
	// Stall: see DefaultStall (0: DefaultStall).
	Stall time.Duration
	// Reach: see DefaultReach (0: DefaultReach).
	Reach uint32
	// MemoBytes bounds what the memos of the ring's rows events hold
	// (0: DefaultMemoBytes; < 0: no memos).
	MemoBytes int64
	// Silence, when > 0, is how long a subscriber may see no event at all
	// (the source sends heartbeats) before its GetEvent fails with an
	// error wrapping binlog.ErrSilent: set it for readers of the source,
	// not of the relay.
	Silence time.Duration
	Metrics Metrics
	Logger  *zap.Logger
}

// Stats is a hub's state for status.
type Stats struct {
	Shared, Private               int
	Detaches, Attaches, Rewinds   int64
	Running                       bool
	RingEvents, RingBytes, Cursor int
	// MemoBytes is what the ring's memos hold; MemoFull counts values not
	// stored for want of room.
	MemoBytes, MemoFull int64
}

// slot is one event of the ring with the position after it.
type slot struct {
	ev *replication.BinlogEvent
	// at is the position after ev (Name and Pos); adv: ev moved it
	// forward; boundary: at is between transactions.
	at            binlog.Location
	adv, boundary bool
	size          int
	// memo is set for rows events (see Memo).
	memo *Memo
}

// run is one reading of the source by the hub, from start.
type run struct {
	cancel context.CancelFunc
	opener binlog.StreamOpener
}

// Hub is the shared reader of one source in one reading mode (relay or a
// connection to the source). Create it with New; Opener gives each stream
// task its StreamOpener; Close stops it.
type Hub struct {
	cfg  Config
	log  *zap.Logger
	runs sync.WaitGroup // the runs' goroutines

	mu sync.Mutex // guards the fields below
	// ring holds the events of seqs [tail, head) at seq%len(ring).
	ring       []slot
	head, tail uint64
	bytes      int
	// start is the current run's start, an attach point before seq
	// startSeq while tail == startSeq; pos follows the run's read events.
	start    binlog.Location
	startSeq uint64
	pos      follower
	run      *run              // nil: no run
	err      error             // why the last run failed (nil: it did not)
	subs     map[*Sub]struct{} // attached subscribers
	private  int
	wantRoom bool          // the run waits for room in the ring
	room     chan struct{} // signalled when a subscriber moved on; cap 1
	// stallSince and lastStall: the first and last moment of the current
	// stall (see stall).
	stallSince, lastStall time.Time
	stallSub              *Sub // holds the oldest event since stallSince
	closed                bool

	detaches, attaches, rewinds int64

	// memoBytes is what the memos in the ring hold, memoFull counts
	// values not stored for want of room (Memo).
	memoBytes, memoFull atomic.Int64
	// attached is len(subs), for Sub.Memo.
	attached atomic.Int32
}

// New returns an idle hub: it reads nothing until a subscriber opens.
func New(cfg Config) *Hub {
	if cfg.Events <= 0 {
		cfg.Events = DefaultEvents
	}
	if cfg.Bytes <= 0 {
		cfg.Bytes = DefaultBytes
	}
	if cfg.Stall <= 0 {
		cfg.Stall = DefaultStall
	}
	if cfg.MemoBytes == 0 {
		cfg.MemoBytes = DefaultMemoBytes
	}
	if cfg.Reach == 0 {
		cfg.Reach = DefaultReach
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Hub{cfg: cfg, log: cfg.Logger, ring: make([]slot, cfg.Events), subs: make(map[*Sub]struct{}),
		room: make(chan struct{}, 1)}
}

// ErrClosed is returned by a subscriber's Open and GetEvent once the hub
// is closed; resumable.
var ErrClosed = errors.New("fanout: the shared binlog reader is closed")

// Close stops the hub's run and waits for it; subscribers fail with
// ErrClosed from then on.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	h.stopRun()
	for s := range h.subs {
		h.wake(s)
	}
	h.mu.Unlock()
	h.runs.Wait()
}

// Stats returns the hub's current state.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Stats{Shared: len(h.subs), Private: h.private, Detaches: h.detaches, Attaches: h.attaches,
		Rewinds: h.rewinds, Running: h.run != nil, RingEvents: int(h.head - h.tail), RingBytes: h.bytes,
		MemoBytes: h.memoBytes.Load(), MemoFull: h.memoFull.Load()}
}

// report sets the gauges; mu is held.
func (h *Hub) report() {
	h.attached.Store(int32(len(h.subs)))
	if g := h.cfg.Metrics.Shared; g != nil {
		g.Set(float64(len(h.subs)))
	}
	if g := h.cfg.Metrics.Private; g != nil {
		g.Set(float64(h.private))
	}
}

// count increments n and its counter; mu is held.
func count(n *int64, c Counter) {
	*n++
	if c != nil {
		c.Inc()
	}
}

// startRun starts a run at loc with opener; the ring starts empty and
// every attached subscriber re-synchronises (resync: it drops the new
// run's events up to the last one it returned). mu is held.
func (h *Hub) startRun(ctx context.Context, loc binlog.Location, opener binlog.StreamOpener) {
	h.stopRun()
	h.clearRing()
	h.start, h.startSeq, h.pos = binlog.Location{Name: loc.Name, Pos: loc.Pos}, h.head, newFollower(loc)
	h.err = nil
	for s := range h.subs {
		s.cursor, s.resync, s.skipping = h.head, true, true
	}
	// The run belongs to the hub, not to the subscriber that started it:
	// it keeps ctx's values, not its cancellation.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &run{cancel: cancel, opener: opener}
	h.run = r
	h.runs.Add(1)
	go func() {
		defer h.runs.Done()
		defer opener.Close()
		h.read(ctx, r, loc)
	}()
}

// stopRun stops the current run, if any; mu is held.
func (h *Hub) stopRun() {
	if h.run != nil {
		h.run.cancel()
		h.run = nil
	}
}

// clearRing drops every event of the ring; mu is held.
func (h *Hub) clearRing() {
	for q := h.tail; q < h.head; q++ {
		i := q % uint64(len(h.ring))
		if m := h.ring[i].memo; m != nil {
			m.drop()
		}
		h.ring[i] = slot{}
	}
	h.tail, h.bytes = h.head, 0
}

// read is a run's goroutine: it opens the reader and puts every event into
// the ring until the run is stopped or the reader fails.
func (h *Hub) read(ctx context.Context, r *run, loc binlog.Location) {
	st, err := r.opener.Open(ctx, loc)
	if err != nil {
		h.fail(r, err)
		return
	}
	for {
		ev, err := st.GetEvent(ctx)
		if err != nil {
			h.fail(r, err)
			return
		}
		if !h.put(ctx, r, ev) {
			return
		}
	}
}

// fail ends run r with err: each attached subscriber gets err once it has
// read every event before it.
func (h *Hub) fail(r *run, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.run != r {
		return // stopped: its error is nobody's
	}
	h.run, h.err = nil, err
	r.cancel()
	h.log.Warn("the shared binlog reader failed; its subscribers retry on their own", zap.Error(err))
	for s := range h.subs {
		h.wake(s)
	}
}

// put appends ev to the ring, waiting while it is full; false once r is
// stopped.
func (h *Hub) put(ctx context.Context, r *run, ev *replication.BinlogEvent) bool {
	size := len(ev.RawData)
	h.mu.Lock()
	for {
		if h.run != r {
			h.mu.Unlock()
			return false
		}
		if h.fits(size) {
			break
		}
		h.reclaim()
		if h.fits(size) {
			h.stall() // the ring was full: does a caught-up subscriber wait?
			break
		}
		wait := h.stall()
		if h.fits(size) {
			break
		}
		h.wantRoom = true
		h.mu.Unlock()
		if !h.waitRoom(ctx, wait) {
			return false
		}
		h.mu.Lock()
	}
	h.wantRoom = false
	sl := slot{ev: ev, size: size}
	if _, rows := ev.Event.(*replication.RowsEvent); rows && h.cfg.MemoBytes > 0 {
		sl.memo = &Memo{hub: h}
	}
	sl.adv, sl.boundary = h.pos.step(ev)
	sl.at = h.pos.at
	h.ring[h.head%uint64(len(h.ring))] = sl
	h.head++
	h.bytes += size
	for s := range h.subs {
		if s.waiting {
			h.wake(s)
		}
	}
	h.mu.Unlock()
	return true
}

// waitRoom waits until a subscriber moved on, for at most d when d > 0;
// false once ctx is done.
func (h *Hub) waitRoom(ctx context.Context, d time.Duration) bool {
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-h.room:
	case <-timeout:
	}
	return true
}

// fits reports whether an event of size bytes fits in the ring (an empty
// ring takes any event); mu is held.
func (h *Hub) fits(size int) bool {
	n := h.head - h.tail
	return n == 0 || n < uint64(len(h.ring)) && h.bytes+size <= h.cfg.Bytes
}

// reclaim drops the events every attached subscriber has read, keeping
// the rest of the ring as history for subscribers that attach later; mu
// is held.
func (h *Hub) reclaim() {
	low := h.head
	for s := range h.subs {
		if s.cursor < low {
			low = s.cursor
		}
	}
	for ; h.tail < low; h.tail++ {
		i := h.tail % uint64(len(h.ring))
		h.bytes -= h.ring[i].size
		if m := h.ring[i].memo; m != nil {
			m.drop()
		}
		h.ring[i] = slot{}
	}
}

// stall runs while the ring is full. A stall is a run of such moments
// at which a subscriber had read everything (it waits for the hub, which
// waits for the slowest), none more than Stall/2 after the last (the
// hub checks every Stall/4 while it waits), with the same subscriber
// holding the oldest event throughout: once one
// lasted Stall, the subscribers that hold the oldest event are detached.
// A slow subscriber that takes the ring in chunks (the ring drains and
// fills again) thus still counts as holding the others back; subscribers
// that are all about as slow as each other (none a full ring ahead) do
// not. It returns how long to wait before the next check (0: until a
// subscriber moves on). mu is held.
func (h *Hub) stall() time.Duration {
	waiting := false
	for s := range h.subs {
		// One that drops events it returned before (after a rewind, or
		// ahead of the hub) waits by design, bounded by Reach.
		if s.cursor == h.head && !s.skipping {
			waiting = true
			break
		}
	}
	if !waiting {
		return 0
	}
	now := time.Now()
	_, attached := h.subs[h.stallSub]
	if h.stallSince.IsZero() || now.Sub(h.lastStall) > h.cfg.Stall/2 || !attached || h.stallSub.cursor != h.tail {
		// A new stall, or another subscriber holds the oldest event now
		// (streams that take turns being behind, as the scheduler runs
		// them, are not slow).
		h.stallSince, h.stallSub = now, nil
		for s := range h.subs {
			if s.cursor == h.tail {
				h.stallSub = s
				break
			}
		}
	}
	h.lastStall = now
	if d := h.cfg.Stall - now.Sub(h.stallSince); d > 0 {
		return min(d, h.cfg.Stall/4)
	}
	for s := range h.subs {
		if s.cursor == h.tail {
			h.detach(s)
			count(&h.detaches, h.cfg.Metrics.Detaches)
			h.log.Info("a stream lags the shared binlog reader by a full buffer; it reads on its own until it catches up",
				zap.String("stream", s.name), zap.Duration("stalled", now.Sub(h.stallSince)))
		}
	}
	h.stallSince, h.stallSub = time.Time{}, nil
	h.reclaim()
	return 0
}

// detach takes s off the hub: it reads privately from now on; mu is held.
func (h *Hub) detach(s *Sub) {
	if _, ok := h.subs[s]; !ok {
		return
	}
	delete(h.subs, s)
	s.detached = true
	h.private++
	s.counted = true
	h.report()
	h.wake(s)
	if len(h.subs) == 0 {
		h.idle()
	}
}

// idle stops the run once no subscriber is attached; mu is held.
func (h *Hub) idle() {
	h.stopRun()
	h.clearRing()
	h.err = nil
}

// wake wakes s if it waits; mu is held.
func (h *Hub) wake(s *Sub) {
	s.waiting = false
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}

// join attaches s at p, the position after the last event it returned (a
// transaction boundary), or reports false: s then reads privately. With
// nothing running, s starts a run at p (with p.GTID, if set, as the
// reader's start); else s attaches where the ring holds p, or ahead of the
// hub's read position (within Reach: it drops the hub's events up to p),
// or, when fresh (s is opening) and p is behind the ring within Reach, the
// hub reads again from p (a rewind; the attached subscribers drop what
// they already returned). Only s's goroutine calls join for s. mu is held.
func (h *Hub) join(ctx context.Context, s *Sub, p binlog.Location, fresh bool) bool {
	if h.closed {
		return false
	}
	attach := func(cursor uint64, skip bool) bool {
		s.cursor, s.detached, s.resync, s.skipTo, s.skipping = cursor, false, false, nil, skip
		if s.counted {
			h.private--
			s.counted = false
		}
		if skip {
			at := binlog.Location{Name: p.Name, Pos: p.Pos}
			s.skipTo = &at
		}
		h.subs[s] = struct{}{}
		count(&h.attaches, h.cfg.Metrics.Attaches)
		h.report()
		return true
	}
	startRun := func(rewind bool) bool {
		o, err := s.hubOpener()
		if err != nil {
			h.log.Warn("no reader for the shared binlog reader; the stream reads on its own", zap.Error(err))
			return false
		}
		h.startRun(ctx, p, o)
		if rewind {
			count(&h.rewinds, h.cfg.Metrics.Rewinds)
		}
		return attach(h.head, false)
	}
	if h.run == nil {
		return startRun(false)
	}
	at := binlog.Location{Name: p.Name, Pos: p.Pos}
	if at.Name == "" || at.Pos == 0 {
		return false
	}
	if h.tail == h.startSeq && at == h.start {
		return attach(h.startSeq, false)
	}
	oldest := h.oldest()
	for q := h.head; q > h.tail && at.Compare(oldest) >= 0; q-- {
		sl := &h.ring[(q-1)%uint64(len(h.ring))]
		if !sl.adv {
			continue
		}
		if c := sl.at.Compare(at); c < 0 {
			break
		} else if c == 0 {
			// A stream that reads privately because it lagged comes back
			// only once it is in the newer half of the ring, not to lag
			// a full ring behind again at once.
			if !sl.boundary || !fresh && h.head-q > uint64(len(h.ring)/2) {
				return false
			}
			return attach(q, false)
		}
	}
	if !h.pos.known() || h.pos.at.Name != at.Name {
		return false
	}
	switch {
	case at.Pos > h.pos.at.Pos && at.Pos-h.pos.at.Pos <= h.cfg.Reach && h.err == nil:
		return attach(h.head, true)
	case fresh && at.Pos < h.pos.at.Pos && h.pos.at.Pos-at.Pos <= h.cfg.Reach && oldest.Compare(at) > 0:
		h.log.Info("a stream starts behind the shared binlog reader; it reads again from there",
			zap.String("stream", s.name), zap.Stringer("from", at), zap.Stringer("was-at", h.pos.at))
		return startRun(true)
	}
	return false
}

// oldest is the position of the oldest attach point the ring holds; mu is
// held.
func (h *Hub) oldest() binlog.Location {
	if h.tail == h.startSeq {
		return h.start
	}
	for q := h.tail; q < h.head; q++ {
		if sl := &h.ring[q%uint64(len(h.ring))]; sl.adv {
			return sl.at
		}
	}
	return h.pos.at
}

// leave takes s off the hub for good; mu is held.
func (h *Hub) leave(s *Sub) {
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		if len(h.subs) == 0 {
			h.idle()
		}
	} else if s.counted {
		h.private--
	}
	s.counted = false
	h.report()
}
