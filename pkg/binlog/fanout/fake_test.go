package fanout

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/binlog"
)

// fakeBinlog is a source's binlog in memory: files of transactions
// (BEGIN, rows events, XID), each rows event carrying one row whose only
// value is the change's number, so a reader can check it got every change
// once, in order. It grows while readers read it.
type fakeBinlog struct {
	mu     sync.Mutex
	events []fakeEvent    // in order, over every file
	grown  chan struct{}  // closed and replaced when events grow
	fail   map[string]int // opener kind -> fail its streams after this many events
	opens  map[string]int // opener kind -> Open calls
	next   int64          // the next change number
	file   int            // the current file's number
	pos    uint32         // the current file's end
}

type fakeEvent struct {
	file  string
	start uint32
	ev    *replication.BinlogEvent
}

func newFakeBinlog() *fakeBinlog {
	b := &fakeBinlog{grown: make(chan struct{}), fail: map[string]int{}, opens: map[string]int{}, file: 1}
	b.mu.Lock()
	b.header()
	b.mu.Unlock()
	return b
}

func (b *fakeBinlog) name() string { return fmt.Sprintf("bin.%06d", b.file) }

// add appends an event of size bytes; mu is held.
func (b *fakeBinlog) add(size uint32, e replication.Event, typ replication.EventType) {
	start := b.pos
	b.pos += size
	raw := make([]byte, size)
	ev := &replication.BinlogEvent{RawData: raw, Header: &replication.EventHeader{EventType: typ, LogPos: b.pos, EventSize: size}, Event: e}
	b.events = append(b.events, fakeEvent{file: b.name(), start: start, ev: ev})
}

// header starts a file; mu is held.
func (b *fakeBinlog) header() {
	b.pos = 4
	b.add(120, &replication.FormatDescriptionEvent{}, replication.FORMAT_DESCRIPTION_EVENT)
}

// txn appends a transaction of rows rows events.
func (b *fakeBinlog) txn(rows int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.add(50, &replication.QueryEvent{Query: []byte("BEGIN")}, replication.QUERY_EVENT)
	for range rows {
		b.add(100, &replication.RowsEvent{Rows: [][]any{{b.next}}}, replication.WRITE_ROWS_EVENTv1)
		b.next++
	}
	b.add(31, &replication.XIDEvent{}, replication.XID_EVENT)
	b.grow()
}

// rotate ends the file and starts the next.
func (b *fakeBinlog) rotate() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.file++
	next := b.name()
	b.file--
	b.add(40, &replication.RotateEvent{NextLogName: []byte(next), Position: 4}, replication.ROTATE_EVENT)
	b.file++
	b.header()
	b.grow()
}

// grow wakes the readers; mu is held.
func (b *fakeBinlog) grow() {
	close(b.grown)
	b.grown = make(chan struct{})
}

// changes is the number of changes written.
func (b *fakeBinlog) changes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.next
}

// failAfter makes the streams of openers of kind fail after n events.
func (b *fakeBinlog) failAfter(kind string, n int) {
	b.mu.Lock()
	b.fail[kind] = n
	b.mu.Unlock()
}

func (b *fakeBinlog) openCount(kind string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opens[kind]
}

// opener returns an opener of kind ("hub", "own").
func (b *fakeBinlog) opener(kind string) func() (binlog.StreamOpener, error) {
	return func() (binlog.StreamOpener, error) { return &fakeOpener{b: b, kind: kind}, nil }
}

var errFake = errors.New("fake: the connection broke")

type fakeOpener struct {
	b      *fakeBinlog
	kind   string
	closed atomic.Bool
}

func (o *fakeOpener) Open(_ context.Context, loc binlog.Location) (binlog.Streamer, error) {
	b := o.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.opens[o.kind]++
	i := 0
	for i < len(b.events) && (b.events[i].file != loc.Name || b.events[i].start < loc.Pos) {
		i++
	}
	if i == len(b.events) && !(loc.Name == b.name() && loc.Pos == b.pos) {
		return nil, fmt.Errorf("fake: no event at %s", loc)
	}
	// A dump begins with an artificial rotate naming its start and the
	// file's format description, resent with its old position.
	pre := []*replication.BinlogEvent{
		{RawData: make([]byte, 40), Header: &replication.EventHeader{EventType: replication.ROTATE_EVENT, Flags: logEventArtificial},
			Event: &replication.RotateEvent{NextLogName: []byte(loc.Name), Position: uint64(loc.Pos)}},
	}
	if loc.Pos > 4 {
		pre = append(pre, &replication.BinlogEvent{RawData: make([]byte, 120), Header: &replication.EventHeader{EventType: replication.FORMAT_DESCRIPTION_EVENT, LogPos: 124},
			Event: &replication.FormatDescriptionEvent{}})
	}
	failAt := -1
	if n, ok := b.fail[o.kind]; ok {
		failAt = n
	}
	return &fakeStream{o: o, pre: pre, i: i, failAt: failAt}, nil
}

func (o *fakeOpener) Close() { o.closed.Store(true) }

type fakeStream struct {
	o      *fakeOpener
	pre    []*replication.BinlogEvent
	i      int
	n      int
	failAt int
}

func (s *fakeStream) GetEvent(ctx context.Context) (*replication.BinlogEvent, error) {
	if s.o.closed.Load() {
		return nil, errors.New("fake: stream closed")
	}
	if s.failAt >= 0 && s.n >= s.failAt {
		return nil, errFake
	}
	s.n++
	if len(s.pre) > 0 {
		ev := s.pre[0]
		s.pre = s.pre[1:]
		return ev, nil
	}
	b := s.o.b
	for {
		b.mu.Lock()
		if s.i < len(b.events) {
			ev := b.events[s.i].ev
			s.i++
			b.mu.Unlock()
			return ev, nil
		}
		grown := b.grown
		b.mu.Unlock()
		select {
		case <-grown:
		case <-ctx.Done():
			s.n--
			return nil, ctx.Err()
		}
	}
}

// position of the boundary after change n's transaction when every
// transaction has rows rows, in a binlog without rotations.
func (b *fakeBinlog) at(i int) binlog.Location {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.events[i]
	return binlog.Location{Name: e.file, Pos: e.ev.Header.LogPos}
}

// boundaryAfter is the location after the transaction holding change n.
func (b *fakeBinlog) boundaryAfter(n int64) binlog.Location {
	b.mu.Lock()
	defer b.mu.Unlock()
	seen := false
	for _, e := range b.events {
		if r, ok := e.ev.Event.(*replication.RowsEvent); ok && r.Rows[0][0].(int64) == n {
			seen = true
		}
		if _, ok := e.ev.Event.(*replication.XIDEvent); ok && seen {
			return binlog.Location{Name: e.file, Pos: e.ev.Header.LogPos}
		}
	}
	panic("no such change")
}

// consumer reads a subscriber like a stream task's read loop (waits end
// every tick) and records the changes it gets.
type consumer struct {
	sub   *Sub
	delay func(n int64) time.Duration // per change
	mu    sync.Mutex
	got   []int64
	err   error
}

func (c *consumer) run(ctx context.Context, until int64) {
	for {
		c.mu.Lock()
		done := len(c.got) > 0 && c.got[len(c.got)-1] >= until-1
		c.mu.Unlock()
		if done || ctx.Err() != nil {
			return
		}
		tctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		ev, err := c.sub.GetEvent(tctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				continue
			}
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			return
		}
		if r, ok := ev.Event.(*replication.RowsEvent); ok {
			n := r.Rows[0][0].(int64)
			c.mu.Lock()
			c.got = append(c.got, n)
			c.mu.Unlock()
			if c.delay != nil {
				time.Sleep(c.delay(n))
			}
		}
	}
}

// check fails t unless c got exactly the changes [from, until).
func (c *consumer) check(t *testing.T, name string, from, until int64) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		t.Fatalf("%s: %v", name, c.err)
	}
	if int64(len(c.got)) != until-from {
		t.Fatalf("%s: got %d changes, want %d (first %v)", name, len(c.got), until-from, c.got[:min(len(c.got), 5)])
	}
	for i, n := range c.got {
		if n != from+int64(i) {
			t.Fatalf("%s: change %d is %d, want %d", name, i, n, from+int64(i))
		}
	}
}

var _ = binary.LittleEndian
