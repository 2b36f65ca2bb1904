package fanout

import (
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/binlog"
)

// logEventArtificial is the header flag of events a server or the relay
// makes up for a reader (the rotate that names the file a dump starts in).
const logEventArtificial = 0x20

// follower follows the binlog position of a run of events and whether it
// is at a transaction boundary, for the hub (which annotates each event
// once) and for a subscriber's private reader. Only positions that really
// moved forward count ("advancing" events): the rotate a dump starts with,
// the format description it resends in the middle of a file and the
// header events before the first real event of a GTID start carry no new
// position. One goroutine uses it.
type follower struct {
	// at is the position after the last advancing event (Name and Pos
	// only); Pos 0 while unknown (a start by GTID set alone).
	at binlog.Location
	// inTxn: a transaction is open; gtid: a GTID event began an event
	// group that has not ended yet.
	inTxn, gtid bool
}

// newFollower starts at loc, a transaction boundary.
func newFollower(loc binlog.Location) follower {
	return follower{at: binlog.Location{Name: loc.Name, Pos: loc.Pos}}
}

// known reports whether the position is known.
func (f *follower) known() bool { return f.at.Name != "" && f.at.Pos > 0 }

// boundary reports whether the position is between transactions.
func (f *follower) boundary() bool { return !f.inTxn && !f.gtid }

// step follows ev; adv says whether ev moved the position forward (then
// f.at is the position after it), boundary whether f.at is now between
// transactions (as binlog.Tracker decides a checkpoint may be taken).
func (f *follower) step(ev *replication.BinlogEvent) (adv, boundary bool) {
	h := ev.Header
	if h.EventType == replication.HEARTBEAT_EVENT || h.EventType == replication.HEARTBEAT_LOG_EVENT_V2 {
		return false, f.boundary()
	}
	switch e := ev.Event.(type) {
	case *replication.RotateEvent:
		next := binlog.Location{Name: string(e.NextLogName), Pos: uint32(e.Position)}
		switch {
		case !f.known():
			if f.at.Name == "" {
				f.at.Name = next.Name // a start by GTID: the file, not yet the place
			}
		case next.Compare(f.at) > 0:
			f.at, adv = next, true
		}
		return adv, f.boundary()
	case *replication.FormatDescriptionEvent, *replication.MariadbGTIDListEvent,
		*replication.MariadbBinlogCheckPointEvent, *replication.PreviousGTIDsEvent:
		if f.known() && h.LogPos > f.at.Pos && h.Flags&logEventArtificial == 0 {
			f.at.Pos, adv = h.LogPos, true
		}
		return adv, f.boundary()
	}
	if h.LogPos > 0 && h.Flags&logEventArtificial == 0 && f.at.Name != "" && h.LogPos > f.at.Pos {
		f.at.Pos, adv = h.LogPos, true
	}
	switch e := ev.Event.(type) {
	case *replication.MariadbGTIDEvent:
		f.gtid, f.inTxn = true, !mariadbStandalone(ev)
	case *replication.GTIDEvent:
		f.gtid = true
	case *replication.QueryEvent:
		q := strings.TrimSpace(string(e.Query))
		switch {
		case strings.EqualFold(q, "BEGIN"):
			f.inTxn = true
		case strings.EqualFold(q, "COMMIT"), strings.EqualFold(q, "ROLLBACK"), !f.inTxn:
			f.inTxn, f.gtid = false, false
		}
	case *replication.RowsEvent:
		f.inTxn = true
	case *replication.XIDEvent:
		f.inTxn, f.gtid = false, false
	}
	return adv, f.boundary()
}

// mariadbStandalone reads the standalone flag of a MariaDB GTID event from
// its raw bytes (as binlog.MariadbGTID, without formatting the GTID).
func mariadbStandalone(ev *replication.BinlogEvent) bool {
	const flagsAt = replication.EventHeaderSize + 12
	if len(ev.RawData) <= flagsAt {
		return false
	}
	return ev.RawData[flagsAt]&replication.BINLOG_MARIADB_FL_STANDALONE != 0
}
