package stream

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/binlog/fanout"
	"github.com/dmworker/dm-worker/pkg/binlog/upstream"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// encodeTimes matches the encoding time of a value (debezium's top-level
// ts_ms, canal-json's ts), the one part of an event that depends on when it
// was encoded.
var encodeTimes = regexp.MustCompile(`("op":"[a-z]+","ts_ms":|"es":[0-9]+,"ts":)[0-9]+`)

// sinkBytes is the key and value of every event a sink got, their
// encoding times masked.
func sinkBytes(events []Event) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = ev.ID + " " + string(ev.Key) + " " + encodeTimes.ReplaceAllString(string(ev.Value), "${1}0")
	}
	return out
}

// sameBuffer reports whether a and b are the same bytes in memory (one
// encoding handed to two streams), not just equal.
func sameBuffer(a, b Event) bool {
	return len(a.Value) > 0 && len(b.Value) > 0 && &a.Value[0] == &b.Value[0]
}

// TestTaskSharedEncoding runs streams of one source through one shared
// reader: two with the same settings, and three that differ from them in
// what decides the bytes of an event (the format; the source id; the
// table's schema, read before a rename of a column), each beside a stream
// of the same settings that reads and encodes on its own. The two alike
// get the very same encoded events (one buffer); the others get their own
// encoding; every stream's events are byte for byte its independent
// twin's (encoding times aside), in order, once.
func TestTaskSharedEncoding(t *testing.T) {
	e := newTaskEnv(t)
	encExec(t, e.root, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, v INT, s VARCHAR(40))")
	hub := fanout.New(fanout.Config{Stall: time.Minute, Silence: upstream.SilenceLimit, Logger: zaptest.NewLogger(t)})
	defer hub.Close()
	start, err := CurrentLocation(context.Background(), e.db)
	if err != nil {
		t.Fatal(err)
	}
	// stale is app.t as a stream read it before its column v was renamed
	// from w: that stream's events name w.
	stale, err := sqlschema.ReadTable(context.Background(), e.db, "app", "t")
	if err != nil {
		t.Fatal(err)
	}
	stale.Columns = append([]sqlschema.Column(nil), stale.Columns...)
	stale.Columns[1].Name = "w"

	type setting struct {
		format, source string
		stale          bool
	}
	run := func(name string, st setting, share bool) (*runningTask, *memSink) {
		src := e.source()
		src.SourceID = st.source
		cfg := TaskConfig{Stream: taskStream(name, false), Source: src, DB: e.db, Save: (&saves{}).save,
			Start: Checkpoint{Location: start}, Logger: zaptest.NewLogger(t), BatchEvents: 100}
		cfg.Stream.EventFormat, cfg.Stream.SourceID = st.format, st.source
		sink := newMemSink()
		cfg.Sink = sink
		if share {
			cfg.Shared = func(_ bool, own, hubOpener func() (binlog.StreamOpener, error)) binlog.StreamOpener {
				return hub.Opener(name, own, hubOpener)
			}
		}
		task, err := NewTask(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if st.stale {
			task.schemas.tables[schemaTableName{"app", "t"}] = stale
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &runningTask{task: task, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- task.Run(ctx) }()
		t.Cleanup(func() { r.stop(t) })
		return r, sink
	}
	deb := setting{format: FormatDebezium, source: "mysql-01"}
	settings := map[string]setting{
		"a": deb, "b": deb,
		"canal":  {format: FormatCanalJSON, source: "mysql-01"},
		"source": {format: FormatDebezium, source: "mysql-02"},
		"stale":  {format: FormatDebezium, source: "mysql-01", stale: true},
	}
	tasks, sinks, refs := map[string]*runningTask{}, map[string]*memSink{}, map[string]*memSink{}
	for name, st := range settings {
		tasks[name], sinks[name] = run(name, st, true)
		tasks["ref-"+name], refs[name] = run("ref-"+name, st, false)
	}
	for name, r := range tasks {
		testutil.WaitFor(t, taskTimeout, name+" streaming", func() bool { return r.task.Status().State == StateStreaming })
	}
	testutil.WaitFor(t, taskTimeout, "the shared streams attached", func() bool { return hub.Stats().Shared == 5 })

	for i := 0; i < 600; i += 50 {
		q := "INSERT INTO app.t VALUES "
		for j := i; j < i+50; j++ {
			if j > i {
				q += ","
			}
			q += fmt.Sprintf("(%d, %d, 'row \"%d\" é')", j, j%7, j)
		}
		encExec(t, e.root, q)
	}
	encExec(t, e.root, "UPDATE app.t SET v = v + 1 WHERE id % 3 = 0", // same keys
		"UPDATE app.t SET id = id + 10000 WHERE id % 10 = 1", // key changes: a delete and a create each
		"DELETE FROM app.t WHERE id % 5 = 2")
	for _, r := range tasks {
		r.waitCaughtUp(t, e)
	}

	for name := range settings {
		got, want := sinkBytes(sinks[name].all()), sinkBytes(refs[name].all())
		if len(want) < 600+200+60+120 {
			t.Fatalf("%s: the independent stream got %d events", name, len(want))
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d events, its independent twin %d", name, len(got), len(want))
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: event %d differs from its independent twin's:\n got %s\nwant %s", name, i, got[i], want[i])
				break
			}
		}
	}
	a, b := sinks["a"].all(), sinks["b"].all()
	shared := 0
	for i := range a {
		if sameBuffer(a[i], b[i]) {
			shared++
		}
	}
	t.Logf("streams a and b share %d of %d events; hub %+v", shared, len(a), hub.Stats())
	// Both read every rows event through the hub (no detach with a
	// minute's stall), so each was encoded once for both.
	if shared != len(a) {
		t.Errorf("streams a and b share the encoding of %d of %d events, want all", shared, len(a))
	}
	for _, other := range []string{"canal", "source", "stale"} {
		o := sinks[other].all()
		for i := range min(len(a), len(o)) {
			if sameBuffer(a[i], o[i]) {
				t.Fatalf("stream %s got stream a's encoding of event %d (%s)", other, i, a[i].ID)
			}
		}
	}
	if v := string(sinks["stale"].all()[0].Value); !regexp.MustCompile(`"after":\{"id":0,"w":0,`).MatchString(v) {
		t.Errorf("the stale stream's first event does not name column w: %s", v)
	}
}
