package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dmworker/dm-worker/pkg/binlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runConsumers runs cs until each got the changes up to until.
func runConsumers(t *testing.T, until int64, cs ...*consumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(ctx, until)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("consumers did not finish in time")
	}
}

func open(t *testing.T, h *Hub, b *fakeBinlog, name string, at binlog.Location) *consumer {
	t.Helper()
	s := h.Opener(name, b.opener("own"), b.opener("hub"))
	if _, err := s.Open(context.Background(), at); err != nil {
		t.Fatalf("open %s at %s: %v", name, at, err)
	}
	t.Cleanup(s.Close)
	return &consumer{sub: s}
}

var start = binlog.Location{Name: "bin.000001", Pos: 4}

// Streams opened at the same place share one reader: every one gets every
// change once, in order, across a rotation, and no private reader opens.
func TestHubFanOut(t *testing.T) {
	b := newFakeBinlog()
	for i := range 200 {
		b.txn(3)
		if i == 100 {
			b.rotate()
		}
	}
	h := New(Config{Events: 64})
	defer h.Close()
	var cs []*consumer
	for i := range 4 {
		cs = append(cs, open(t, h, b, fmt.Sprint("s", i), start))
	}
	go func() { // the binlog grows while they read
		for range 50 {
			b.txn(2)
		}
	}()
	runConsumers(t, 700, cs...)
	for i, c := range cs {
		c.check(t, fmt.Sprint("s", i), 0, 700)
	}
	if n := b.openCount("hub"); n != 1 {
		t.Errorf("the hub opened %d readers, want 1", n)
	}
	if n := b.openCount("own"); n != 0 {
		t.Errorf("%d private readers opened, want 0", n)
	}
	if st := h.Stats(); st.Shared != 4 || st.Private != 0 || st.Detaches != 0 {
		t.Errorf("stats %+v", st)
	}
}

// A slow stream does not hold the others back beyond the ring: it is
// detached, reads privately from where it was (inside a transaction: the
// ring is smaller than one), and attaches again once it caught up; every
// stream gets every change exactly once.
func TestHubSlowSubscriberDetachesAndReattaches(t *testing.T) {
	b := newFakeBinlog()
	for range 40 {
		b.txn(25)
	}
	const total = 1000
	h := New(Config{Events: 16, Stall: 30 * time.Millisecond})
	defer h.Close()
	fast := open(t, h, b, "fast", start)
	slow := open(t, h, b, "slow", start)
	slow.delay = func(n int64) time.Duration {
		if n < 300 {
			return 2 * time.Millisecond
		}
		return 0
	}
	var slowAtFastEnd int
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		fast.run(ctx, total)
		slow.mu.Lock()
		slowAtFastEnd = len(slow.got)
		slow.mu.Unlock()
	}()
	go func() { defer wg.Done(); slow.run(ctx, total) }()
	wg.Wait()
	fast.check(t, "fast", 0, total)
	slow.check(t, "slow", 0, total)
	st := h.Stats()
	if st.Detaches == 0 {
		t.Fatalf("the slow stream was never detached: %+v", st)
	}
	if b.openCount("own") == 0 {
		t.Fatal("the detached stream opened no private reader")
	}
	// The fast one did not wait for the slow one's 600 ms of delays.
	if slowAtFastEnd >= 300 {
		t.Errorf("the slow stream had %d changes when the fast one had all: held back by the slow one", slowAtFastEnd)
	}
	// Once both are idle at the end, the slow one attaches again.
	waitFor(t, func() bool {
		tctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, err := slow.sub.GetEvent(tctx)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("slow: %v", err)
		}
		return errors.Is(err, context.DeadlineExceeded) && h.Stats().Shared == 2
	}, func() string {
		h.mu.Lock()
		defer h.mu.Unlock()
		return fmt.Sprintf("subs %d private %d slow t=%v b=%v skip=%v priv=%v hub at %v head %d tail %d", len(h.subs), h.private, slow.sub.t, slow.sub.b, slow.sub.skipTo, slow.sub.pst != nil, h.pos.at, h.head, h.tail)
	})
	if st := h.Stats(); st.Private != 0 || st.Attaches < 3 {
		t.Errorf("after catching up: %+v", st)
	}
	// Both keep getting new changes through the hub.
	for range 4 {
		b.txn(5)
	}
	runConsumers(t, total+20, fast, slow)
	fast.check(t, "fast", 0, total+20)
	slow.check(t, "slow", 0, total+20)
}

func waitFor(t *testing.T, cond func() bool, state ...func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			for _, f := range state {
				t.Log(f())
			}
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Streams that open later at other places: one just behind the hub makes
// it read again from there (a rewind), one ahead waits for the hub, one
// far behind reads privately and attaches when it reaches the hub.
func TestHubLateJoiners(t *testing.T) {
	b := newFakeBinlog()
	for range 300 {
		b.txn(2)
	}
	h := New(Config{Events: 32, Reach: 12000})
	defer h.Close()
	first := open(t, h, b, "first", b.boundaryAfter(399))
	runConsumers(t, 420, first) // the hub is now at about change 420
	behind := open(t, h, b, "behind", b.boundaryAfter(389))
	ahead := open(t, h, b, "ahead", b.boundaryAfter(439))
	far := open(t, h, b, "far", b.boundaryAfter(9))
	runConsumers(t, 600, first, behind, ahead, far)
	first.check(t, "first", 400, 600)
	behind.check(t, "behind", 390, 600)
	ahead.check(t, "ahead", 440, 600)
	far.check(t, "far", 10, 600)
	st := h.Stats()
	if st.Rewinds != 1 {
		t.Errorf("rewinds %d, want 1 (%+v)", st.Rewinds, st)
	}
	if b.openCount("own") != 1 {
		t.Errorf("%d private readers, want 1 (the far one's)", b.openCount("own"))
	}
	waitFor(t, func() bool {
		tctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, _ = far.sub.GetEvent(tctx)
		return h.Stats().Shared == 4
	})
}

// A failure of the hub's reader reaches every attached stream as its own
// error once it got the events before it; reopened, they share again.
func TestHubErrorReachesEverySubscriber(t *testing.T) {
	b := newFakeBinlog()
	for range 50 {
		b.txn(2)
	}
	b.failAfter("hub", 60)
	h := New(Config{})
	defer h.Close()
	cs := []*consumer{open(t, h, b, "a", start), open(t, h, b, "b", start)}
	runConsumers(t, 100, cs...)
	for _, c := range cs {
		if !errors.Is(c.err, errFake) {
			t.Fatalf("err %v, want the reader's", c.err)
		}
		if len(c.got) == 0 || len(c.got) != len(cs[0].got) {
			t.Fatalf("got %d and %d changes before the error", len(c.got), len(cs[0].got))
		}
	}
	if h.Stats().Running {
		t.Fatal("the failed run still runs")
	}
	b.failAfter("hub", 1<<30)
	opens := b.openCount("hub")
	got := len(cs[0].got)
	resume := b.boundaryAfter(int64(got - 1))
	if got%2 == 1 {
		resume = b.boundaryAfter(int64(got - 2))
		got--
	}
	for _, c := range cs {
		c.sub.Close()
		c.err = nil
		c.got = nil
		if _, err := c.sub.Open(context.Background(), resume); err != nil {
			t.Fatal(err)
		}
	}
	runConsumers(t, 100, cs...)
	for i, c := range cs {
		c.check(t, fmt.Sprint(i), int64(got), 100)
	}
	if n := b.openCount("hub"); n != opens+1 {
		t.Errorf("the hub opened %d readers for the reopened streams, want 1: %+v", n-opens, h.Stats())
	}
}

// The hub reads only while a stream is attached: the last Close stops it
// and closes its reader.
func TestHubStopsWithoutSubscribers(t *testing.T) {
	b := newFakeBinlog()
	b.txn(1)
	h := New(Config{})
	a := open(t, h, b, "a", start)
	c := open(t, h, b, "c", start)
	runConsumers(t, 1, a, c)
	a.sub.Close()
	if !h.Stats().Running {
		t.Fatal("the hub stopped with a subscriber left")
	}
	c.sub.Close()
	if st := h.Stats(); st.Running || st.Shared != 0 || st.RingEvents != 0 {
		t.Fatalf("after the last close: %+v", st)
	}
	h.Close()
	if _, err := h.Opener("x", b.opener("own"), b.opener("hub")).Open(context.Background(), start); !errors.Is(err, ErrClosed) {
		t.Fatalf("open after Close: %v", err)
	}
}

// With Silence, a stream that sees no event at all (no heartbeat either)
// for that long fails with binlog.ErrSilent.
func TestHubSilence(t *testing.T) {
	b := newFakeBinlog()
	h := New(Config{Silence: 50 * time.Millisecond})
	defer h.Close()
	c := open(t, h, b, "a", start)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		_, err := c.sub.GetEvent(ctx)
		cancel()
		if errors.Is(err, binlog.ErrSilent) {
			return
		}
	}
	t.Fatal("no ErrSilent")
}
