package ha

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// rawString is a Decoder that keeps values as strings.
func rawString(_ string, value []byte) (string, error) { return string(value), nil }

func mustPut(t *testing.T, cli *clientv3.Client, key, value string) int64 {
	t.Helper()
	resp, err := cli.Put(t.Context(), key, value)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return resp.Header.Revision
}

func mustDelete(t *testing.T, cli *clientv3.Client, key string) {
	t.Helper()
	if _, err := cli.Delete(t.Context(), key); err != nil {
		t.Fatalf("delete %s: %v", key, err)
	}
}

// TestWatchRelistsAfterCompaction: changes made while the watcher is cut off
// are compacted away; the watcher must relist and a level-triggered handler
// must drop the key deleted during the gap.
func TestWatchRelistsAfterCompaction(t *testing.T) {
	c := etcdtest.Start(t)
	watchCli, direct := c.Client(t), c.DirectClient(t)
	mustPut(t, direct, "/w/k1", "v1")
	mustPut(t, direct, "/w/k2", "v2")
	r0 := mustPut(t, direct, "/w/k3", "v3")

	rec := newRecorder[string]()
	var rs reasons
	startWatch(t, watchCli, "/w/", rawString, rec, WatchOptions{OnRestart: rs.add})
	rec.waitFor(t, 5*time.Second, "first resync", func(r *recorder[string]) bool { return len(r.resyncs) == 1 })
	rec.mu.Lock()
	first := rec.resyncs[0]
	rec.mu.Unlock()
	if first.rev != r0 || len(first.items) != 3 {
		t.Fatalf("first resync = rev %d, %d items; want rev %d, 3 items", first.rev, len(first.items), r0)
	}

	c.Partition()
	mustPut(t, direct, "/w/k4", "v4")
	mustDelete(t, direct, "/w/k2")
	mustPut(t, direct, "/w/k1", "v1b")
	compacted := c.Revision(t)
	c.Compact(t, compacted)
	c.Heal(t)

	rec.waitFor(t, 15*time.Second, "a resync after the compaction", func(r *recorder[string]) bool {
		return len(r.resyncs) >= 2 && r.resyncs[len(r.resyncs)-1].rev >= compacted
	})
	if !rs.has(RestartCompacted) {
		t.Errorf("restart reasons = %v, want %q among them", rs.snapshot(), RestartCompacted)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got, want := rec.keys(), []string{"/w/k1", "/w/k3", "/w/k4"}; !slices.Equal(got, want) {
		t.Fatalf("local state after relist = %v, want %v", got, want)
	}
	if v := rec.state["/w/k1"].Value; v != "v1b" {
		t.Fatalf("k1 = %q, want v1b", v)
	}
	if _, ok := rec.lastEvent("/w/k2"); ok {
		t.Fatalf("k2's deletion arrived as an event; it was compacted away and must come from the relist")
	}
}

// TestWatchSurvivesEtcdRestart: etcd down for a few seconds, then back; the
// watcher delivers later changes.
func TestWatchSurvivesEtcdRestart(t *testing.T) {
	c := etcdtest.Start(t)
	watchCli, writer := c.Client(t), c.Client(t)
	mustPut(t, writer, "/w/k1", "v1")

	rec := newRecorder[string]()
	var rs reasons
	startWatch(t, watchCli, "/w/", rawString, rec, WatchOptions{OnRestart: rs.add, ListTimeout: time.Second})
	rec.waitFor(t, 5*time.Second, "first resync", func(r *recorder[string]) bool { return len(r.resyncs) == 1 })

	c.Stop()
	time.Sleep(2 * time.Second) // the outage under test, not synchronisation
	c.Restart(t)

	rev := mustPut(t, writer, "/w/k2", "v2")
	rec.waitFor(t, 15*time.Second, "k2 after the restart", func(r *recorder[string]) bool {
		it, ok := r.state["/w/k2"]
		return ok && it.Revision == rev
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got, want := rec.keys(), []string{"/w/k1", "/w/k2"}; !slices.Equal(got, want) {
		t.Fatalf("local state = %v, want %v", got, want)
	}
}

// TestWatchStartsWhileEtcdDown: the list times out and is retried until etcd
// comes up.
func TestWatchStartsWhileEtcdDown(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	mustPut(t, cli, "/w/k1", "v1")
	c.Stop()

	rec := newRecorder[string]()
	var rs reasons
	startWatch(t, cli, "/w/", rawString, rec, WatchOptions{OnRestart: rs.add, ListTimeout: 200 * time.Millisecond})
	testutil.Eventually(t, 5*time.Second, "a "+RestartDisconnected+" restart while etcd is down", func() error {
		if !rs.has(RestartDisconnected) {
			return fmt.Errorf("restart reasons %v", rs.snapshot())
		}
		return nil
	})
	c.Restart(t)
	rec.waitFor(t, 15*time.Second, "resync after etcd is back", func(r *recorder[string]) bool {
		return len(r.resyncs) == 1 && len(r.state) == 1
	})
}

// TestWatchMalformedValueIsPerKey: a malformed value becomes Item.Err for
// that key while other keys keep flowing, in the list and in events.
func TestWatchMalformedValueIsPerKey(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	k := s.Keys()
	if _, err := s.PutSubTaskStage(ctx, Stage{Expect: stage.Running, Source: "s1", Task: "a"}); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s.Client(), k.SubTaskStage("s1", "m1"), `{"expect":`)

	rec := newRecorder[Stage]()
	var rs reasons
	startWatch(t, s.Client(), k.SubTaskStagePrefix("s1"), s.DecodeSubTaskStage, rec, WatchOptions{OnRestart: rs.add})
	rec.waitFor(t, 5*time.Second, "first resync", func(r *recorder[Stage]) bool { return len(r.resyncs) == 1 })
	rec.mu.Lock()
	for _, it := range rec.resyncs[0].items {
		switch it.Key {
		case k.SubTaskStage("s1", "a"):
			if it.Err != nil || it.Value.Task != "a" || it.Value.Revision != it.Revision || it.Revision == 0 {
				t.Errorf("listed a = %+v", it)
			}
		case k.SubTaskStage("s1", "m1"):
			if !errors.Is(it.Err, ErrMalformed) || it.Value != (Stage{}) {
				t.Errorf("listed m1 = %+v, want a malformed error and a zero value", it)
			}
		default:
			t.Errorf("unexpected listed key %s", it.Key)
		}
	}
	rec.mu.Unlock()

	mustPut(t, s.Client(), k.SubTaskStage("s1", "m2"), `{"expect":"Running","source":"s1","task":"other"}`)
	revB, err := s.PutSubTaskStage(ctx, Stage{Expect: stage.Paused, Source: "s1", Task: "b"})
	if err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, 5*time.Second, "b's event", func(r *recorder[Stage]) bool {
		_, ok := r.lastEvent(k.SubTaskStage("s1", "b"))
		return ok
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	m2, _ := rec.lastEvent(k.SubTaskStage("s1", "m2"))
	if !errors.Is(m2.Err, ErrMalformed) {
		t.Errorf("m2 event = %+v, want a malformed error", m2)
	}
	b, _ := rec.lastEvent(k.SubTaskStage("s1", "b"))
	if b.Err != nil || b.Value.Expect != stage.Paused || b.Value.Revision != revB {
		t.Errorf("b event = %+v", b)
	}
	if len(rs.snapshot()) != 0 {
		t.Errorf("malformed values restarted the watch: %v", rs.snapshot())
	}
}

// TestWatchHandlerErrorRelistsAndNoLeak: a handler error relists; after
// cancel, Watch returns ctx.Err() and leaves no goroutine behind.
func TestWatchHandlerErrorRelistsAndNoLeak(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	mustPut(t, cli, "/w/k0", "v0") // the client's connection exists before the snapshot
	ignore := goleak.IgnoreCurrent()

	rec := newRecorder[string]()
	failed := false
	rec.changedErr = func(it Item[string]) error {
		if it.Key == "/w/k1" && !failed {
			failed = true
			return errors.New("injected handler failure")
		}
		return nil
	}
	var rs reasons
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, cli, "/w/", rawString, rec, WatchOptions{
			Logger: zaptest.NewLogger(t), BackoffMin: 10 * time.Millisecond, OnRestart: rs.add})
	}()
	rec.waitFor(t, 5*time.Second, "first resync", func(r *recorder[string]) bool { return len(r.resyncs) == 1 })
	mustPut(t, cli, "/w/k1", "v1")
	rec.waitFor(t, 5*time.Second, "a relist that includes k1", func(r *recorder[string]) bool {
		if len(r.resyncs) < 2 {
			return false
		}
		_, ok := r.state["/w/k1"]
		return ok
	})
	if !rs.has(RestartHandlerError) {
		t.Errorf("restart reasons = %v, want %q", rs.snapshot(), RestartHandlerError)
	}
	// Cancel only once the new watch is established: the etcd client keeps
	// a grpc stream open (and reuses it for the next watch on the client)
	// when a watch is cancelled while the client is still creating it.
	mustPut(t, cli, "/w/k2", "v2")
	rec.waitFor(t, 5*time.Second, "k2's event", func(r *recorder[string]) bool {
		_, ok := r.lastEvent("/w/k2")
		return ok
	})

	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Watch returned %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return after cancel")
	}
	verifyNoLeak(t, 5*time.Second, ignore)
}

// TestWatchSingleKey: with SingleKey the prefix is one exact key, so the
// bound of worker "w10" is neither listed nor delivered to a watch of the
// bound of "w1", whose key is a prefix of it.
func TestWatchSingleKey(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	if _, err := s.PutBound(ctx, Bound{Source: "s0", Worker: "w10"}); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder[Bound]()
	startWatch(t, s.Client(), s.Keys().Bound("w1"), s.DecodeBound, rec, WatchOptions{SingleKey: true})
	rec.waitFor(t, 5*time.Second, "first resync", func(r *recorder[Bound]) bool { return len(r.resyncs) == 1 })
	if _, err := s.PutBound(ctx, Bound{Source: "s2", Worker: "w10"}); err != nil {
		t.Fatal(err)
	}
	rev, err := s.PutBound(ctx, Bound{Source: "s1", Worker: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, 5*time.Second, "w1's bound", func(r *recorder[Bound]) bool { return len(r.events) > 0 })
	rec.mu.Lock()
	if n := len(rec.resyncs[0].items); n != 0 {
		t.Fatalf("resync listed %d items, want none (w10 is another key)", n)
	}
	if len(rec.events) != 1 || rec.events[0].Value != (Bound{Source: "s1", Worker: "w1", Revision: rev}) {
		t.Fatalf("events = %+v, want only w1's bound", rec.events)
	}
	rec.mu.Unlock()

	// A snapshot while both keys exist lists w1's bound alone.
	rec2 := newRecorder[Bound]()
	startWatch(t, s.Client(), s.Keys().Bound("w1"), s.DecodeBound, rec2, WatchOptions{SingleKey: true})
	rec2.waitFor(t, 5*time.Second, "first resync", func(r *recorder[Bound]) bool { return len(r.resyncs) == 1 })
	rec2.mu.Lock()
	defer rec2.mu.Unlock()
	if items := rec2.resyncs[0].items; len(items) != 1 || items[0].Key != s.Keys().Bound("w1") || items[0].Value.Source != "s1" {
		t.Fatalf("resync listed %+v, want only w1's bound", items)
	}
}

// verifyNoLeak waits up to d for the goroutines not ignored to end: the
// client's watch stream shuts down asynchronously after its last watcher is
// cancelled.
func verifyNoLeak(t *testing.T, d time.Duration, opts ...goleak.Option) {
	t.Helper()
	testutil.Eventually(t, d, "no leaked goroutines", func() error { return goleak.Find(opts...) })
}
