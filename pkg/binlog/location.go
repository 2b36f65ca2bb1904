// Package binlog holds the small binlog vocabulary shared by relay, sync
// and stream tasks: a location in the source's binlog (file, position and
// GTID set) and the interface through which a consumer reads events,
// whether straight from the source or from the local relay.
//
// It owns no connections and no files.
package binlog

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"
)

// Location is a position in the source's binlog. Name and Pos are in the
// source's coordinates ("mariadb-bin.000003", 1234); GTID is the set of
// transactions executed up to here in the flavor's text form ("0-1-900" for
// MariaDB), empty when GTID is not used.
type Location struct {
	Name string `json:"binlog-name"`
	Pos  uint32 `json:"binlog-pos"`
	GTID string `json:"binlog-gtid,omitempty"`
}

// String is "<file>:<pos>", the form shown in status.
func (l Location) String() string { return fmt.Sprintf("%s:%d", l.Name, l.Pos) }

// IsZero reports whether no file is set.
func (l Location) IsZero() bool { return l.Name == "" }

// Compare orders two locations by file then position; GTIDs are not
// compared. Files compare by their numeric suffix, so rotation past
// .999999 still orders correctly.
func (l Location) Compare(o Location) int {
	if c := compareFileNames(l.Name, o.Name); c != 0 {
		return c
	}
	switch {
	case l.Pos < o.Pos:
		return -1
	case l.Pos > o.Pos:
		return 1
	}
	return 0
}

// ParseLocation parses "<file>:<pos>".
func ParseLocation(s string) (Location, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return Location{}, fmt.Errorf("binlog: location %q is not <file>:<pos>", s)
	}
	pos, err := strconv.ParseUint(s[i+1:], 10, 32)
	if err != nil {
		return Location{}, fmt.Errorf("binlog: location %q: position: %w", s, err)
	}
	return Location{Name: s[:i], Pos: uint32(pos)}, nil
}

// compareFileNames compares "base.000012"-style names by base, then by the
// numeric suffix.
func compareFileNames(a, b string) int {
	ab, as := splitFileName(a)
	bb, bs := splitFileName(b)
	if ab != bb {
		return strings.Compare(a, b)
	}
	switch {
	case as < bs:
		return -1
	case as > bs:
		return 1
	}
	return 0
}

func splitFileName(name string) (base string, seq uint64) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return name, 0
	}
	n, err := strconv.ParseUint(name[i+1:], 10, 64)
	if err != nil {
		return name, 0
	}
	return name[:i], n
}

// Streamer yields binlog events in order. GetEvent blocks until an event is
// available or ctx is done. Rotate and format-description events are
// passed through, so consumers can track the file name. Row values are
// decoded with go-mysql's UseDecimal on, ParseTime off and timestamps as
// UTC strings, whichever path (source or relay) the events come from.
type Streamer interface {
	GetEvent(ctx context.Context) (*replication.BinlogEvent, error)
}

// StreamOpener opens a Streamer that starts at a location: at loc.GTID when
// it is set and the opener uses GTID, else at loc.Name/loc.Pos. Close
// releases the stream's connection or files.
type StreamOpener interface {
	Open(ctx context.Context, loc Location) (Streamer, error)
	Close()
}
