package scheduler

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// TestFailover runs a fleet on one etcd: sources get bound, a dead bound
// worker's source (and its relay key) moves to the free worker, leader
// deaths elect another leader without needless moves, and a source no worker
// can take is reported until a worker joins.
func TestFailover(t *testing.T) {
	c := etcdtest.Start(t)
	admin := c.Client(t)
	store := ha.NewStore(admin, "")
	var mu sync.Mutex
	var nodes []*node
	add := func(name string) *node {
		n := startNode(t, c, name)
		mu.Lock()
		nodes = append(nodes, n)
		mu.Unlock()
		return n
	}
	leaderSampler(t, &nodes, &mu)

	// w3 leads and stays free: w1 and w2 join after it and take the sources.
	w3 := add("w3")
	if l := waitLeader(t, failover, w3); l != w3 {
		t.Fatalf("leader %s, want w3", l.name)
	}
	w1, w2 := add("w1"), add("w2")
	putSources(t, store, "s1", "s2")
	waitBounds(t, failover, store, map[string]string{"w1": "s1", "w2": "s2"})
	waitLeader(t, failover, w1, w2, w3)
	testutil.Eventually(t, failover, "leader status", func() error {
		st := w3.sched.Status()
		if want := map[string]string{"s1": "w1", "s2": "w2"}; !maps.Equal(st.Sources, want) || st.Moves != 2 {
			return errorf("status %+v, want sources %v and 2 moves", st, want)
		}
		return nil
	})
	if st := w1.sched.Status(); st.IsLeader || len(st.Sources) != 0 {
		t.Errorf("follower status %+v", st)
	}
	testutil.Eventually(t, failover, "leader counts its moves", func() error {
		if got := value(t, w3.metrics.moves.WithLabelValues(ReasonUnbound)); got != 2 {
			return errorf("leader counted %v unbound moves, want 2", got)
		}
		return nil
	})

	// The leader dies while nothing needs it: another leads, nothing moves.
	_, revs := bounds(t, store)
	start := time.Now()
	w3.kill(t, admin)
	leader := waitLeader(t, failover, w1, w2)
	t.Logf("new leader %s after %s", leader.name, time.Since(start))
	testutil.WaitFor(t, failover, "new leader's first pass", func() bool { return len(leader.sched.Status().Sources) == 2 })
	if _, now := bounds(t, store); !maps.Equal(now, revs) {
		t.Errorf("bound keys rewritten by a leader change: revisions %v, were %v", now, revs)
	}
	if st := leader.sched.Status(); st.Moves != 0 {
		t.Errorf("new leader made %d moves, want 0", st.Moves)
	}

	// A bound follower dies: its source and relay key move to the free w4.
	w4 := add("w4")
	victim, src := w1, "s1"
	if leader == w1 {
		victim, src = w2, "s2"
	}
	if _, err := store.PutRelayBound(context.Background(), ha.Bound{Source: src, Worker: victim.name}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	victim.kill(t, admin)
	want := map[string]string{leader.name: other(src), "w4": src}
	waitBounds(t, failover, store, want)
	t.Logf("%s moved from %s to w4 after %s", src, victim.name, time.Since(start))
	relays, _, err := store.GetRelayBounds(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(relays) != 1 || relays["w4"].Source != src {
		t.Errorf("relay keys %v, want only w4's for %s", relays, src)
	}

	// The bound leader dies: w4 leads, the source waits for a worker.
	leader.kill(t, admin)
	if l := waitLeader(t, failover, w4); l != w4 {
		t.Fatalf("leader %s, want w4", l.name)
	}
	testutil.WaitFor(t, failover, "unplaced source reported", func() bool {
		return value(t, w4.metrics.unplaced) == 1 && w4.sched.Status().Sources[other(src)] == ""
	})
	add("w5")
	waitBounds(t, failover, store, map[string]string{"w4": src, "w5": other(src)})
	testutil.WaitFor(t, failover, "no unplaced source", func() bool { return value(t, w4.metrics.unplaced) == 0 })
	// The move is counted after its transaction commits.
	testutil.Eventually(t, failover, "w4 counts its move", func() error {
		if got := value(t, w4.metrics.moves.WithLabelValues(ReasonWorkerDead)); got != 1 {
			return errorf("w4 counted %v worker-dead moves, want 1", got)
		}
		return nil
	})
}

// other is the source of the pair s1, s2 that is not src.
func other(src string) string {
	if src == "s1" {
		return "s2"
	}
	return "s1"
}

// TestCleanStopResigns: a scheduler whose context is cancelled returns nil,
// keeps the worker's lease, and resigns so that another leads at once.
func TestCleanStopResigns(t *testing.T) {
	c := etcdtest.Start(t)
	admin := c.Client(t)
	a := startNode(t, c, "a")
	waitLeader(t, failover, a)
	b := startNode(t, c, "b")
	waitLeader(t, failover, a, b)
	if err := a.stop(t); err != nil {
		t.Fatalf("Run returned %v after a clean stop, want nil", err)
	}
	a.killed.Store(true) // no longer observes
	// a's lease still lives: only a resign lets b lead before a dies.
	waitLeader(t, ttl, b)
	resp, err := admin.Get(context.Background(), ha.NewStore(admin, "").Keys().Keepalive("a"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("keepalive key of a after its scheduler stopped: %v, %v; the lease must survive", resp, err)
	}
	if st := a.sched.Status(); st.IsLeader || st.Leader != "" {
		t.Errorf("stopped scheduler status %+v", st)
	}
}

// TestLostLeadershipRefused: a move guarded by a leadership that was given
// up is refused.
func TestLostLeadershipRefused(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	store := ha.NewStore(cli, "")
	ctx := context.Background()
	lease, err := cli.Grant(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"w1", "w2"} {
		if _, err := cli.Put(ctx, store.Keys().Keepalive(w), `{}`, clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	session, err := concurrency.NewSession(cli, concurrency.WithLease(lease.ID))
	if err != nil {
		t.Fatal(err)
	}
	defer session.Orphan()
	el := concurrency.NewElection(session, store.Keys().SchedulerLeader())
	if err := el.Campaign(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	guard := leaderGuard(el)
	if ok, err := store.MoveBound(ctx, ha.Move{Source: "s1", To: "w1"}, guard); err != nil || !ok {
		t.Fatalf("move while leading = %v, %v; want true, nil", ok, err)
	}
	if err := el.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := store.MoveBound(ctx, ha.Move{Source: "s2", To: "w2"}, guard); err != nil || ok {
		t.Fatalf("move after resigning = %v, %v; want false, nil", ok, err)
	}
	if _, found, _, err := store.GetBound(ctx, "w2"); err != nil || found {
		t.Errorf("w2 bound after a refused move: %v, %v", found, err)
	}
	if _, err := cli.Revoke(ctx, lease.ID); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// TestStaleBindingRemoved: a dead worker's binding to a source an alive
// worker serves is removed, so the dead worker cannot come back to it; the
// alive worker keeps the source.
func TestStaleBindingRemoved(t *testing.T) {
	c := etcdtest.Start(t)
	store := ha.NewStore(c.Client(t), "")
	putSources(t, store, "s1")
	for _, b := range []ha.Bound{{Source: "s1", Worker: "w2"}, {Source: "s1", Worker: "w9"}} {
		if _, err := store.PutBound(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	// w2 is alive before any scheduler looks: started after w1, whose
	// scheduler may scan first, a busy machine made w2 look dead and s1
	// moved to w1 (CI, load 12).
	startNode(t, c, "w2")
	startNode(t, c, "w1")
	waitBounds(t, failover, store, map[string]string{"w2": "s1"})
}
