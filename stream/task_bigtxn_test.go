package stream

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// Big transactions are split into bounded batches and a resume continues
// inside a transaction after its last acknowledged event (issue 23, part
// 4). The transaction of these tests (bigTxn) changes bigTxnEvents rows of
// app.big; the tasks cut batches of at most bigBatchEvents events and
// bigBatchBytes bytes, so it spans some 60 to 80 batches.
const (
	bigTxnRows     = 2000
	bigTxnEvents   = bigTxnRows + 2*25 + 21 + 5 // updates, 25 key moves (d + c), deletes, inserts
	bigBatchEvents = 40
	bigBatchBytes  = 16 << 10
)

// secondTxnEvents is how many changes bigTxn makes in round 1: the rows
// round 0 deleted (21) and inserted (5) change the UPDATE's count.
const secondTxnEvents = bigTxnEvents - 21 + 5

// bigTable creates app.big with bigTxnRows rows.
func bigTable(t *testing.T, e *taskEnv) {
	t.Helper()
	encExec(t, e.root, "CREATE DATABASE app",
		"CREATE TABLE app.big (id INT PRIMARY KEY, a INT NOT NULL, c VARCHAR(100) NOT NULL)",
		fmt.Sprintf("INSERT INTO app.big SELECT seq, seq %% 1000, RPAD(CONCAT('v-', seq), 100, 'v') FROM app.seq_1_to_%d", bigTxnRows))
}

// bigTxn is one transaction of bigTxnEvents row changes of app.big: every
// row updated, 25 of them moved to another key (a delete and a create
// event each), 21 deleted, 5 inserted. round makes each call's values new
// (round 1 makes secondTxnEvents changes).
func bigTxn(t *testing.T, e *taskEnv, round int) {
	t.Helper()
	ctx := t.Context()
	conn, err := e.root.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	base := 100_000 * (round + 1)
	for _, q := range []string{
		"BEGIN",
		fmt.Sprintf("UPDATE app.big SET a = a + 1, c = RPAD(CONCAT('u%d-', id), 100, 'u')", round),
		fmt.Sprintf("UPDATE app.big SET id = id + %d WHERE id <= 25 OR id BETWEEN %d AND %d", base, base-100_000+1, base-100_000+25),
		"DELETE FROM app.big WHERE id BETWEEN 100 + 21 * " + strconv.Itoa(round) + " AND 120 + 21 * " + strconv.Itoa(round),
		fmt.Sprintf("INSERT INTO app.big VALUES (%d, 1, 'i1'), (%d, 2, 'i2'), (%d, 3, 'i3'), (%d, 4, 'i4'), (%d, 5, 'i5')",
			base+50_001, base+50_002, base+50_003, base+50_004, base+50_005),
		"COMMIT",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// splitSink passes Writes to its sink and records each Write's size; once
// failAt events were acknowledged (failAt >= 0) every Write fails without
// reaching the sink, as a worker that dies does.
type splitSink struct {
	Sink
	mu     sync.Mutex
	failAt int // guarded by mu, as the fields below
	sizes  [][2]int
	acked  []Event
}

func newSplitSink(inner Sink, failAt int) *splitSink { return &splitSink{Sink: inner, failAt: failAt} }

func (s *splitSink) Write(ctx context.Context, batch []Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAt >= 0 && len(s.acked) >= s.failAt {
		return errors.New("splitSink: the worker died")
	}
	if err := s.Sink.Write(ctx, batch); err != nil {
		return err
	}
	n := 0
	for _, ev := range batch[:len(batch)-1] {
		n += eventSize(ev)
	}
	s.sizes = append(s.sizes, [2]int{len(batch), n})
	s.acked = append(s.acked, batch...)
	return nil
}

// events is every acknowledged event, in order.
func (s *splitSink) events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.acked...)
}

// checkSizes fails t for a Write above the batch limits: more than max
// events, or more than maxBytes before its last event.
func (s *splitSink) checkSizes(t *testing.T, maxEvents, maxBytes int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, sz := range s.sizes {
		if sz[0] > maxEvents || sz[1] >= maxBytes {
			t.Errorf("write %d carried %d events, %d bytes before its last: above the limits %d events, %d bytes", i+1, sz[0], sz[1], maxEvents, maxBytes)
		}
	}
}

// bigTaskConfig is the config of a task of the app schema with the test's
// batch limits.
func bigTaskConfig(e *taskEnv, src *config.SourceConfig, sink Sink, sv *saves, start Checkpoint) TaskConfig {
	return TaskConfig{Stream: taskStream("big", false), Source: src, DB: e.db, Sink: sink, Save: sv.save, Start: start,
		BatchEvents: bigBatchEvents, BatchBytes: bigBatchBytes}
}

// runUntilDeath runs a task until its splitSink fails and returns the
// checkpoint it saved last.
func runUntilDeath(t *testing.T, cfg TaskConfig, sv *saves) Checkpoint {
	t.Helper()
	r := startTask(t, cfg)
	err := r.wait(t)
	if !errs.IsResumable(err) || errs.Code(err) != CodeSink {
		t.Fatalf("Run returned %v, want the resumable %s error of the dying sink", err, CodeSink)
	}
	return sv.last()
}

// sameEvent compares the identity, key and value of two deliveries of an
// event; the value's ts_ms (processing time) may differ.
func sameEvent(a, b Event) bool {
	return a.ID == b.ID && bytes.Equal(a.Key, b.Key) && bytes.Equal(withoutTsMs(a.Value), withoutTsMs(b.Value))
}

// withoutTsMs is a debezium value with its top-level ts_ms cut out.
func withoutTsMs(v []byte) []byte {
	i := bytes.Index(v, []byte(`,"ts_ms":`))
	j := bytes.Index(v, []byte(`,"source":`))
	if i < 0 || j < i {
		return v
	}
	return append(append([]byte{}, v[:i]...), v[j:]...)
}

// progressOf is the TxnProgress that names ev, the n-th event of its
// transaction, as the writer records it.
func progressOf(t *testing.T, ev Event, n int64) *TxnProgress {
	t.Helper()
	id, del := strings.CutSuffix(ev.ID, ":d")
	parts := strings.Split(id, ":")
	if len(parts) != 4 {
		t.Fatalf("identity %q is not <source>:<file>:<pos>:<row>", ev.ID)
	}
	pos, err1 := strconv.ParseUint(parts[2], 10, 32)
	row, err2 := strconv.Atoi(parts[3])
	var v struct {
		Source struct {
			GTID string `json:"gtid"`
		} `json:"source"`
	}
	if err := errors.Join(err1, err2, json.Unmarshal(ev.Value, &v)); err != nil {
		t.Fatalf("event %s: %v", ev.ID, err)
	}
	return &TxnProgress{File: parts[1], Pos: uint32(pos), Row: row, Delete: del, GTID: v.Source.GTID, Events: n}
}

// checkOnce fails t unless events hold want's identities exactly once each,
// in want's order.
func checkOnce(t *testing.T, what string, events, want []Event) {
	t.Helper()
	if len(events) != len(want) {
		t.Errorf("%s: %d events, want %d", what, len(events), len(want))
	}
	for i := range min(len(events), len(want)) {
		if !sameEvent(events[i], want[i]) {
			t.Errorf("%s: event %d is %s %s, want %s %s", what, i, events[i].ID, events[i].Value, want[i].ID, want[i].Value)
			return
		}
	}
}

// TestTaskBigTxnSplitAndResume streams one transaction of bigTxnEvents
// changes in batches within the limits, lets the sink die in its middle,
// and resumes from the checkpoint saved then: it names the transaction's
// start and its last acknowledged event, and the resumed run delivers the
// rest, each change once, in order. File/position and GTID mode (the
// resume from the GTID set alone), through the file sink.
func TestTaskBigTxnSplitAndResume(t *testing.T) {
	for _, gtid := range []bool{false, true} {
		t.Run(fmt.Sprintf("gtid=%v", gtid), func(t *testing.T) {
			e := newTaskEnv(t)
			bigTable(t, e)
			src := e.source()
			src.EnableGTID = gtid
			dir := t.TempDir()
			newFile := func() Sink {
				s, err := NewSink("big", config.SinkConfig{Type: config.SinkFile, File: &config.FileSinkConfig{Dir: dir}}, zaptest.NewLogger(t))
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			var sv, local saves
			sink1 := newSplitSink(newFile(), bigTxnEvents/2)
			cfg := bigTaskConfig(e, src, sink1, &sv, Checkpoint{})
			cfg.SaveLocal = local.save
			r := startTask(t, cfg)
			testutil.WaitFor(t, taskTimeout, "start checkpoint saved", func() bool { return !sv.last().Location.IsZero() })
			start := sv.last().Location
			bigTxn(t, e, 0)
			if err := r.wait(t); !errs.IsResumable(err) || errs.Code(err) != CodeSink {
				t.Fatalf("Run returned %v, want the resumable %s error of the dying sink", err, CodeSink)
			}
			cp := sv.last()
			acked := sink1.events()
			// From a GTID set, the dump's first (artificial) rotate names
			// position 4 of the file: the set is what locates the start.
			same := cp.Location == start || gtid && cp.Location.GTID == start.GTID
			if !same || cp.Txn == nil {
				t.Fatalf("checkpoint after %d of %d events acknowledged: %s %+v, want the transaction's start %s and a point inside it",
					len(acked), bigTxnEvents, cp.Location, cp.Txn, start)
			}
			if want := progressOf(t, acked[len(acked)-1], int64(len(acked))); *cp.Txn != *want {
				t.Errorf("checkpoint inside the transaction %+v, want the last acknowledged event %+v", *cp.Txn, *want)
			}
			sink1.checkSizes(t, bigBatchEvents, bigBatchBytes)
			// Between Saves (at most one a second), the local meta store
			// gets the checkpoint every localSaveBatches batches' worth.
			var prev int64
			for _, lc := range local.all {
				if lc.Txn == nil || lc.Txn.Events < prev+localSaveBatches*bigBatchEvents {
					t.Errorf("local saves %+v: want points inside the transaction %d events apart at least", local.all, localSaveBatches*bigBatchEvents)
					break
				}
				prev = lc.Txn.Events
			}
			if n := len(local.all); n < len(acked)/(2*localSaveBatches*bigBatchEvents) {
				t.Errorf("%d local saves for %d acknowledged events", n, len(acked))
			}
			if n := len(sink1.sizes); n < len(acked)/bigBatchEvents {
				t.Errorf("%d events in %d writes", len(acked), n)
			}

			if gtid {
				cp.Location.Name, cp.Location.Pos = "", 0
			}
			sink2 := newSplitSink(newFile(), -1)
			r2 := startTask(t, bigTaskConfig(e, src, sink2, &sv, cp))
			r2.waitCaughtUp(t, e)
			if err := r2.stop(t); err != nil {
				t.Fatal(err)
			}
			if cp := sv.last(); cp.Txn != nil {
				t.Errorf("checkpoint after the transaction %s %+v, want a boundary", cp.Location, *cp.Txn)
			}
			sink2.checkSizes(t, bigBatchEvents, bigBatchBytes)
			all := append(acked, sink2.events()...)
			seen := map[string]bool{}
			for _, ev := range all {
				if seen[ev.ID] {
					t.Errorf("event %s delivered twice", ev.ID)
				}
				seen[ev.ID] = true
			}
			if len(all) != bigTxnEvents {
				t.Errorf("%d + %d events delivered, want the transaction's %d", len(acked), len(sink2.events()), bigTxnEvents)
			}
			recs := fileRecords(t, dir)
			if len(recs) != bigTxnEvents {
				t.Errorf("the file sink holds %d events, want %d", len(recs), bigTxnEvents)
			}
			e.applyRecords(t, []string{"big"}, recs)
			e.sameTables(t, "big")
		})
	}
}

// TestTaskBigTxnResumeFromOlderCheckpoint resumes, as after a kill -9,
// from checkpoints saved before the last acknowledged batches: in the
// middle of the transaction, between the delete and the create half of a
// key-changing update, at its first event, after its last event (a crash
// after the last batch but before the commit's checkpoint), and with the
// transaction at other binlog coordinates (a failover with GTIDs: the
// count of events decides). The resumed run delivers exactly the events
// after the checkpoint's, with the same identities and content.
func TestTaskBigTxnResumeFromOlderCheckpoint(t *testing.T) {
	e := newTaskEnv(t)
	bigTable(t, e)
	src := e.source()
	var sv saves
	sink := newSplitSink(newMemSink(), -1)
	r := startTask(t, bigTaskConfig(e, src, sink, &sv, Checkpoint{}))
	testutil.WaitFor(t, taskTimeout, "start checkpoint saved", func() bool { return !sv.last().Location.IsZero() })
	start := sv.last().Location
	bigTxn(t, e, 0)
	encExec(t, e.root, "INSERT INTO app.big VALUES (900001, 0, 'after')")
	r.waitCaughtUp(t, e)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	end := sv.last().Location
	all := sink.events()
	if len(all) != bigTxnEvents+1 {
		t.Fatalf("%d events, want %d and the insert after", len(all), bigTxnEvents)
	}
	txn := all[:bigTxnEvents]
	split := -1
	for i, ev := range txn {
		if strings.HasSuffix(ev.ID, ":d") {
			split = i
			break
		}
	}
	if split < 0 {
		t.Fatal("no key-changing update in the transaction")
	}
	for _, tc := range []struct {
		name  string
		k     int // the last acknowledged event of the transaction
		moved bool
	}{
		{"middle", bigTxnEvents / 2, false},
		{"delete half of a key move", split, false},
		{"first event", 0, false},
		{"last event, before the commit's checkpoint", bigTxnEvents - 1, false},
		{"other coordinates", bigTxnEvents / 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := progressOf(t, txn[tc.k], int64(tc.k+1))
			if tc.moved {
				p.File, p.Pos = "moved-bin.000042", 4
			}
			var sv2 saves
			cp := Checkpoint{Location: start, Txn: p, SnapshotDone: true}
			var got []Event
			if rest := bigTxnEvents - tc.k - 1; rest > 4*bigBatchEvents {
				// The resumed run dies too, and its checkpoint counts on
				// from the one it resumed from.
				sink := newSplitSink(newMemSink(), 2*bigBatchEvents)
				cp = runUntilDeath(t, bigTaskConfig(e, src, sink, &sv2, cp), &sv2)
				got = sink.events()
				want := progressOf(t, got[len(got)-1], int64(tc.k+1+len(got)))
				if tc.moved {
					want.File, want.Pos = p.File, p.Pos
				}
				if cp.Location != start || cp.Txn == nil || !tc.moved && *cp.Txn != *want || tc.moved && cp.Txn.Events != want.Events {
					t.Errorf("checkpoint of the resumed run that died: %s %+v, want %s %+v", cp.Location, cp.Txn, start, want)
				}
			}
			sink2 := newSplitSink(newMemSink(), -1)
			r2 := startTask(t, bigTaskConfig(e, src, sink2, &sv2, cp))
			r2.waitCaughtUp(t, e)
			if err := r2.stop(t); err != nil {
				t.Fatal(err)
			}
			checkOnce(t, "resumed after event "+strconv.Itoa(tc.k), append(got, sink2.events()...), all[tc.k+1:])
			if cp := sv2.last(); cp.Location != end || cp.Txn != nil {
				t.Errorf("checkpoint %s %+v, want the end %s", cp.Location, cp.Txn, end)
			}
		})
	}
}

// TestTaskBigTxnRelayFileBoundary streams two big transactions through
// the relay, the second in the next binlog (and relay) file: the sink dies
// inside the second, the checkpoint names that file, and a resume through
// a new relay reader delivers the rest once. A checkpoint inside the first
// transaction resumes across the file boundary: the rest of the first
// transaction, then the whole second one.
func TestTaskBigTxnRelayFileBoundary(t *testing.T) {
	e := newTaskEnv(t)
	bigTable(t, e)
	src := e.source()
	rl := e.runRelay(t, src)
	opener := func() binlog.StreamOpener { return rl.NewReader("stream/big") }
	withRelay := func(cfg TaskConfig) TaskConfig { cfg.Opener = opener; return cfg }

	var sv saves
	sink1 := newSplitSink(newMemSink(), bigTxnEvents+bigTxnEvents/2)
	r := startTask(t, withRelay(bigTaskConfig(e, src, sink1, &sv, Checkpoint{})))
	testutil.WaitFor(t, taskTimeout, "start checkpoint saved", func() bool { return !sv.last().Location.IsZero() })
	start := sv.last().Location
	bigTxn(t, e, 0)
	encExec(t, e.root, "FLUSH BINARY LOGS")
	next, _, _ := e.src.MasterStatus(t)
	// MariaDB writes the new file's Binlog_checkpoint event once the old
	// file's commits are durable, possibly after later transactions; a
	// stream's checkpoint moves at commits only, so the waits for the
	// source's position below would miss a trailing one.
	testutil.Eventually(t, taskTimeout, "the Binlog_checkpoint event of "+next, func() error {
		rows, err := e.root.QueryContext(t.Context(), "SHOW BINLOG EVENTS IN '"+next+"'")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var log, typ, info string
			var pos, sid, end any
			if err := rows.Scan(&log, &pos, &typ, &sid, &end, &info); err != nil {
				return err
			}
			if typ == "Binlog_checkpoint" && strings.Contains(info, next) {
				return nil
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return errors.New("not written yet")
	})
	bigTxn(t, e, 1)
	encExec(t, e.root, "INSERT INTO app.big VALUES (900001, 0, 'after')")
	if err := r.wait(t); !errs.IsResumable(err) || errs.Code(err) != CodeSink {
		t.Fatalf("Run returned %v, want the resumable %s error of the dying sink", err, CodeSink)
	}
	cp := sv.last()
	acked := sink1.events()
	if cp.Txn == nil || cp.Location.Name != next || cp.Txn.File != next {
		t.Fatalf("checkpoint %s %+v after %d events, want one inside the second transaction, in %s", cp.Location, cp.Txn, len(acked), next)
	}
	sink2 := newSplitSink(newMemSink(), -1)
	r2 := startTask(t, withRelay(bigTaskConfig(e, src, sink2, &sv, cp)))
	r2.waitCaughtUp(t, e)
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	full := append(acked, sink2.events()...)
	if len(full) != bigTxnEvents+secondTxnEvents+1 {
		t.Fatalf("%d + %d events, want both transactions' %d and the insert after them once", len(acked), len(sink2.events()), bigTxnEvents+secondTxnEvents)
	}
	e.applyRecords(t, []string{"big"}, memRecords(full))
	e.sameTables(t, "big")

	k := bigTxnEvents / 2
	var sv3 saves
	sink3 := newSplitSink(newMemSink(), -1)
	r3 := startTask(t, withRelay(bigTaskConfig(e, src, sink3, &sv3,
		Checkpoint{Location: start, Txn: progressOf(t, full[k], int64(k+1)), SnapshotDone: true})))
	r3.waitCaughtUp(t, e)
	if err := r3.stop(t); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, "resumed inside the first transaction", sink3.events(), full[k+1:])
}

// TestTaskBigTxnKafkaResume is the split-and-resume of one big transaction
// against franz-go's in-process Kafka cluster: after the sink died in the
// middle and the task resumed from its checkpoint, the topic holds every
// change of the transaction once (by dm-event-id), and each partition
// holds its events in binlog order.
func TestTaskBigTxnKafkaResume(t *testing.T) {
	e := newTaskEnv(t)
	bigTable(t, e)
	c := startKafka(t)
	newKafka := func() Sink {
		s, err := NewSink("big", config.SinkConfig{Type: config.SinkKafka,
			Kafka: &config.KafkaSinkConfig{Brokers: c.ListenAddrs(), Topic: "cdc.orders"}}, zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	src := e.source()
	var sv saves
	sink1 := newSplitSink(newKafka(), bigTxnEvents/3)
	r := startTask(t, bigTaskConfig(e, src, sink1, &sv, Checkpoint{}))
	testutil.WaitFor(t, taskTimeout, "start checkpoint saved", func() bool { return !sv.last().Location.IsZero() })
	bigTxn(t, e, 0)
	if err := r.wait(t); !errs.IsResumable(err) || errs.Code(err) != CodeSink {
		t.Fatalf("Run returned %v, want the resumable %s error of the dying sink", err, CodeSink)
	}
	cp := sv.last()
	if cp.Txn == nil {
		t.Fatalf("checkpoint %s after %d events is at a boundary, want inside the transaction", cp.Location, len(sink1.events()))
	}
	sink2 := newSplitSink(newKafka(), -1)
	r2 := startTask(t, bigTaskConfig(e, src, sink2, &sv, cp))
	r2.waitCaughtUp(t, e)
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}

	recs := consumeTopic(t, c.ListenAddrs(), "cdc.orders")
	order := map[string]int{}
	for i, ev := range append(sink1.events(), sink2.events()...) {
		order[ev.ID] = i
	}
	seen := map[string]bool{}
	last := map[int32]int{}
	for _, rec := range recs {
		var id string
		for _, h := range rec.Headers {
			if h.Key == KafkaEventIDHeader {
				id = string(h.Value)
			}
		}
		i, ok := order[id]
		switch {
		case !ok:
			t.Errorf("record %d/%d: identity %q was never acknowledged", rec.Partition, rec.Offset, id)
		case seen[id]:
			t.Errorf("record %d/%d: identity %s is in the topic twice", rec.Partition, rec.Offset, id)
		case i < last[rec.Partition]:
			t.Errorf("record %d/%d: identity %s comes after a later event of the binlog", rec.Partition, rec.Offset, id)
		}
		seen[id], last[rec.Partition] = true, i
	}
	if len(seen) != bigTxnEvents || len(recs) != bigTxnEvents {
		t.Errorf("the topic holds %d records of %d identities, want the transaction's %d once each", len(recs), len(seen), bigTxnEvents)
	}
}

// TestReaderIdleCutKeepsTxnProgress: a run resuming inside a transaction
// whose first batch is cut before the transaction's events arrive (an idle
// tick) hands the writer the checkpoint's progress, not a boundary that
// would drop it at the next save.
func TestReaderIdleCutKeepsTxnProgress(t *testing.T) {
	task, err := NewTask(TaskConfig{Stream: taskStream("big", false), Source: &config.SourceConfig{SourceID: "mysql-01"},
		DB: &sql.DB{}, Sink: newMemSink(), Save: (&saves{}).save})
	if err != nil {
		t.Fatal(err)
	}
	gset, err := mysql.ParseGTIDSet(mysql.MariaDBFlavor, "0-1-26")
	if err != nil {
		t.Fatal(err)
	}
	p := TxnProgress{File: "mariadb-bin.000001", Pos: 368512273, Row: 15, GTID: "0-1-27", Events: 653056}
	for _, cp := range []Checkpoint{
		{Location: binlog.Location{Name: "mariadb-bin.000001", Pos: 222912405, GTID: "0-1-26"}, Txn: &p},
		{Location: binlog.Location{Name: "mariadb-bin.000001", Pos: 222912405, GTID: "0-1-26"}},
	} {
		out := make(chan batch, 1)
		r := task.newReader(cp, gset, out)
		if err := r.cut(t.Context(), true); err != nil {
			t.Fatal(err)
		}
		b := <-out
		if b.end != nil || len(b.events) != 0 || (b.txn == nil) != (cp.Txn == nil) || b.txn != nil && *b.txn != *cp.Txn {
			t.Errorf("idle cut from %s %+v: end %v, %d events, txn %+v; want no move and the checkpoint's progress", cp.Location, cp.Txn, b.end, len(b.events), b.txn)
		}
	}
}
