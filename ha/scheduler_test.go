package ha

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/config"
)

func TestKeysSchedulerLeader(t *testing.T) {
	if got, want := (Keys{Prefix: "/dm"}).SchedulerLeader(), "/dm/scheduler/leader"; got != want {
		t.Errorf("SchedulerLeader() = %q, want %q", got, want)
	}
}

// moveFixture is a cluster with workers w1 (dead, bound to s1, relay of
// s1), w2 (alive, bound to s2), w3 (alive, free) and w4 (dead, bound to s1).
type moveFixture struct {
	s        *Store
	boundRev map[string]int64 // bound key mod revision by worker
	relayRev int64            // w1's relay-bound key
}

func newMoveFixture(t *testing.T) moveFixture {
	t.Helper()
	s, _ := newStore(t)
	ctx := context.Background()
	f := moveFixture{s: s, boundRev: map[string]int64{}}
	for _, w := range []string{"w2", "w3"} {
		if _, err := s.cli.Put(ctx, s.keys.Keepalive(w), `{"name":"`+w+`"}`); err != nil {
			t.Fatal(err)
		}
	}
	for w, src := range map[string]string{"w1": "s1", "w2": "s2", "w4": "s1"} {
		rev, err := s.PutBound(ctx, Bound{Source: src, Worker: w})
		if err != nil {
			t.Fatal(err)
		}
		f.boundRev[w] = rev
	}
	rev, err := s.PutRelayBound(ctx, Bound{Source: "s1", Worker: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	f.relayRev = rev
	return f
}

// raw returns the value at key, "" when absent.
func (f moveFixture) raw(t *testing.T, key string) string {
	t.Helper()
	resp, err := f.s.cli.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

func TestMoveBoundApplies(t *testing.T) {
	f := newMoveFixture(t)
	ok, err := f.s.MoveBound(context.Background(), Move{Source: "s1", To: "w3",
		From:      map[string]int64{"w1": f.boundRev["w1"], "w4": f.boundRev["w4"]},
		RelayFrom: map[string]int64{"w1": f.relayRev}})
	if err != nil || !ok {
		t.Fatalf("MoveBound = %v, %v; want true, nil", ok, err)
	}
	k := f.s.keys
	want := map[string]string{
		k.Bound("w1"):      "",
		k.Bound("w4"):      "",
		k.RelayBound("w1"): "",
		k.Bound("w2"):      `{"source":"s2","worker":"w2"}`,
		k.Bound("w3"):      `{"source":"s1","worker":"w3"}`,
		k.RelayBound("w3"): `{"source":"s1","worker":"w3"}`,
	}
	for key, v := range want {
		if got := f.raw(t, key); got != v {
			t.Errorf("%s = %q, want %q", key, got, v)
		}
	}
	// What PutBound writes reads back the same way.
	b, found, _, err := f.s.GetBound(context.Background(), "w3")
	if err != nil || !found || b.Source != "s1" || b.Worker != "w3" {
		t.Errorf("GetBound(w3) = %+v, %v, %v", b, found, err)
	}
}

func TestMoveBoundRefused(t *testing.T) {
	f := newMoveFixture(t)
	from := map[string]int64{"w1": f.boundRev["w1"]}
	cli := f.s.cli
	tests := []struct {
		name string
		mv   Move
		cmp  []clientv3.Cmp
	}{
		{"stale from revision", Move{Source: "s1", To: "w3", From: map[string]int64{"w1": f.boundRev["w1"] - 1}}, nil},
		{"stale relay revision", Move{Source: "s1", To: "w3", From: from, RelayFrom: map[string]int64{"w1": f.relayRev + 1}}, nil},
		{"target not alive", Move{Source: "s1", To: "w5", From: from}, nil},
		{"target already bound", Move{Source: "s1", To: "w2", From: from}, nil},
		{"extra comparison fails", Move{Source: "s1", To: "w3", From: from},
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision("/elsewhere"), ">", 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, err := f.s.MoveBound(context.Background(), tt.mv, tt.cmp...)
			if err != nil || ok {
				t.Fatalf("MoveBound = %v, %v; want false, nil", ok, err)
			}
		})
	}
	// Nothing changed.
	resp, err := cli.Get(context.Background(), f.s.keys.BoundPrefix(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 3 {
		t.Errorf("%d bound keys after refused moves, want the 3 of the fixture", len(resp.Kvs))
	}
	for _, kv := range resp.Kvs {
		w := lastSegment(string(kv.Key), f.s.keys.BoundPrefix())
		if kv.ModRevision != f.boundRev[w] {
			t.Errorf("bound key of %s rewritten at %d (was %d)", w, kv.ModRevision, f.boundRev[w])
		}
	}
}

func TestMoveBoundUnboundSourceAndRelayOnTarget(t *testing.T) {
	f := newMoveFixture(t)
	ctx := context.Background()
	rev, err := f.s.PutRelayBound(ctx, Bound{Source: "s9", Worker: "w3"})
	if err != nil {
		t.Fatal(err)
	}
	// A source without any binding, whose relay key is already on the target.
	ok, err := f.s.MoveBound(ctx, Move{Source: "s9", To: "w3", RelayFrom: map[string]int64{"w3": rev}})
	if err != nil || !ok {
		t.Fatalf("MoveBound = %v, %v; want true, nil", ok, err)
	}
	for _, key := range []string{f.s.keys.Bound("w3"), f.s.keys.RelayBound("w3")} {
		if got, want := f.raw(t, key), `{"source":"s9","worker":"w3"}`; got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
}

func TestMoveBoundInvalid(t *testing.T) {
	f := newMoveFixture(t)
	tests := []struct {
		name string
		mv   Move
	}{
		{"no source", Move{To: "w3"}},
		{"bad target", Move{Source: "s1", To: "w/3"}},
		{"bad from", Move{Source: "s1", To: "w3", From: map[string]int64{"": 1}}},
		{"bad relay from", Move{Source: "s1", To: "w3", RelayFrom: map[string]int64{"a b": 1}}},
		{"target is a from", Move{Source: "s1", To: "w1", From: map[string]int64{"w1": 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, err := f.s.MoveBound(context.Background(), tt.mv)
			if err == nil || ok {
				t.Fatalf("MoveBound = %v, %v; want an error", ok, err)
			}
			if tt.name != "target is a from" && !errors.Is(err, config.ErrInvalidName) {
				t.Errorf("error %v is not config.ErrInvalidName", err)
			}
		})
	}
}
