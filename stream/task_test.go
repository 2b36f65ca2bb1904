package stream

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/relay"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// TestTaskStreamEventsEqualChanges streams inserts, updates and deletes of
// every column type, a transaction bigger than a batch, changes of a table
// the block-allow list leaves out and a DDL into a file sink, then applies
// the events in order to empty copies and compares checksums.
func TestTaskStreamEventsEqualChanges(t *testing.T) {
	e := newTaskEnv(t)
	dir := t.TempDir()
	sink, err := NewSink("cdc", config.SinkConfig{Type: config.SinkFile, File: &config.FileSinkConfig{Dir: dir}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	run := runEventsEqualChanges(t, e, sink)
	checkEventsEqualChanges(t, e, run, fileRecords(t, dir))
}

// TestTaskStreamSinkFailureAndResume checks that the checkpoint moves only
// after the sink acknowledged, that a failing sink ends Run with a
// resumable error and the checkpoint of what was acknowledged, and that a
// task resuming from that checkpoint delivers the rest.
func TestTaskStreamSinkFailureAndResume(t *testing.T) {
	e := newTaskEnv(t)
	encExec(t, e.root, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, v INT)")
	sink := newMemSink()
	var sv saves
	r := startTask(t, TaskConfig{Stream: taskStream("s1", false), Source: e.source(), DB: e.db, Sink: sink, Save: sv.save})
	testutil.WaitFor(t, taskTimeout, "start checkpoint saved", func() bool { return !sv.last().Location.IsZero() })
	for i := 1; i <= 50; i++ {
		encExec(t, e.root, fmt.Sprintf("INSERT INTO app.t VALUES (%d, %d)", i, i))
	}
	r.waitCaughtUp(t, e)
	acked := len(sink.all())
	if acked != 50 {
		t.Fatalf("%d events acknowledged, want 50", acked)
	}
	testutil.Eventually(t, taskTimeout, "checkpoint saved after the acknowledged batches", func() error {
		if cp, st := sv.last(), r.task.Status(); cp.Location != st.Checkpoint {
			return fmt.Errorf("saved %s, acknowledged %s", cp.Location, st.Checkpoint)
		}
		return nil
	})
	before := sv.last()

	sink.failAfterWrites(0)
	encExec(t, e.root, "UPDATE app.t SET v = v + 100 WHERE id <= 10", "DELETE FROM app.t WHERE id > 45", "INSERT INTO app.t VALUES (100, 100)")
	err := r.wait(t)
	if err == nil || !errs.IsResumable(err) || errs.Code(err) != CodeSink {
		t.Fatalf("Run with a failing sink returned %v (code %q, resumable %v); want a resumable %s error",
			err, errs.Code(err), errs.IsResumable(err), CodeSink)
	}
	if cp := sv.last(); cp.Location != before.Location {
		t.Fatalf("checkpoint moved to %s without an acknowledgement (was %s)", cp.Location, before.Location)
	}
	if !sink.closed {
		t.Error("Run did not close the sink")
	}

	// A new task from the saved checkpoint delivers the rest.
	sink2 := newMemSink()
	r2 := startTask(t, TaskConfig{Stream: taskStream("s1", false), Source: e.source(), DB: e.db, Sink: sink2, Save: sv.save, Start: sv.last()})
	r2.waitCaughtUp(t, e)
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	e.applyRecords(t, []string{"t"}, memRecords(sink.all()), memRecords(sink2.all()))
	e.sameTables(t, "t")
	if got := len(sink2.all()); got != 10+5+1 {
		t.Errorf("resumed task delivered %d events, want the 16 not acknowledged before", got)
	}
}

// TestTaskFillHistory runs fill-history over tables with rows while
// writes go on, stops it mid-snapshot with a failing sink, resumes from the
// saved progress, and checks that the events, applied in order, give the
// source's tables, and that streaming started at the first run's location.
func TestTaskFillHistory(t *testing.T) {
	e := newTaskEnv(t)
	encExec(t, e.root, "CREATE DATABASE app",
		"CREATE TABLE app.a (id INT PRIMARY KEY, v VARCHAR(20))",
		"CREATE TABLE app.b (k1 INT NOT NULL, k2 VARCHAR(10) NOT NULL, v INT, PRIMARY KEY (k1, k2))",
		"CREATE TABLE app.empty (id INT PRIMARY KEY)")
	var av, bv []string
	for i := 1; i <= 3000; i++ {
		av = append(av, fmt.Sprintf("(%d, 'a%d')", i, i))
		bv = append(bv, fmt.Sprintf("(%d, 'k%d', %d)", i%100, i, i))
	}
	encExec(t, e.root, "INSERT INTO app.a VALUES "+strings.Join(av, ","), "INSERT INTO app.b VALUES "+strings.Join(bv, ","))

	// Writes during the whole test.
	ctx, stopWrites := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			id := 1 + (i*37)%3500
			for _, q := range []string{
				fmt.Sprintf("INSERT INTO app.a VALUES (%d, 'w%d') ON DUPLICATE KEY UPDATE v = 'u%d'", id, i, i),
				fmt.Sprintf("DELETE FROM app.b WHERE k1 = %d AND k2 = 'k%d'", id%100, id),
				fmt.Sprintf("UPDATE app.b SET v = v + 1 WHERE k1 = %d", i%100),
			} {
				if _, err := e.root.ExecContext(ctx, q); err != nil && ctx.Err() == nil {
					t.Errorf("write: %s: %v", q, err)
					return
				}
			}
		}
	}()
	defer func() { stopWrites(); wg.Wait() }()

	sink := newMemSink()
	sink.failAfterWrites(3) // 3 chunks of 500 rows, then the sink fails
	var sv saves
	stream := taskStream("fill", true)
	r := startTask(t, TaskConfig{Stream: stream, Source: e.source(), DB: e.db, Sink: sink, Save: sv.save, SnapshotChunk: 500})
	err := r.wait(t)
	if !errs.IsResumable(err) {
		t.Fatalf("fill-history with a failing sink: %v; want a resumable error", err)
	}
	cp := sv.last()
	first := sv.all[0].Location
	if cp.SnapshotDone || cp.Location != first || len(cp.Snapshot) == 0 {
		t.Fatalf("checkpoint after the failed fill-history %+v; want progress, not done, at the first location %s", cp, first)
	}
	if p := cp.Snapshot["app.a"]; p.Rows != 1500 || p.Done || len(p.Cursor) != 1 {
		t.Fatalf("progress of app.a %+v; want 1500 rows with a cursor", p)
	}

	sink2 := newMemSink()
	r2 := startTask(t, TaskConfig{Stream: stream, Source: e.source(), DB: e.db, Sink: sink2, Save: sv.save, Start: cp, SnapshotChunk: 500})
	testutil.Eventually(t, taskTimeout, "fill-history done", func() error {
		st := r2.task.Status()
		if st.State != StateStreaming {
			return fmt.Errorf("state %s, fill-history %+v, err %v", st.State, st.FillHistory, st.Err)
		}
		return nil
	})
	if fs := r2.task.Status().FillHistory; fs == nil || fs.Tables != 3 || fs.TablesDone != 3 {
		t.Errorf("fill-history status %+v; want 3 of 3 tables", fs)
	}
	done := sv.last()
	if !done.SnapshotDone || done.Location != first {
		t.Errorf("checkpoint after the resumed fill-history %+v; want done, streaming from the first location %s", done, first)
	}
	time.Sleep(300 * time.Millisecond) // let writes go on while streaming
	stopWrites()
	wg.Wait()
	r2.waitCaughtUp(t, e)
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}

	events := append(sink.all(), sink2.all()...)
	ids := map[string]bool{}
	reads := 0
	for _, ev := range events {
		if ev.Op == "r" {
			reads++
			if ids[ev.ID] {
				t.Errorf("snapshot event id %s twice", ev.ID)
			}
			ids[ev.ID] = true
		}
	}
	if reads < 3000+1 {
		t.Errorf("%d snapshot rows, want at least the 3000 of app.a and rows of app.b", reads)
	}
	e.applyRecords(t, []string{"a", "b", "empty"}, memRecords(events))
	e.sameTables(t, "a", "b", "empty")
}

// TestTaskFillHistoryHandOff checks that a fill-history completed in one
// run streams from exactly the snapshot's location: each row is read once
// and no change before the snapshot is delivered again.
func TestTaskFillHistoryHandOff(t *testing.T) {
	e := newTaskEnv(t)
	encExec(t, e.root, "CREATE DATABASE app", "CREATE TABLE app.a (id INT PRIMARY KEY, v INT)",
		"INSERT INTO app.a VALUES (1, 1), (2, 2), (3, 3)", "UPDATE app.a SET v = 20 WHERE id = 2")
	sink := newMemSink()
	var sv saves
	r := startTask(t, TaskConfig{Stream: taskStream("h", true), Source: e.source(), DB: e.db, Sink: sink, Save: sv.save})
	testutil.WaitFor(t, taskTimeout, "streaming", func() bool { return r.task.Status().State == StateStreaming })
	encExec(t, e.root, "INSERT INTO app.a VALUES (4, 4)")
	r.waitCaughtUp(t, e)
	var ops []string
	for _, ev := range sink.all() {
		ops = append(ops, ev.Op+string(ev.Key))
	}
	want := `r{"id":1} r{"id":2} r{"id":3} c{"id":4}`
	if got := strings.Join(ops, " "); got != want {
		t.Errorf("events %s, want %s", got, want)
	}
	if cp := sv.last(); !cp.SnapshotDone || cp.Snapshot != nil {
		t.Errorf("checkpoint %+v; want fill-history done", cp)
	}
}

// TestTaskCheckingRetriesProbe checks that a task stays checking, with the
// probe's error in status, while its sink is not ready.
func TestTaskCheckingRetriesProbe(t *testing.T) {
	e := newTaskEnv(t)
	sink := &probeSink{memSink: newMemSink(), ready: make(chan struct{})}
	var sv saves
	r := startTask(t, TaskConfig{Stream: taskStream("p", false), Source: e.source(), DB: e.db, Sink: sink, Save: sv.save})
	testutil.Eventually(t, taskTimeout, "probe error in status", func() error {
		st := r.task.Status()
		if st.State != StateChecking || st.Err == nil || !strings.Contains(st.Err.Error(), "not ready") {
			return fmt.Errorf("state %s, err %v", st.State, st.Err)
		}
		return nil
	})
	close(sink.ready)
	testutil.Eventually(t, taskTimeout, "streaming once the sink is ready", func() error {
		if st := r.task.Status(); st.State != StateStreaming || st.Err != nil {
			return fmt.Errorf("state %s, err %v", st.State, st.Err)
		}
		return nil
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// probeSink is a memSink whose probe fails until ready is closed.
type probeSink struct {
	*memSink
	ready chan struct{}
}

func (s *probeSink) Probe(context.Context) error {
	select {
	case <-s.ready:
		return nil
	default:
		return fmt.Errorf("probeSink: not ready")
	}
}

// TestTaskStreamGTIDResume resumes a stream of a source with enable-gtid
// from a checkpoint's GTID set alone: exactly the transactions after it
// are delivered, each event carrying its transaction's GTID.
func TestTaskStreamGTIDResume(t *testing.T) {
	e := newTaskEnv(t)
	encExec(t, e.root, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY)")
	src := e.source()
	src.EnableGTID = true
	sink := newMemSink()
	var sv saves
	r := startTask(t, TaskConfig{Stream: taskStream("g", false), Source: src, DB: e.db, Sink: sink, Save: sv.save})
	testutil.WaitFor(t, taskTimeout, "start checkpoint saved", func() bool { return !sv.last().Location.IsZero() })
	for i := 1; i <= 20; i++ {
		encExec(t, e.root, fmt.Sprintf("INSERT INTO app.t VALUES (%d)", i))
	}
	r.waitCaughtUp(t, e)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	cp := sv.last()
	if _, _, gtid := e.src.MasterStatus(t); cp.Location.GTID != gtid {
		t.Fatalf("checkpoint GTID %q, want the source's %q", cp.Location.GTID, gtid)
	}
	for i := 21; i <= 30; i++ {
		encExec(t, e.root, fmt.Sprintf("INSERT INTO app.t VALUES (%d)", i))
	}
	cp.Location.Name, cp.Location.Pos = "", 0
	sink2 := newMemSink()
	r2 := startTask(t, TaskConfig{Stream: taskStream("g", false), Source: src, DB: e.db, Sink: sink2, Save: sv.save, Start: cp})
	r2.waitCaughtUp(t, e)
	var keys []string
	for _, ev := range sink2.all() {
		keys = append(keys, string(ev.Key))
		if v := decodeValue(t, record{Value: ev.Value}); !strings.Contains(string(ev.Value), `"gtid":"0-`) || v.Op != "c" {
			t.Errorf("event %s: want an insert with its GTID", ev.Value)
		}
	}
	if len(keys) != 10 || keys[0] != `{"id":21}` || keys[9] != `{"id":30}` {
		t.Errorf("resumed from GTID set %q: keys %v, want ids 21 to 30 once each", cp.Location.GTID, keys)
	}
}

// TestTaskStreamFromRelay streams through the relay reader (relay on for
// the source) instead of a replication connection of the task's own.
func TestTaskStreamFromRelay(t *testing.T) {
	e := newTaskEnv(t)
	encExec(t, e.root, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(20))")
	src := e.source()
	rl := e.runRelay(t, src)

	sink := newMemSink()
	var sv saves
	var readers []*relay.Reader
	opener := func() binlog.StreamOpener {
		rd := rl.NewReader("stream/r")
		readers = append(readers, rd)
		return rd
	}
	r := startTask(t, TaskConfig{Stream: taskStream("r", false), Source: src, Opener: opener, DB: e.db, Sink: sink, Save: sv.save})
	testutil.WaitFor(t, taskTimeout, "streaming", func() bool { return r.task.Status().State == StateStreaming })
	encExec(t, e.root, "INSERT INTO app.t VALUES (1, 'a'), (2, 'b'), (3, 'c')", "UPDATE app.t SET v = 'B' WHERE id = 2",
		"DELETE FROM app.t WHERE id = 3")
	r.waitCaughtUp(t, e)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if len(readers) != 1 {
		t.Errorf("the task opened %d relay readers, want 1", len(readers))
	}
	e.applyRecords(t, []string{"t"}, memRecords(sink.all()))
	e.sameTables(t, "t")
}
