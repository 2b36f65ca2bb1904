package relay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/google/uuid"
)

// Binlog file and event constants.
const (
	headerSize   = replication.EventHeaderSize // 19
	checksumSize = replication.BinlogChecksumLength
	magicSize    = 4
)

var magic = replication.BinLogFileHeader

// eventHeader is the common 19-byte header of a binlog event.
type eventHeader struct {
	Timestamp uint32
	Type      replication.EventType
	ServerID  uint32
	Size      uint32
	LogPos    uint32
	Flags     uint16
}

func parseHeader(b []byte) eventHeader {
	return eventHeader{
		Timestamp: binary.LittleEndian.Uint32(b[0:]),
		Type:      replication.EventType(b[4]),
		ServerID:  binary.LittleEndian.Uint32(b[5:]),
		Size:      binary.LittleEndian.Uint32(b[9:]),
		LogPos:    binary.LittleEndian.Uint32(b[13:]),
		Flags:     binary.LittleEndian.Uint16(b[17:]),
	}
}

// artificial reports whether the event was made up by the server for the
// dump (fake rotate, fake Gtid_list) or is a heartbeat: such events are not
// part of the source's binlog and are never written to relay files.
func (h eventHeader) artificial() bool {
	switch h.Type {
	case replication.HEARTBEAT_EVENT, replication.HEARTBEAT_LOG_EVENT_V2:
		return true
	case replication.FORMAT_DESCRIPTION_EVENT:
		return false
	}
	return h.Flags&replication.LOG_EVENT_ARTIFICIAL_F != 0 || h.LogPos == 0
}

// validCRC reports whether raw ends with the CRC32 of the rest.
func validCRC(raw []byte) bool {
	if len(raw) < headerSize+checksumSize {
		return false
	}
	n := len(raw) - checksumSize
	return crc32.ChecksumIEEE(raw[:n]) == binary.LittleEndian.Uint32(raw[n:])
}

// body returns the event's body without header and, when the file's format
// says so, without the trailing checksum.
func body(raw []byte, checksum bool) []byte {
	b := raw[headerSize:]
	if checksum && len(b) >= checksumSize {
		b = b[:len(b)-checksumSize]
	}
	return b
}

// parseRotate returns the next file name and position of a rotate event.
// Fake rotate events may or may not carry a checksum whatever the file
// format says, so a trailing checksum is detected by verifying it.
func parseRotate(raw []byte) (name string, pos uint64, err error) {
	b := body(raw, validCRC(raw))
	if len(b) < 8 {
		return "", 0, fmt.Errorf("relay: rotate event of %d bytes is too short", len(raw))
	}
	return string(b[8:]), binary.LittleEndian.Uint64(b), nil
}

// fdeChecksum reports whether the format description event declares CRC32
// checksums.
func fdeChecksum(raw []byte) (bool, error) {
	var fde replication.FormatDescriptionEvent
	const minBody = 2 + 50 + 4 + 1 // binlog version, server version, create time, header length
	if len(raw)-headerSize < minBody {
		return false, fmt.Errorf("relay: format description event of %d bytes is too short", len(raw))
	}
	if err := decodeGuarded(func() error { return fde.Decode(raw[headerSize:]) }); err != nil {
		return false, fmt.Errorf("relay: decode format description event: %w", err)
	}
	return fde.ChecksumAlgorithm == replication.BINLOG_CHECKSUM_ALG_CRC32, nil
}

// queryText returns the statement of a query event.
func queryText(b []byte) (string, bool) {
	const post = 13 // thread id 4, exec time 4, schema length 1, error code 2, status vars length 2
	if len(b) < post {
		return "", false
	}
	schemaLen := int(b[8])
	varsLen := int(binary.LittleEndian.Uint16(b[11:]))
	start := post + varsLen + schemaLen + 1
	if start > len(b) {
		return "", false
	}
	return string(b[start:]), true
}

// gtid is one transaction id: MariaDB's domain-server-sequence or MySQL's
// uuid:gno.
type gtid struct {
	mariadb  bool
	domain   uint32
	serverID uint32
	seq      uint64
	sid      uuid.UUID
	gno      int64
}

func (g gtid) String() string {
	if g.mariadb {
		return fmt.Sprintf("%d-%d-%d", g.domain, g.serverID, g.seq)
	}
	return fmt.Sprintf("%s:%d", g.sid, g.gno)
}

// txnTracker follows transaction (event group) boundaries through a stream
// of non-artificial events. A group starts with a GTID event or a BEGIN
// query and ends with an XID event, a COMMIT/ROLLBACK query, or - for
// groups without BEGIN - with their first other query (DDL).
type txnTracker struct {
	checksum bool
	inGroup  bool
	begun    bool
	id       *gtid
}

// step classifies one event. boundary reports whether no group is open
// after it; done is the id of a group that ended with it, if it had one.
func (t *txnTracker) step(h eventHeader, raw []byte) (boundary bool, done *gtid) {
	b := body(raw, t.checksum)
	switch h.Type {
	case replication.FORMAT_DESCRIPTION_EVENT:
		// A new file: any open group was cut (only possible in a damaged file).
		t.reset()
		return true, nil
	case replication.MARIADB_GTID_EVENT:
		t.reset()
		t.inGroup = true
		if len(b) >= 13 {
			t.id = &gtid{mariadb: true, seq: binary.LittleEndian.Uint64(b), domain: binary.LittleEndian.Uint32(b[8:]), serverID: h.ServerID}
		}
		return false, nil
	case replication.GTID_EVENT:
		t.reset()
		t.inGroup = true
		if len(b) >= 25 {
			if sid, err := uuid.FromBytes(b[1:17]); err == nil {
				t.id = &gtid{sid: sid, gno: int64(binary.LittleEndian.Uint64(b[17:]))}
			}
		}
		return false, nil
	case replication.ANONYMOUS_GTID_EVENT, replication.GTID_TAGGED_LOG_EVENT:
		t.reset()
		t.inGroup = true
		return false, nil
	case replication.XID_EVENT, replication.XA_PREPARE_LOG_EVENT:
		return t.end()
	case replication.QUERY_EVENT, replication.MARIADB_QUERY_COMPRESSED_EVENT:
		q, _ := queryText(b)
		if h.Type == replication.MARIADB_QUERY_COMPRESSED_EVENT {
			q = ""
		}
		switch q = strings.ToUpper(strings.TrimSpace(q)); {
		case q == "BEGIN" || strings.HasPrefix(q, "XA START"):
			t.inGroup, t.begun = true, true
			return false, nil
		case q == "COMMIT" || q == "ROLLBACK" || strings.HasPrefix(q, "XA COMMIT") || strings.HasPrefix(q, "XA ROLLBACK"):
			return t.end()
		case !t.begun:
			return t.end() // DDL or another statement that is its own group
		}
		return false, nil
	}
	if t.inGroup {
		return false, nil
	}
	return true, nil
}

func (t *txnTracker) end() (bool, *gtid) {
	id := t.id
	t.reset()
	return true, id
}

func (t *txnTracker) reset() { t.inGroup, t.begun, t.id = false, false, nil }

// gtidListOf returns the GTID set announced at the start of a file by a
// MariaDB Gtid_list or a MySQL Previous_gtids event; ok is false for other
// events.
func gtidListOf(h eventHeader, raw []byte, checksum bool) (s *gtidSet, ok bool, err error) {
	b := body(raw, checksum)
	switch h.Type {
	case replication.MARIADB_GTID_LIST_EVENT:
		// go-mysql allocates the count the event gives before reading it.
		if len(b) < 4 || uint64(len(b)-4) < uint64(binary.LittleEndian.Uint32(b)&(1<<28-1))*16 {
			return nil, false, fmt.Errorf("relay: Gtid_list event of %d bytes is shorter than its count says", len(raw))
		}
		var e replication.MariadbGTIDListEvent
		if err := decodeGuarded(func() error { return e.Decode(b) }); err != nil {
			return nil, false, fmt.Errorf("relay: decode Gtid_list event: %w", err)
		}
		s := newGTIDSet(true)
		for _, g := range e.GTIDs {
			s.add(gtid{mariadb: true, domain: g.DomainID, serverID: g.ServerID, seq: g.SequenceNumber})
		}
		return s, true, nil
	case replication.PREVIOUS_GTIDS_EVENT:
		if len(b) < 8 {
			return nil, false, fmt.Errorf("relay: Previous_gtids event of %d bytes is too short", len(raw))
		}
		// go-mysql allocates the count the event gives before reading it; a
		// set takes at least 24 bytes (uuid, interval count).
		count := binary.LittleEndian.Uint64(b)
		if b[7] == 1 { // tagged format: the count is in bytes 1..6
			count = binary.LittleEndian.Uint64(append(append([]byte{}, b[1:7]...), 0, 0))
		}
		if count > uint64(len(b)-8)/24 {
			return nil, false, fmt.Errorf("relay: Previous_gtids event of %d bytes is shorter than its count says", len(raw))
		}
		var e replication.PreviousGTIDsEvent
		if err := decodeGuarded(func() error { return e.Decode(b) }); err != nil {
			return nil, false, fmt.Errorf("relay: decode Previous_gtids event: %w", err)
		}
		s, err := parseGTIDSet(false, e.GTIDSets)
		if err != nil {
			return nil, false, err
		}
		return s, true, nil
	}
	return nil, false, nil
}

// decodeGuarded runs a go-mysql Decode on bytes read from a relay file,
// which may be damaged: go-mysql indexes them without bounds checks, so a
// panic there becomes an error here.
func decodeGuarded(decode func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed event: %v", r)
		}
	}()
	return decode()
}

// errPartial is returned by readEvent when the file ends inside an event.
var errPartial = errors.New("relay: file ends inside an event")

// errBadHeader is returned by readEvent when an event header cannot be
// right (a size below the header's own): in a relay file's tail, a torn
// write (often zero-filled after a crash).
var errBadHeader = errors.New("relay: bad event header")

// readEvent reads one whole event from r into buf (reused). It returns
// io.EOF at a clean end and errPartial when the file ends inside the event.
func readEvent(r io.Reader, buf *bytes.Buffer) (eventHeader, []byte, error) {
	buf.Reset()
	n, err := io.CopyN(buf, r, headerSize)
	if err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return eventHeader{}, nil, io.EOF
		}
		if errors.Is(err, io.EOF) {
			return eventHeader{}, nil, errPartial
		}
		return eventHeader{}, nil, err
	}
	h := parseHeader(buf.Bytes())
	if h.Size < headerSize {
		return h, nil, fmt.Errorf("%w: size %d is below the header size", errBadHeader, h.Size)
	}
	if _, err := io.CopyN(buf, r, int64(h.Size-headerSize)); err != nil {
		if errors.Is(err, io.EOF) {
			return h, nil, errPartial
		}
		return h, nil, err
	}
	return h, buf.Bytes(), nil
}
