package binlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// EventKind says what a consumer has to do with an event after Tracker.Track
// did its bookkeeping.
type EventKind int

// The kinds Track returns.
const (
	// EventOther needs nothing more (rotate, GTID, BEGIN, table map,
	// format description, ...).
	EventOther EventKind = iota
	// EventHeartbeat is a heartbeat: no position, no change.
	EventHeartbeat
	// EventCommit ends a transaction (XID, COMMIT, ROLLBACK): the consumer
	// calls Commit once it has handled what came before.
	EventCommit
	// EventQuery is a query event other than BEGIN/COMMIT/ROLLBACK (DDL,
	// GRANT, ...); the consumer handles it and calls Commit when it ends a
	// statement outside a transaction.
	EventQuery
	// EventRows is a rows event; Track marks the transaction open.
	EventRows
)

// Tracker follows a binlog stream's position and transaction boundaries
// for its consumer: the location after the last event (Cur), whether a
// transaction is open and its GTID, and the end of the last complete
// transaction with the GTID set there (End), the only place a checkpoint
// may name. It reads nothing; the consumer passes it every event. GTIDs
// are taken from the events' raw bytes (DESIGN.md §8). One goroutine uses
// it.
type Tracker struct {
	// Cur is the location after the last event (no GTID).
	Cur Location
	// InTxn is set while a transaction is open.
	InTxn bool
	// GTID is the open transaction's GTID, "" when none.
	GTID string

	end   Location // after the last complete transaction; end.GTID is stale while stale
	gset  mysql.GTIDSet
	stale bool
}

// NewTracker starts at start, a transaction boundary whose GTID set is
// gset (parsed by the caller from start.GTID in the source's flavor).
func NewTracker(start Location, gset mysql.GTIDSet) *Tracker {
	return &Tracker{Cur: Location{Name: start.Name, Pos: start.Pos}, end: start, gset: gset}
}

// Track does the bookkeeping of ev and says what it is.
func (t *Tracker) Track(ev *replication.BinlogEvent) (EventKind, error) {
	h := ev.Header
	if h.EventType == replication.HEARTBEAT_EVENT || h.EventType == replication.HEARTBEAT_LOG_EVENT_V2 {
		return EventHeartbeat, nil
	}
	if h.LogPos > 0 {
		t.Cur.Pos = h.LogPos
	}
	switch e := ev.Event.(type) {
	case *replication.RotateEvent:
		t.Cur.Name, t.Cur.Pos = string(e.NextLogName), uint32(e.Position)
		if !t.InTxn {
			t.end.Name, t.end.Pos = t.Cur.Name, t.Cur.Pos
		}
	case *replication.MariadbGTIDEvent:
		gtid, standalone, err := MariadbGTID(ev)
		if err != nil {
			return EventOther, err
		}
		t.GTID, t.InTxn = gtid, !standalone
	case *replication.GTIDEvent:
		t.GTID = MySQLGTID(e)
	case *replication.QueryEvent:
		switch strings.ToUpper(strings.TrimSpace(string(e.Query))) {
		case "BEGIN":
			t.InTxn = true
		case "COMMIT", "ROLLBACK":
			return EventCommit, nil
		default:
			return EventQuery, nil
		}
	case *replication.RowsEvent:
		t.InTxn = true
		return EventRows, nil
	case *replication.XIDEvent:
		return EventCommit, nil
	case *replication.FormatDescriptionEvent, *replication.MariadbGTIDListEvent,
		*replication.MariadbBinlogCheckPointEvent, *replication.PreviousGTIDsEvent:
		t.passHeader()
	}
	return EventOther, nil
}

// passHeader moves End over a binlog file's header events (format
// description, GTID list, binlog checkpoint, previous GTIDs) between
// transactions: they carry no change, so the location after them is the
// same boundary as the file's start. Without this a consumer idle after a
// rotate would name <file>:4 while the source's position is past the
// header, and look behind forever. End only moves forward within its
// file: the format description a server resends when a stream starts in
// the middle of a file carries the header's old position.
func (t *Tracker) passHeader() {
	if t.InTxn || t.GTID != "" || t.Cur.Name != t.end.Name || t.Cur.Pos <= t.end.Pos {
		return
	}
	t.end.Pos = t.Cur.Pos
}

// Commit ends the open transaction (or standalone statement): its GTID
// joins the set and the current location becomes End.
func (t *Tracker) Commit() error {
	if t.GTID != "" {
		if err := t.gset.Update(t.GTID); err != nil {
			return fmt.Errorf("binlog: add GTID %q to %q: %w", t.GTID, t.gset.String(), err)
		}
		t.GTID = ""
	}
	t.InTxn = false
	t.end = Location{Name: t.Cur.Name, Pos: t.Cur.Pos}
	t.stale = true
	return nil
}

// End is the end of the last complete transaction with the GTID set
// there. The set's text is formatted only when it changed since the last
// call (formatting per transaction is costly); call it between
// transactions' changes only when it must be exact.
func (t *Tracker) End() Location {
	if t.stale {
		t.end.GTID = t.gset.String()
		t.stale = false
	}
	return t.end
}

// EndIs reports whether End is l (position and GTID set) without
// formatting the set.
func (t *Tracker) EndIs(l Location) bool {
	return !t.stale && t.end == l
}

// GTIDSet is the GTID set at End; the caller must not modify it.
func (t *Tracker) GTIDSet() mysql.GTIDSet { return t.gset }

// ErrSilent is the cause of ReadLoop's error when a stream that should
// carry heartbeats stayed silent for too long.
var ErrSilent = errors.New("binlog: no event or heartbeat from the source; the connection is taken for dead")

// ReadLoop reads st until ctx is done (returning context.Cause(ctx)) or a
// callback fails: event for every event, idle when no event came for a
// tick (an IdleWait of tick). With silence > 0, that long without any
// event (the source sends heartbeats) is a read error wrapping ErrSilent.
// Errors of st go through readErr, which classifies them for the caller.
func ReadLoop(ctx context.Context, st Streamer, tick, silence time.Duration,
	event func(*replication.BinlogEvent) error, idle func() error, readErr func(error) error) error {
	return ReadLoopWake(ctx, st, tick, silence, nil, event, idle, readErr)
}

// ReadLoopWake is ReadLoop whose idle work also runs at once, without
// waiting for a tick, each time something arrives on wake while the loop
// waits for an event (a wake does not count as silence).
func ReadLoopWake(ctx context.Context, st Streamer, tick, silence time.Duration, wake <-chan struct{},
	event func(*replication.BinlogEvent) error, idle func() error, readErr func(error) error) error {
	wait := NewIdleWait(ctx, tick)
	defer wait.Stop()
	if wake != nil {
		done := make(chan struct{})
		defer close(done)
		go func() {
			for {
				select {
				case <-wake:
					wait.Wake()
				case <-done:
					return
				}
			}
		}()
	}
	silent := 0
	for {
		evCtx := wait.Next()
		ev, err := st.GetEvent(evCtx)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if err != nil {
			if !errors.Is(err, context.Canceled) || !wait.Expired(evCtx) {
				return readErr(err)
			}
			if wait.Woken(evCtx) {
				wait.ClearWake() // this wake is seen; a later one sets it again
				if err := idle(); err != nil {
					return err
				}
				continue
			}
			silent++
			if silence > 0 && time.Duration(silent)*tick >= silence {
				return readErr(fmt.Errorf("%w (for at least %s)", ErrSilent, time.Duration(silent)*tick))
			}
			if err := idle(); err != nil {
				return err
			}
			continue
		}
		silent = 0
		if err := event(ev); err != nil {
			return err
		}
	}
}
