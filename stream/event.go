package stream

import (
	"strconv"
	"strings"
)

// Position of a change in the source's binlog, for an event's "source"
// block and identity.
type Position struct {
	File string
	// Pos is the position of the rows event; the identity uses it.
	Pos uint32
	// Row is the index of the row within the rows event.
	Row int
	// GTID is the GTID of the transaction ("" when GTID is off).
	GTID     string
	ServerID uint32
	// TsMs is the event timestamp in ms (binlog header timestamp * 1000).
	TsMs int64
	// Snapshot is true for fill-history rows (op "r").
	Snapshot bool
}

// EventID is an event's identity <source>:<file>:<pos>:<row> (DESIGN.md
// §4), which sinks pass on so that consumers and brokers can drop replays.
func EventID(source string, pos Position) string {
	var num [20]byte
	var b strings.Builder // one allocation: String does not copy
	b.Grow(len(source) + len(pos.File) + 24)
	b.WriteString(source)
	b.WriteByte(':')
	b.WriteString(pos.File)
	b.WriteByte(':')
	b.Write(strconv.AppendUint(num[:0], uint64(pos.Pos), 10))
	b.WriteByte(':')
	b.Write(strconv.AppendInt(num[:0], int64(pos.Row), 10))
	return b.String()
}
