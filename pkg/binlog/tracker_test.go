package binlog

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// mariadbGTIDEvent builds a MariaDB GTID event as the server sends it.
func mariadbGTIDEvent(serverID uint32, domain uint32, seq uint64, standalone bool, logPos uint32) *replication.BinlogEvent {
	raw := make([]byte, replication.EventHeaderSize+13)
	body := raw[replication.EventHeaderSize:]
	binary.LittleEndian.PutUint64(body[0:8], seq)
	binary.LittleEndian.PutUint32(body[8:12], domain)
	if standalone {
		body[12] = replication.BINLOG_MARIADB_FL_STANDALONE
	}
	return &replication.BinlogEvent{RawData: raw,
		Header: &replication.EventHeader{EventType: replication.MARIADB_GTID_EVENT, ServerID: serverID, LogPos: logPos},
		Event:  &replication.MariadbGTIDEvent{}}
}

func event(typ replication.EventType, logPos uint32, e replication.Event) *replication.BinlogEvent {
	return &replication.BinlogEvent{Header: &replication.EventHeader{EventType: typ, LogPos: logPos}, Event: e}
}

func TestTracker(t *testing.T) {
	gset, err := mysql.ParseGTIDSet(mysql.MariaDBFlavor, "0-1-5")
	if err != nil {
		t.Fatal(err)
	}
	start := Location{Name: "bin.000001", Pos: 100, GTID: "0-1-5"}
	tr := NewTracker(start, gset)
	steps := []struct {
		ev      *replication.BinlogEvent
		kind    EventKind
		inTxn   bool
		commit  bool
		wantEnd Location
	}{
		{event(replication.HEARTBEAT_EVENT, 0, &replication.GenericEvent{}), EventHeartbeat, false, false, start},
		{mariadbGTIDEvent(1, 0, 6, false, 150), EventOther, true, false, start},
		{event(replication.QUERY_EVENT, 200, &replication.QueryEvent{Query: []byte("BEGIN")}), EventOther, true, false, start},
		{event(replication.WRITE_ROWS_EVENTv1, 300, &replication.RowsEvent{}), EventRows, true, false, start},
		// A rotate inside a transaction does not move the end.
		{event(replication.XID_EVENT, 330, &replication.XIDEvent{}), EventCommit, true, true, Location{Name: "bin.000001", Pos: 330, GTID: "0-1-6"}},
		{mariadbGTIDEvent(1, 0, 7, true, 370), EventOther, false, false, Location{Name: "bin.000001", Pos: 330, GTID: "0-1-6"}},
		{event(replication.QUERY_EVENT, 450, &replication.QueryEvent{Query: []byte("CREATE TABLE t (id INT)")}), EventQuery, false, true,
			Location{Name: "bin.000001", Pos: 450, GTID: "0-1-7"}},
		{event(replication.ROTATE_EVENT, 0, &replication.RotateEvent{NextLogName: []byte("bin.000002"), Position: 4}), EventOther, false, false,
			Location{Name: "bin.000002", Pos: 4, GTID: "0-1-7"}},
		// The new file's header events move the end over them (they
		// carry no change), so an idle consumer names the source's
		// position, not <file>:4.
		{event(replication.FORMAT_DESCRIPTION_EVENT, 256, &replication.FormatDescriptionEvent{}), EventOther, false, false,
			Location{Name: "bin.000002", Pos: 256, GTID: "0-1-7"}},
		{event(replication.MARIADB_GTID_LIST_EVENT, 300, &replication.MariadbGTIDListEvent{}), EventOther, false, false,
			Location{Name: "bin.000002", Pos: 300, GTID: "0-1-7"}},
		{event(replication.MARIADB_BINLOG_CHECKPOINT_EVENT, 345, &replication.MariadbBinlogCheckPointEvent{}), EventOther, false, false,
			Location{Name: "bin.000002", Pos: 345, GTID: "0-1-7"}},
	}
	for i, s := range steps {
		kind, err := tr.Track(s.ev)
		if err != nil || kind != s.kind || tr.InTxn != s.inTxn {
			t.Fatalf("step %d: Track = %v, %v (in txn %v); want %v (in txn %v)", i, kind, err, tr.InTxn, s.kind, s.inTxn)
		}
		if s.commit {
			if err := tr.Commit(); err != nil {
				t.Fatal(err)
			}
			if tr.EndIs(s.wantEnd) {
				t.Fatalf("step %d: EndIs true right after a commit, before End formatted the set", i)
			}
		}
		if got := tr.End(); got != s.wantEnd || !tr.EndIs(s.wantEnd) {
			t.Fatalf("step %d: End = %+v, want %+v", i, got, s.wantEnd)
		}
	}
	if tr.Cur != (Location{Name: "bin.000002", Pos: 345}) {
		t.Fatalf("Cur = %+v", tr.Cur)
	}

	// A stream started in the middle of a file gets the format description
	// again with the header's old position: the end never moves back.
	mid := Location{Name: "bin.000003", Pos: 5000, GTID: "0-1-7"}
	tr = NewTracker(mid, gset)
	for _, ev := range []*replication.BinlogEvent{
		event(replication.ROTATE_EVENT, 0, &replication.RotateEvent{NextLogName: []byte("bin.000003"), Position: 5000}),
		event(replication.FORMAT_DESCRIPTION_EVENT, 256, &replication.FormatDescriptionEvent{}),
	} {
		if _, err := tr.Track(ev); err != nil {
			t.Fatal(err)
		}
		if got := tr.End(); got != mid {
			t.Fatalf("after %v: End = %+v, want %+v", ev.Header.EventType, got, mid)
		}
	}
}

// eventsThenSilence yields its events, then blocks until ctx is done.
type eventsThenSilence struct{ events []*replication.BinlogEvent }

func (s *eventsThenSilence) GetEvent(ctx context.Context) (*replication.BinlogEvent, error) {
	if len(s.events) > 0 {
		ev := s.events[0]
		s.events = s.events[1:]
		return ev, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestReadLoop(t *testing.T) {
	st := &eventsThenSilence{events: []*replication.BinlogEvent{
		event(replication.XID_EVENT, 10, &replication.XIDEvent{}), event(replication.XID_EVENT, 20, &replication.XIDEvent{})}}
	var events, idles int
	err := ReadLoop(t.Context(), st, 10*time.Millisecond, 200*time.Millisecond,
		func(*replication.BinlogEvent) error { events++; return nil },
		func() error { idles++; return nil },
		func(err error) error { return err })
	if !errors.Is(err, ErrSilent) || events != 2 || idles == 0 {
		t.Fatalf("ReadLoop = %v after %d events and %d idle ticks; want ErrSilent after 2 events and idle ticks", err, events, idles)
	}

	// Cancellation returns the cause; a callback's error is returned as it is.
	ctx, cancel := context.WithCancelCause(t.Context())
	stop := errors.New("stop")
	err = ReadLoop(ctx, &eventsThenSilence{}, 10*time.Millisecond, 0, nil,
		func() error { cancel(stop); return nil }, func(err error) error { return err })
	if !errors.Is(err, stop) {
		t.Fatalf("ReadLoop after cancel = %v, want the cause", err)
	}
	boom := errors.New("boom")
	err = ReadLoop(t.Context(), &eventsThenSilence{events: []*replication.BinlogEvent{event(replication.XID_EVENT, 10, &replication.XIDEvent{})}},
		time.Hour, 0, func(*replication.BinlogEvent) error { return boom }, func() error { return nil }, func(err error) error { return err })
	if !errors.Is(err, boom) {
		t.Fatalf("ReadLoop with a failing event callback = %v", err)
	}
}
