package relay

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
)

// FuzzRelayMeta reads fuzzed relay.meta files: never a panic; an error
// names the file and says what to do; a meta that reads writes and reads
// back to itself.
func FuzzRelayMeta(f *testing.F) {
	for _, s := range []string{
		`{"binlog-name":"mariadb-bin.000003","binlog-pos":1234,"binlog-gtid":"0-1-900,1-2-5"}`,
		`{"binlog-name":"mysql-bin.000001","binlog-pos":4,"binlog-gtid":"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"}`,
		`{}`, ``, `null`, `[]`, `{"binlog-pos":-1}`, `{"binlog-pos":4294967296}`, `{"binlog-name":"\ud800"}`,
		`{"binlog-name":"a"}{"binlog-name":"b"}`, `{"binlog-pos":1e2}`, "\x00\x00\x00",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, metaFile), data, 0o600); err != nil {
			t.Fatal(err)
		}
		m, ok, err := readMeta(dir)
		if err != nil {
			if !strings.Contains(err.Error(), filepath.Join(dir, metaFile)) || !strings.Contains(err.Error(), "remove it") {
				t.Fatalf("error %q does not name the file and the remedy", err)
			}
			return
		}
		if !ok {
			t.Fatal("an existing meta file reads as missing")
		}
		if err := writeMeta(dir, m); err != nil {
			t.Fatal(err)
		}
		back, ok, err := readMeta(dir)
		if err != nil || !ok || back != m {
			t.Fatalf("meta %+v reads back as %+v (%v, %v)", m, back, ok, err)
		}
	})
}

// FuzzGTIDSet parses GTID sets of both flavors (relay.meta's binlog-gtid,
// a task's meta): never a panic; a parsed set prints and parses back to
// the same text, contains itself and its clone.
func FuzzGTIDSet(f *testing.F) {
	for _, s := range []string{"0-1-900", "0-1-900,1-2-5", " 0-1-1 , 0-2-7 ", "", "0-1", "a-b-c", "4294967296-1-1", "0-1-18446744073709551615",
		"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7-9,3e11fa47-71ca-11e1-9e33-c80aa9429563:1",
		"3e11fa47-71ca-11e1-9e33-c80aa9429562:5-1", "3e11fa47-71ca-11e1-9e33-c80aa9429562:0", "x:1", ",,", "0-1-1,"} {
		f.Add(true, s)
		f.Add(false, s)
	}
	f.Fuzz(func(t *testing.T, mariadb bool, s string) {
		set, err := parseGTIDSet(mariadb, s)
		if err != nil {
			return
		}
		text := set.String()
		back, err := parseGTIDSet(mariadb, text)
		if err != nil {
			t.Fatalf("parseGTIDSet(%q) prints %q, which does not parse: %v", s, text, err)
		}
		if back.String() != text {
			t.Fatalf("parseGTIDSet(%q): %q reads back as %q", s, text, back.String())
		}
		if c := set.clone(); !set.containsSet(c) || !c.containsSet(set) || c.String() != text {
			t.Fatalf("set %q and its clone %q do not contain each other", text, c.String())
		}
	})
}

// FuzzRelayIndex reads fuzzed server-uuid.index files: never a panic; every
// entry read has a name that is its upstream id and suffix, and the name
// the relay would give them parses back to them.
func FuzzRelayIndex(f *testing.F) {
	for _, s := range []string{"3e11fa47-71ca-11e1-9e33-c80aa9429562.000001\n", "a.000001\na.000002\n", "a.1", "\n\n", ".000001", "a.", "a.0", "a.-1",
		"a.99999999999999999999", "a.b.000003\r\n", "a.+1"} {
		f.Add([]byte(s))
	}
	root := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(root, indexFile), data, 0o600); err != nil {
			t.Fatal(err)
		}
		subs, err := readIndex(root)
		if err != nil {
			if !strings.Contains(err.Error(), "index entry") {
				t.Fatalf("error %q does not say which entry", err)
			}
			return
		}
		for _, sd := range subs {
			if sd.Suffix <= 0 || sd.UUID == "" || !strings.HasPrefix(sd.Name, sd.UUID+".") {
				t.Fatalf("entry %+v of %q", sd, data)
			}
			again, err := parseSubdir(subdirName(sd.UUID, sd.Suffix))
			if err != nil || again.UUID != sd.UUID || again.Suffix != sd.Suffix {
				t.Fatalf("entry %+v: its name %q parses as %+v, %v", sd, subdirName(sd.UUID, sd.Suffix), again, err)
			}
		}
	})
}

// relayFileBuilder writes a MariaDB relay file with CRC32 checksums,
// recording the offset after every event group and the GTID set there.
type relayFileBuilder struct {
	buf        []byte
	boundaries []int // offsets after which no group is open
	sets       []string
}

func (b *relayFileBuilder) event(typ replication.EventType, serverID uint32, body []byte) {
	size := headerSize + len(body) + checksumSize
	h := make([]byte, headerSize)
	binary.LittleEndian.PutUint32(h[0:], 1700000000)
	h[4] = byte(typ)
	binary.LittleEndian.PutUint32(h[5:], serverID)
	binary.LittleEndian.PutUint32(h[9:], uint32(size))
	binary.LittleEndian.PutUint32(h[13:], uint32(len(b.buf)+size))
	ev := append(h, body...)
	ev = binary.LittleEndian.AppendUint32(ev, crc32.ChecksumIEEE(ev))
	b.buf = append(b.buf, ev...)
}

func (b *relayFileBuilder) boundary(set string) {
	b.boundaries = append(b.boundaries, len(b.buf))
	b.sets = append(b.sets, set)
}

func mariaGTIDBody(seq uint64, domain uint32) []byte {
	body := binary.LittleEndian.AppendUint64(nil, seq)
	body = binary.LittleEndian.AppendUint32(body, domain)
	return append(body, 0)
}

func queryBody(schema, query string) []byte {
	body := make([]byte, 13)
	body[8] = byte(len(schema))
	body = append(body, schema...)
	body = append(body, 0)
	return append(body, query...)
}

// validRelayFile is a MariaDB relay file: header, format description,
// Gtid_list 0-1-10, then DDL and BEGIN...COMMIT (XID) groups in domains 0
// and 1.
func validRelayFile() *relayFileBuilder {
	b := newMariaFile()
	b.event(replication.MARIADB_GTID_LIST_EVENT, 1, gtidListBody(0, 1, 10))
	b.boundary("0-1-10")
	b.event(replication.MARIADB_GTID_EVENT, 1, mariaGTIDBody(11, 0))
	b.event(replication.QUERY_EVENT, 1, queryBody("db", "CREATE TABLE t (a INT)"))
	b.boundary("0-1-11")
	b.event(replication.MARIADB_GTID_EVENT, 1, mariaGTIDBody(12, 0))
	b.event(replication.QUERY_EVENT, 1, queryBody("db", "BEGIN"))
	b.event(replication.TABLE_MAP_EVENT, 1, bytes.Repeat([]byte{1}, 20))
	b.event(replication.WRITE_ROWS_EVENTv1, 1, bytes.Repeat([]byte{2}, 30))
	b.event(replication.XID_EVENT, 1, binary.LittleEndian.AppendUint64(nil, 77))
	b.boundary("0-1-12")
	b.event(replication.MARIADB_GTID_EVENT, 2, mariaGTIDBody(3, 1))
	b.event(replication.QUERY_EVENT, 2, queryBody("db", "BEGIN"))
	b.event(replication.QUERY_EVENT, 2, queryBody("db", "INSERT INTO t VALUES (1)"))
	b.event(replication.QUERY_EVENT, 2, queryBody("db", "COMMIT"))
	b.boundary("0-1-12,1-2-3")
	return b
}

// gtidListBody is the body of a Gtid_list event of one GTID.
func gtidListBody(domain, serverID uint32, seq uint64) []byte {
	list := binary.LittleEndian.AppendUint32(nil, 1)
	list = binary.LittleEndian.AppendUint32(list, domain)
	list = binary.LittleEndian.AppendUint32(list, serverID)
	return binary.LittleEndian.AppendUint64(list, seq)
}

// newMariaFile starts a MariaDB relay file: the magic and a format
// description event with CRC32 checksums.
func newMariaFile() *relayFileBuilder {
	b := &relayFileBuilder{buf: append([]byte(nil), magic...)}
	fde := binary.LittleEndian.AppendUint16(nil, 4)
	version := make([]byte, 50)
	copy(version, "10.11.6-MariaDB-log")
	fde = append(fde, version...)
	fde = binary.LittleEndian.AppendUint32(fde, 1700000000)
	fde = append(fde, headerSize)
	fde = append(fde, bytes.Repeat([]byte{8}, 40)...) // post-header lengths
	fde = append(fde, replication.BINLOG_CHECKSUM_ALG_CRC32)
	b.event(replication.FORMAT_DESCRIPTION_EVENT, 1, fde)
	return b
}

// fixCRCs rewrites the checksum of every event whose header gives a size
// that fits in data, so that fuzzed event bodies get past the CRC check.
func fixCRCs(data []byte) {
	off := magicSize
	for off+headerSize <= len(data) {
		size := int(binary.LittleEndian.Uint32(data[off+9:]))
		if size < headerSize+checksumSize || off+size > len(data) {
			return
		}
		binary.LittleEndian.PutUint32(data[off+size-checksumSize:], crc32.ChecksumIEEE(data[off:off+size-checksumSize]))
		off += size
	}
}

// FuzzRelayRecover runs crash recovery on a relay file whose tail was cut,
// extended with fuzzed bytes and/or had one byte changed (optionally with
// checksums made valid again). Properties: never a panic nor an error (a
// damaged tail is cut, not fatal); the file left is a prefix of what was
// there, or is removed; where pulling resumes and relay.meta agree with it;
// on an undamaged prefix nothing before the last whole group is lost and
// the GTID set is exactly that of the groups kept; a second recovery
// changes nothing. The same file as the one before the last, named by the
// meta, is recovered the same way, and the last file is removed.
func FuzzRelayRecover(f *testing.F) {
	valid := validRelayFile()
	n := len(valid.buf)
	f.Add(uint16(n), []byte(nil), uint16(0), byte(0), false)
	for _, cut := range []int{0, 3, 4, 10, 30, n - 1, n - 5, valid.boundaries[0] + 3, valid.boundaries[1], valid.boundaries[2] - 1} {
		f.Add(uint16(cut), []byte(nil), uint16(0), byte(0), false)
	}
	f.Add(uint16(n), make([]byte, 64), uint16(0), byte(0), false)               // a zero-filled tail (torn write)
	f.Add(uint16(n), []byte{0xff, 0xff, 0xff}, uint16(0), byte(0), false)       // a partial header
	f.Add(uint16(n), valid.buf[valid.boundaries[1]:], uint16(0), byte(0), true) // groups repeated, positions wrong
	f.Add(uint16(n), []byte(nil), uint16(9+4), byte(0xff), true)                // FDE size changed
	f.Add(uint16(n), []byte(nil), uint16(valid.boundaries[0]-20), byte(0x40), true)
	f.Add(uint16(n), []byte(nil), uint16(valid.boundaries[1]+4), byte(0x10), false) // damaged GTID event type
	rotated := validRelayFile()
	rotated.event(replication.ROTATE_EVENT, 1, append(binary.LittleEndian.AppendUint64(nil, magicSize), "mariadb-bin.000002"...))
	f.Add(uint16(n), rotated.buf[n:], uint16(0), byte(0), false)                   // a whole file, ending with its rotate event
	f.Add(uint16(n), rotated.buf[n:len(rotated.buf)-1], uint16(0), byte(0), false) // its rotate event torn
	f.Fuzz(func(t *testing.T, cut uint16, tail []byte, at uint16, xor byte, fix bool) {
		data := append(append([]byte(nil), valid.buf[:min(int(cut), n)]...), tail...)
		if xor != 0 && len(data) > 0 {
			data[int(at)%len(data)] ^= xor
		}
		if fix {
			fixCRCs(data)
		}
		intact := xor == 0 && !fix && len(tail) == 0 // an untouched prefix of the valid file
		root := t.TempDir()
		sub := "3e11fa47-71ca-11e1-9e33-c80aa9429562.000001"
		name := "mariadb-bin.000001"
		path := filepath.Join(root, sub, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, indexFile), []byte(sub+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		rec, err := recoverDir(root, true)
		if err != nil {
			t.Fatalf("recovery of a damaged tail fails: %v\nfile (%d bytes) %x", err, len(data), data)
		}
		got, rerr := os.ReadFile(path)
		switch {
		case rerr != nil && !os.IsNotExist(rerr):
			t.Fatal(rerr)
		case rerr != nil:
			if rec.file != "" {
				t.Fatalf("file %s removed but recovery resumes in it", rec.file)
			}
		default:
			if rec.file != name || int64(len(got)) != rec.scan.end || !bytes.Equal(got, data[:len(got)]) {
				t.Fatalf("left %d bytes (prefix %v), recovered file %q end %d", len(got), bytes.Equal(got, data[:min(len(got), len(data))]), rec.file, rec.scan.end)
			}
			if want := uint32(rec.scan.end + rec.scan.delta); rec.resume.Name != name || rec.resume.Pos != want {
				t.Fatalf("resume %v, want %s:%d", rec.resume, name, want)
			}
			m, ok, err := readMeta(filepath.Join(root, sub))
			if err != nil || !ok || m.BinlogName != rec.resume.Name || m.BinlogPos != rec.resume.Pos || m.BinlogGTID != rec.gtid.String() {
				t.Fatalf("meta %+v (%v, %v) disagrees with resume %v gtid %q", m, ok, err, rec.resume, rec.gtid)
			}
		}
		if intact {
			// The last whole group at or before the cut is kept, with its set.
			last, set := 0, ""
			for i, b := range valid.boundaries {
				if b <= len(data) {
					last, set = b, valid.sets[i]
				}
			}
			if last == 0 && rec.file != "" {
				t.Fatalf("cut at %d, inside the first group: file kept, end %d", len(data), rec.scan.end)
			}
			if last > 0 {
				if rec.file != name || rec.scan.end != int64(last) {
					t.Fatalf("cut at %d: recovered end %d, want the group boundary %d", len(data), rec.scan.end, last)
				}
				if rec.gtid.String() != set {
					t.Fatalf("cut at %d: GTID set %q, want %q", len(data), rec.gtid.String(), set)
				}
			}
		}
		checkBeforeLast(t, data, rec)
		// Recovery is idempotent.
		again, err := recoverDir(root, true)
		if err != nil {
			t.Fatalf("second recovery: %v", err)
		}
		if again.file != rec.file || again.resume != rec.resume || again.scan.end != rec.scan.end || again.gtid.String() != rec.gtid.String() {
			t.Fatalf("second recovery differs: %s %v %d %q, first %s %v %d %q", again.file, again.resume, again.scan.end, again.gtid,
				rec.file, rec.resume, rec.scan.end, rec.gtid)
		}
	})
}

// checkBeforeLast recovers data as the file before the last, which the
// meta names at its start, and checks that recovery resumes as it did with
// data alone (want) and removed the last file, unless data is a whole file.
func checkBeforeLast(t *testing.T, data []byte, want recovered) {
	t.Helper()
	root := t.TempDir()
	sub := "mariadb-1-0.000001"
	dir := filepath.Join(root, sub)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, indexFile), []byte(sub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	first, last := filepath.Join(dir, "mariadb-bin.000001"), filepath.Join(dir, "mariadb-bin.000002")
	if err := os.WriteFile(first, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(last, validRelayFile().buf, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeMeta(dir, Meta{BinlogName: "mariadb-bin.000001", BinlogPos: magicSize}); err != nil {
		t.Fatal(err)
	}
	if s, err := scanFile(first); err != nil || s.rotated(int64(len(data))) {
		return // whole (or unreadable, which the first recovery reported)
	}
	rec, err := recoverDir(root, true)
	if err != nil {
		t.Fatalf("recovery of a damaged file before the last fails: %v", err)
	}
	if _, err := os.Stat(last); !os.IsNotExist(err) {
		t.Fatalf("the file after a damaged one is still there (%v)", err)
	}
	if rec.file != want.file || rec.resume.Name != want.resume.Name || rec.resume.Pos != want.resume.Pos ||
		rec.scan.end != want.scan.end || rec.gtid.String() != want.gtid.String() {
		t.Fatalf("as the file before the last: %s %v %d %q; as the only file: %s %v %d %q", rec.file, rec.resume, rec.scan.end, rec.gtid,
			want.file, want.resume, want.scan.end, want.gtid)
	}
}
