package relay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
	lastType   replication.EventType // type of the event that ends at end
	lastArtif  bool                  // that event is artificial
}

// rotated reports whether s is the scan of a whole file of size bytes: it
// parses to its end, which is the source's own (non-artificial) rotate event.
func (s fileScan) rotated(size int64) bool {
	return s.fdeEnd > 0 && s.end == size && s.lastType == replication.ROTATE_EVENT && !s.lastArtif
}

// namedScan is the scan of one file.
type namedScan struct {
	name string
	scan fileScan
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
			s.lastType, s.lastArtif = h.Type, h.artificial()
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

// recoverDir checks the files of the last subdirectory from the meta's to
// the last (see verifyFiles), truncates the last one left to the end of its
// last complete event group (removing files that hold no event after their
// header), reconciles relay.meta with it and returns where pulling resumes.
// mariadb selects the GTID flavor when no file tells it.
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
	whole, err := verifyFiles(dir, meta, hasMeta)
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
	chain := whole
	for i, c := range whole {
		if c.name == rec.file {
			chain = whole[:i] // the last file left was verified whole
		}
	}
	rec.gtid = executedAtEnd(append(chain, namedScan{rec.file, rec.scan}), set, meta, hasMeta)
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

// executedAtEnd is the GTID set executed at the end of the last of files,
// which follow each other from the meta's file on: at each file that names
// the set it starts with, that set plus its groups; before any, metaSet
// (the meta's) plus the groups the meta does not cover yet.
func executedAtEnd(files []namedScan, metaSet *gtidSet, meta Meta, hasMeta bool) *gtidSet {
	set := metaSet
	for _, f := range files {
		if f.scan.startSet != nil {
			set = f.scan.startSet.clone()
			for _, g := range f.scan.groups {
				set.add(g.id)
			}
			continue
		}
		for _, g := range f.scan.groups {
			if !hasMeta || meta.BinlogName != f.name || g.srcEnd > meta.BinlogPos {
				set.add(g.id)
			}
		}
	}
	return set
}

// verifyFiles checks the files of dir from the meta's file to the one
// before the last. The meta names a durable position, but the files after
// it were made durable later, in the background (see syncQueue): after a
// power loss any of their pages may be missing or zero-filled, not only a
// tail. A file before the last is whole when it parses to its end and ends
// with the source's rotate event. Every file after the first one that is
// not is removed, so that it becomes the last file, which recoverLastFile
// truncates to the end of its last complete event group, and pulling
// resumes in it (the source sends the rest again, byte for byte). It
// returns the scans of the files found whole, in order.
func verifyFiles(dir string, meta Meta, hasMeta bool) ([]namedScan, error) {
	if !hasMeta || meta.BinlogName == "" {
		return nil, nil
	}
	files, err := listFiles(dir)
	if err != nil {
		return nil, err
	}
	// The meta's file is missing when the purger removed it after it was
	// rotated out: the files after it are checked all the same.
	from := slices.IndexFunc(files, func(name string) bool {
		return binlog.Location{Name: name}.Compare(binlog.Location{Name: meta.BinlogName}) >= 0
	})
	if from < 0 {
		return nil, nil
	}
	var whole []namedScan
	for i := from; i < len(files)-1; i++ {
		path := filepath.Join(dir, files[i])
		s, err := scanFile(path)
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("relay: stat %s: %w", path, err)
		}
		if s.rotated(st.Size()) {
			whole = append(whole, namedScan{files[i], foldGroups(s)})
			continue
		}
		// recoverLastFile truncates it, as the last file.
		return whole, removeFiles(dir, files[i+1:])
	}
	return whole, nil
}

// foldGroups returns s with its groups added to the set it starts with, when
// it has one, so that a whole file's scan keeps the set at its end, not one
// entry per group (executedAtEnd gives the same set).
func foldGroups(s fileScan) fileScan {
	if s.startSet == nil {
		return s
	}
	set := s.startSet.clone()
	for _, g := range s.groups {
		set.add(g.id)
	}
	s.startSet, s.groups = set, nil
	return s
}

// removeFiles removes the files names of dir, last first, then makes the
// removal durable.
func removeFiles(dir string, names []string) error {
	for i := len(names) - 1; i >= 0; i-- {
		path := filepath.Join(dir, names[i])
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("relay: remove %s, which follows an incomplete file: %w", path, err)
		}
	}
	return fsutil.SyncDir(dir)
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
