package relay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/fsutil"
)

// fileScan is what a sequential parse of one relay file found.
type fileScan struct {
	fdeRaw     []byte
	fdeEnd     int64 // offset after the format description event; 0 when the file has none
	checksum   bool
	mariadb    bool
	end        int64 // offset after the last complete event group
	delta      int64 // source position = offset + delta, once deltaKnown
	deltaKnown bool
	startSet   *gtidSet // Gtid_list / Previous_gtids at the start of the file
	groups     []scannedGroup
}

// scannedGroup is a complete event group with an id.
type scannedGroup struct {
	id     gtid
	srcEnd uint32 // source position after the group
}

// scanFile parses path from the start and finds the end of its last
// complete event group. A damaged or partial tail is reported through end,
// not as an error.
func scanFile(path string) (fileScan, error) {
	f, err := os.Open(path)
	if err != nil {
		return fileScan{}, fmt.Errorf("relay: open %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	br := bufio.NewReaderSize(f, 1<<20)
	var s fileScan
	head := make([]byte, magicSize)
	if _, err := io.ReadFull(br, head); err != nil || !bytes.Equal(head, magic) {
		return s, nil
	}
	var buf bytes.Buffer
	h, raw, err := readEvent(br, &buf)
	if err != nil || h.Type != replication.FORMAT_DESCRIPTION_EVENT {
		return s, nil
	}
	if s.checksum, err = fdeChecksum(raw); err != nil {
		return s, nil
	}
	s.fdeRaw = bytes.Clone(raw)
	s.mariadb = strings.Contains(serverVersion(raw), "MariaDB")
	s.fdeEnd = magicSize + int64(h.Size)
	s.end = s.fdeEnd
	err = s.scanEvents(br, &buf, path)
	return s, err
}

// scanEvents parses the events after the format description event up to
// the first one that is missing, partial or damaged, recording the complete
// event groups, the offset delta and the start set. Only a read error of
// path is returned.
func (s *fileScan) scanEvents(br *bufio.Reader, buf *bytes.Buffer, path string) error {
	off := s.fdeEnd
	tr := txnTracker{checksum: s.checksum}
	for {
		h, raw, err := readEvent(br, buf)
		if err != nil {
			// io.EOF, a partial event or a header that cannot be right (a
			// torn, often zero-filled, tail): the file is good up to s.end.
			// Any other error is a read error.
			if errors.Is(err, io.EOF) || errors.Is(err, errPartial) || errors.Is(err, errBadHeader) {
				return nil
			}
			return fmt.Errorf("relay: read %s at %d: %w", path, off, err)
		}
		if s.checksum && !validCRC(raw) {
			return nil // a torn write: stop at the last good group
		}
		if foreignFlavor(h.Type, s.mariadb) {
			return nil // an event the file's server does not write: damage
		}
		start := int64(h.LogPos) - int64(h.Size)
		if s.deltaKnown && start != off+s.delta {
			return nil // not the event that belongs here: a torn or stray tail
		}
		if s.startSet == nil && !tr.inGroup {
			set, ok, err := gtidListOf(h, raw, s.checksum)
			if err != nil {
				return nil
			}
			if ok {
				s.startSet = set
			}
		}
		// The first good event after the format description fixes the
		// offset of the file in the source's binlog.
		if !s.deltaKnown {
			s.delta, s.deltaKnown = start-off, true
		}
		off += int64(h.Size)
		boundary, done := tr.step(h, raw)
		if boundary {
			s.end = off
			if done != nil {
				s.groups = append(s.groups, scannedGroup{id: *done, srcEnd: uint32(off + s.delta)})
			}
		}
	}
}

// foreignFlavor reports whether t is a GTID event of the other flavor than
// the file's (its format description's server version): MariaDB writes
// neither GTID nor Previous_gtids events, MySQL neither of MariaDB's.
func foreignFlavor(t replication.EventType, mariadb bool) bool {
	switch t {
	case replication.MARIADB_GTID_EVENT, replication.MARIADB_GTID_LIST_EVENT:
		return !mariadb
	case replication.GTID_EVENT, replication.PREVIOUS_GTIDS_EVENT:
		return mariadb
	}
	return false
}

// serverVersion returns the server version string of a format description
// event.
func serverVersion(fde []byte) string {
	b := fde[headerSize:]
	if len(b) < 2+50 {
		return ""
	}
	v := b[2 : 2+50]
	if i := bytes.IndexByte(v, 0); i >= 0 {
		v = v[:i]
	}
	return string(v)
}

// recovered is the relay's on-disk state after recovery.
type recovered struct {
	subs   []subdir
	sub    subdir // zero when the relay is empty
	file   string // last file of sub; "" when sub has none
	scan   fileScan
	resume binlog.Location // where pulling resumes; zero when sub has no file
	gtid   *gtidSet        // executed set at resume (or the meta's when no file)
}

// recoverDir checks the last file of the last subdirectory, truncates it to
// the end of its last complete event group (removing files that hold no
// event after their header), reconciles relay.meta with it and returns where
// pulling resumes. mariadb selects the GTID flavor when no file tells it.
func recoverDir(root string, mariadb bool) (recovered, error) {
	var rec recovered
	subs, err := readIndex(root)
	if err != nil {
		return rec, err
	}
	rec.subs = subs
	if len(subs) == 0 {
		return rec, nil
	}
	rec.sub = subs[len(subs)-1]
	dir := filepath.Join(root, rec.sub.Name)
	meta, hasMeta, err := readMeta(dir)
	if err != nil {
		return rec, err
	}
	if rec.file, rec.scan, err = recoverLastFile(dir, meta, hasMeta); err != nil {
		return rec, err
	}
	if rec.file != "" {
		mariadb = rec.scan.mariadb
		rec.resume = binlog.Location{Name: rec.file, Pos: uint32(rec.scan.end + rec.scan.delta)}
	}
	set, err := parseGTIDSet(mariadb, meta.BinlogGTID)
	if err != nil {
		return rec, fmt.Errorf("relay: meta of %s: %w", rec.sub.Name, err)
	}
	if rec.file == "" {
		rec.gtid = set
		return rec, nil
	}
	rec.gtid = executedAtEnd(rec.scan, set, rec.file, meta, hasMeta)
	m := Meta{BinlogName: rec.resume.Name, BinlogPos: rec.resume.Pos, BinlogGTID: rec.gtid.String()}
	if !hasMeta || m != meta {
		if err := writeMeta(dir, m); err != nil {
			return rec, err
		}
	}
	return rec, nil
}

// recoverLastFile finds the last file of dir that holds an event after its
// header, removes the files after it that do not (they are pulled again from
// their start), and truncates it to the end of its last complete event
// group. name is "" when no such file is left.
func recoverLastFile(dir string, meta Meta, hasMeta bool) (name string, s fileScan, err error) {
	files, err := listFiles(dir)
	if err != nil {
		return "", fileScan{}, err
	}
	for ; len(files) > 0; files = files[:len(files)-1] {
		name := files[len(files)-1]
		path := filepath.Join(dir, name)
		s, err := scanFile(path)
		if err != nil {
			return "", fileScan{}, err
		}
		if s.fdeEnd > 0 && !s.deltaKnown && hasMeta && meta.BinlogName == name && int64(meta.BinlogPos) >= s.fdeEnd {
			// Only the format description, but the meta says where the file
			// stands in the source (an earlier recovery cut its first, torn
			// group): keep it, as that recovery did.
			s.delta, s.deltaKnown = int64(meta.BinlogPos)-s.fdeEnd, true
		}
		if s.fdeEnd > 0 && s.deltaKnown {
			if err := truncateTo(path, s.end); err != nil {
				return "", fileScan{}, err
			}
			return name, s, nil
		}
		// Nothing but (part of) a header: pull the file again from its start.
		if err := os.Remove(path); err != nil {
			return "", fileScan{}, fmt.Errorf("relay: remove incomplete file %s: %w", path, err)
		}
		if err := fsutil.SyncDir(dir); err != nil {
			return "", fileScan{}, err
		}
	}
	return "", fileScan{}, nil
}

// executedAtEnd is the GTID set executed at the end of the recovered file
// s: the set the file starts with plus its groups, or, when the file names
// none, metaSet (the meta's) plus the groups the meta does not cover yet.
func executedAtEnd(s fileScan, metaSet *gtidSet, file string, meta Meta, hasMeta bool) *gtidSet {
	if s.startSet != nil {
		set := s.startSet.clone()
		for _, g := range s.groups {
			set.add(g.id)
		}
		return set
	}
	for _, g := range s.groups {
		if !hasMeta || meta.BinlogName != file || g.srcEnd > meta.BinlogPos {
			metaSet.add(g.id)
		}
	}
	return metaSet
}

// truncateTo cuts path to size bytes when it is longer, with fsync.
func truncateTo(path string, size int64) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("relay: stat %s: %w", path, err)
	}
	if st.Size() <= size {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("relay: open %s: %w", path, err)
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("relay: truncate %s to %d bytes: %w", path, size, err)
	}
	return nil
}
