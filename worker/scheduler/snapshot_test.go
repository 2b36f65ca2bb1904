package scheduler

import (
	"context"
	"maps"
	"testing"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/tests/etcdtest"
)

// TestReadView: one read gives alive workers, decoded bindings with their
// revisions, source names, and degrades malformed keys instead of failing.
func TestReadView(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	store := ha.NewStore(cli, "")
	k := store.Keys()
	ctx := context.Background()
	put := func(key, value string) int64 {
		resp, err := cli.Put(ctx, key, value)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	put(k.Keepalive("w1"), `{}`)
	put(k.Keepalive("bad name"), `{}`)
	put(k.SourceConfig("s1"), `{"source-id":"s1"}`)
	put(k.SourceConfig("s2"), `not json: only the name counts`)
	r1 := put(k.Bound("w1"), `{"source":"s1","worker":"w1"}`)
	r2 := put(k.Bound("w2"), `{"source":`)
	r3 := put(k.RelayBound("w1"), `{"source":"s1"}`)
	leaderRev := put(k.SchedulerLeader()+"/1", "w1")

	v, err := readView(ctx, store, k.SchedulerLeader()+"/1", leaderRev)
	if err != nil {
		t.Fatal(err)
	}
	if !v.leading {
		t.Error("not leading with the election key at its revision")
	}
	if want := map[string]bool{"w1": true}; !maps.Equal(v.snap.Alive, want) {
		t.Errorf("alive %v, want %v", v.snap.Alive, want)
	}
	if want := map[string]bool{"s1": true, "s2": true}; !maps.Equal(v.snap.Sources, want) {
		t.Errorf("sources %v, want %v", v.snap.Sources, want)
	}
	wantBound := map[string]ha.Bound{
		"w1": {Source: "s1", Worker: "w1", Revision: r1},
		"w2": {Worker: "w2", Revision: r2}, // malformed: busy, names no source
	}
	if !maps.Equal(v.snap.Bound, wantBound) {
		t.Errorf("bound %+v, want %+v", v.snap.Bound, wantBound)
	}
	if want := map[string]ha.Bound{"w1": {Source: "s1", Worker: "w1", Revision: r3}}; !maps.Equal(v.snap.Relay, want) {
		t.Errorf("relay %+v, want %+v", v.snap.Relay, want)
	}
	for _, key := range []string{k.Keepalive("bad name"), k.Bound("w2")} {
		if v.bad[key] == nil {
			t.Errorf("malformed key %s not reported; bad = %v", key, v.bad)
		}
	}
	if v, err := readView(ctx, store, k.SchedulerLeader()+"/1", leaderRev-1); err != nil || v.leading {
		t.Errorf("leading with an election key of another revision: %v, %v", v.leading, err)
	}
}
