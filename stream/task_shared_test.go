package stream

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/binlog/fanout"
	"github.com/dmworker/dm-worker/pkg/binlog/upstream"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// slowSink is a memSink whose first writes take delay each.
type slowSink struct {
	*memSink
	mu    sync.Mutex
	slow  int // writes still slow
	delay time.Duration
}

func (s *slowSink) Write(ctx context.Context, batch []Event) error {
	s.mu.Lock()
	slow := s.slow > 0
	if slow {
		s.slow--
	}
	s.mu.Unlock()
	if slow {
		time.Sleep(s.delay)
	}
	return s.memSink.Write(ctx, batch)
}

// TestTaskSharedReader runs four streams of one source through one shared
// reader (fanout.Hub) beside a stream with a reader of its own: a slow
// sink's stream is detached and reads privately for a while, one stream is
// stopped mid-way and resumed from its own checkpoint (a late joiner). Each
// stream's events are exactly the independent stream's, in order, once,
// and each checkpoint is its own.
func TestTaskSharedReader(t *testing.T) {
	e := newTaskEnv(t)
	encExec(t, e.root, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, v INT)")
	hub := fanout.New(fanout.Config{Events: 64, Stall: 100 * time.Millisecond, Silence: upstream.SilenceLimit,
		Logger: zaptest.NewLogger(t)})
	defer hub.Close()
	shared := func(name string) func(bool, func() (binlog.StreamOpener, error), func() (binlog.StreamOpener, error)) binlog.StreamOpener {
		return func(_ bool, own, hubOpener func() (binlog.StreamOpener, error)) binlog.StreamOpener {
			return hub.Opener(name, own, hubOpener)
		}
	}
	start, err := CurrentLocation(context.Background(), e.db)
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(name string, sink Sink, sv *saves, from Checkpoint, share bool) TaskConfig {
		c := TaskConfig{Stream: taskStream(name, false), Source: e.source(), DB: e.db, Sink: sink, Save: sv.save, Start: from,
			BatchEvents: 50}
		if share {
			c.Shared = shared(name)
		}
		return c
	}
	at := Checkpoint{Location: start}
	refSink := newMemSink()
	var refSaves saves
	ref := startTask(t, cfg("ref", refSink, &refSaves, at, false))
	names := []string{"a", "b", "slow", "late"}
	sinks := map[string]*memSink{}
	saved := map[string]*saves{}
	tasks := map[string]*runningTask{}
	for _, n := range names {
		sinks[n], saved[n] = newMemSink(), &saves{}
		var sink Sink = sinks[n]
		if n == "slow" {
			sink = &slowSink{memSink: sinks[n], slow: 40, delay: 40 * time.Millisecond}
		}
		tasks[n] = startTask(t, cfg(n, sink, saved[n], at, true))
	}
	for _, n := range names {
		testutil.WaitFor(t, taskTimeout, n+" streaming", func() bool { return tasks[n].task.Status().State == StateStreaming })
	}

	write := func(from, to int) {
		for i := from; i < to; i += 5 {
			encExec(t, e.root, fmt.Sprintf("INSERT INTO app.t VALUES (%d, 0), (%d, 0), (%d, 0), (%d, 0), (%d, 0)", i, i+1, i+2, i+3, i+4))
		}
		// One transaction of many rows events, bigger than the ring.
		tx, err := e.root.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for i := to; i < to+300; i++ {
			if _, err := tx.Exec(fmt.Sprintf("INSERT INTO app.t VALUES (%d, 1)", i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		encExec(t, e.root, fmt.Sprintf("UPDATE app.t SET v = v + 1 WHERE id >= %d", from),
			fmt.Sprintf("DELETE FROM app.t WHERE id >= %d AND id %% 7 = 0", from))
	}
	write(0, 500)
	// Stop "late" in the middle; the others go on.
	testutil.WaitFor(t, taskTimeout, "late got some events", func() bool { return len(sinks["late"].all()) > 100 })
	if err := tasks["late"].stop(t); err != nil {
		t.Fatal(err)
	}
	lateFirst := sinks["late"].all()
	write(1000, 1500)
	lateSink := newMemSink()
	late := startTask(t, cfg("late", lateSink, saved["late"], saved["late"].last(), true))
	write(2000, 2500)

	for _, r := range append([]*runningTask{ref, late}, tasks["a"], tasks["b"], tasks["slow"]) {
		r.waitCaughtUp(t, e)
	}
	want := eventIDs(refSink.all())
	if len(want) < 3000 {
		t.Fatalf("the independent stream got %d events", len(want))
	}
	check := func(name string, got []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Errorf("%s: %d events, want %d; first difference at %d: %v vs %v", name, len(got), len(want), i,
				got[i:min(i+3, len(got))], want[i:min(i+3, len(want))])
		}
	}
	for _, n := range []string{"a", "b", "slow"} {
		check(n, eventIDs(sinks[n].all()))
	}
	check("late", append(eventIDs(lateFirst), eventIDs(lateSink.all())...))
	for _, n := range []string{"a", "b", "slow", "late"} {
		r := tasks[n]
		if n == "late" {
			r = late
		}
		if cp, st := saved[n].last(), r.task.Status(); cp.Location.Compare(start) <= 0 || st.Checkpoint.IsZero() {
			t.Errorf("%s: checkpoint saved %s, status %s", n, cp.Location, st.Checkpoint)
		}
	}
	st := hub.Stats()
	t.Logf("hub: %+v", st)
	if st.Detaches == 0 {
		t.Error("the slow stream was never detached")
	}
	testutil.WaitFor(t, taskTimeout, "every stream shares the reader again", func() bool {
		encExec(t, e.root, "INSERT INTO app.t VALUES (100000, 0) ON DUPLICATE KEY UPDATE v = v + 1")
		time.Sleep(50 * time.Millisecond)
		return hub.Stats().Shared == 4
	})
	for _, r := range append([]*runningTask{late}, tasks["a"], tasks["b"], tasks["slow"]) {
		if err := r.stop(t); err != nil {
			t.Error(err)
		}
	}
	if st := hub.Stats(); st.Running || st.Shared != 0 || st.Private != 0 {
		t.Errorf("the hub after every stream stopped: %+v", st)
	}
}

// eventIDs is the identities of events, in order.
func eventIDs(events []Event) []string {
	ids := make([]string, len(events))
	for i, ev := range events {
		ids[i] = ev.ID + "/" + ev.Op
		if ev.Op == "ddl" {
			ids[i] += "/" + strings.TrimSpace(string(ev.Key))
		}
	}
	return ids
}
