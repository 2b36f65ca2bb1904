package ha

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/tests/etcdtest"
)

func startKeepalive(t *testing.T, s *Store, worker string, ttl time.Duration) *Keepalive {
	t.Helper()
	ka, err := s.StartKeepalive(t.Context(), worker, ttl, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := ka.Close(ctx); err != nil {
			t.Errorf("close keepalive: %v", err)
		}
	})
	return ka
}

func waitLost(t *testing.T, ka *Keepalive, within time.Duration) {
	t.Helper()
	select {
	case <-ka.Lost():
	case <-time.After(within):
		t.Fatalf("lease loss not reported within %s", within)
	}
}

func TestKeepaliveLifecycle(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	ka := startKeepalive(t, s, "w1", 2*time.Second)
	if ka.LeaseID() == clientv3.NoLease {
		t.Fatal("no lease")
	}
	kas, _, err := s.GetKeepalives(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, ok := kas["w1"]
	if !ok || info.Name != "w1" {
		t.Fatalf("keepalives = %+v, want w1", kas)
	}
	if _, err := time.Parse(time.RFC3339, info.JoinTime); err != nil {
		t.Fatalf("join-time %q: %v", info.JoinTime, err)
	}
	resp, err := s.Client().Get(ctx, s.Keys().Keepalive("w1"))
	if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != ka.LeaseID() {
		t.Fatalf("keepalive key = %+v, %v; want it on lease %x", resp.Kvs, err, ka.LeaseID())
	}

	// Alive past its TTL: the renewals work.
	time.Sleep(3 * time.Second) // longer than the TTL, to prove renewal; not synchronisation
	select {
	case <-ka.Lost():
		t.Fatal("lease reported lost while etcd is up")
	default:
	}
	if kas, _, _ := s.GetKeepalives(ctx); len(kas) != 1 {
		t.Fatalf("keepalive key gone after its TTL while kept alive")
	}

	if err := ka.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ka.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if kas, _, _ := s.GetKeepalives(ctx); len(kas) != 0 {
		t.Fatalf("keepalive key present after Close: %+v", kas)
	}
	select {
	case <-ka.Lost():
		t.Fatal("Close reported a lease loss")
	default:
	}
}

func TestKeepaliveRevokedIsLost(t *testing.T) {
	c := etcdtest.Start(t)
	s := NewStore(c.Client(t), "")
	other := c.Client(t)
	const ttl = 2 * time.Second
	ka := startKeepalive(t, s, "w1", ttl)
	if _, err := other.Revoke(t.Context(), ka.LeaseID()); err != nil {
		t.Fatal(err)
	}
	waitLost(t, ka, ttl)
}

func TestKeepalivePartitionIsLost(t *testing.T) {
	c := etcdtest.Start(t)
	s := NewStore(c.Client(t), "")
	const ttl = 2 * time.Second
	ka := startKeepalive(t, s, "w1", ttl)
	c.Partition()
	t.Cleanup(func() { c.Heal(t) }) // before Close in the cleanup order
	// The client gives up at its last renewal + TTL and checks once a second.
	waitLost(t, ka, ttl+1500*time.Millisecond)
}
