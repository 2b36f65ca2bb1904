package stream

import "strconv"

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
	b := make([]byte, 0, len(source)+len(pos.File)+24)
	b = append(b, source...)
	b = append(b, ':')
	b = append(b, pos.File...)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(pos.Pos), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(pos.Row), 10)
	return string(b)
}
