package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// ttl is the workers' keepalive TTL; failover must happen within ttl+2s.
const (
	ttl      = 2 * time.Second
	failover = ttl + 2*time.Second
)

// node is one worker: a keepalive lease and a scheduler on it, with a
// client of its own.
type node struct {
	name    string
	ka      *ha.Keepalive
	sched   *Scheduler
	metrics *Metrics
	cancel  context.CancelFunc
	done    chan error
	killed  atomic.Bool // set before its lease is revoked
	stopped bool
}

// startNode starts worker name's keepalive and scheduler; both are stopped
// when the test ends.
func startNode(t *testing.T, c *etcdtest.Cluster, name string) *node {
	t.Helper()
	cli := c.Client(t)
	store := ha.NewStore(cli, "")
	lg := zaptest.NewLogger(t).Named(name)
	ka, err := store.StartKeepalive(context.Background(), name, ttl, lg)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{name: name, ka: ka, metrics: NewMetrics(prometheus.NewRegistry()), done: make(chan error, 1)}
	n.sched = New(Config{Client: cli, Store: store, Name: name, Lease: ka.LeaseID(), Logger: lg, Metrics: n.metrics})
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- n.sched.Run(ctx) }()
	t.Cleanup(func() {
		n.stop(t)
		if err := ka.Close(context.Background()); err != nil {
			t.Errorf("close keepalive of %s: %v", name, err)
		}
	})
	return n
}

// stop cancels the scheduler and returns what Run returned.
func (n *node) stop(t *testing.T) error {
	t.Helper()
	if n.stopped {
		return nil
	}
	n.stopped = true
	n.cancel()
	select {
	case err := <-n.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("scheduler of %s did not return 10s after its context was cancelled", n.name)
		return nil
	}
}

// kill revokes the node's lease (as when the process dies) and checks that
// its scheduler stops with ErrSessionLost within the failover bound.
func (n *node) kill(t *testing.T, admin *clientv3.Client) {
	t.Helper()
	n.killed.Store(true)
	if _, err := admin.Revoke(context.Background(), n.ka.LeaseID()); err != nil {
		t.Fatalf("revoke lease of %s: %v", n.name, err)
	}
	select {
	case err := <-n.done:
		n.stopped = true
		if !errors.Is(err, ErrSessionLost) {
			t.Fatalf("Run of %s after its lease was revoked returned %v, want ErrSessionLost", n.name, err)
		}
	case <-time.After(failover):
		t.Fatalf("scheduler of %s still runs %s after its lease was revoked", n.name, failover)
	}
}

// leaderSampler checks, until the test ends, that at most one alive node
// says it leads.
func leaderSampler(t *testing.T, nodes *[]*node, mu *sync.Mutex) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			mu.Lock()
			var leaders []string
			for _, n := range *nodes {
				if !n.killed.Load() && n.sched.Status().IsLeader {
					leaders = append(leaders, n.name)
				}
			}
			mu.Unlock()
			if len(leaders) > 1 {
				t.Errorf("%d leaders at once: %v", len(leaders), leaders)
				return
			}
			if !sleep(ctx, 5*time.Millisecond) {
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// waitLeader waits until one of nodes leads and every alive node observes
// it, and returns it.
func waitLeader(t *testing.T, d time.Duration, nodes ...*node) *node {
	t.Helper()
	var leader *node
	testutil.Eventually(t, d, "one leader observed by every alive node", func() error {
		leader = nil
		seen := map[string]string{}
		for _, n := range nodes {
			if n.killed.Load() {
				continue
			}
			st := n.sched.Status()
			seen[n.name] = st.Leader
			if st.IsLeader {
				leader = n
			}
		}
		if leader == nil {
			return fmt.Errorf("no leader; observed leaders %v", seen)
		}
		for w, l := range seen {
			if l != leader.name {
				return fmt.Errorf("%s leads, %s observes %q", leader.name, w, l)
			}
		}
		return nil
	})
	return leader
}

// bounds returns worker -> source of every bound key, and their revisions.
func bounds(t *testing.T, store *ha.Store) (map[string]string, map[string]int64) {
	t.Helper()
	m, _, err := store.GetBounds(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out, revs := map[string]string{}, map[string]int64{}
	for w, b := range m {
		out[w], revs[w] = b.Source, b.Revision
	}
	return out, revs
}

// waitBounds waits until the bound keys are exactly want.
func waitBounds(t *testing.T, d time.Duration, store *ha.Store, want map[string]string) {
	t.Helper()
	testutil.Eventually(t, d, fmt.Sprintf("bound keys %v", want), func() error {
		if got, _ := bounds(t, store); !maps.Equal(got, want) {
			return fmt.Errorf("bound keys are %v", got)
		}
		return nil
	})
}

func putSources(t *testing.T, store *ha.Store, sources ...string) {
	t.Helper()
	for _, src := range sources {
		if _, err := store.PutSourceConfig(context.Background(), &config.SourceConfig{SourceID: src}); err != nil {
			t.Fatal(err)
		}
	}
}

// errorf is fmt.Errorf, for checks.
func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// value returns the value of a gauge or counter.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if g := out.GetGauge(); g != nil {
		return g.GetValue()
	}
	return out.GetCounter().GetValue()
}
