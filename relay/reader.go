package relay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
)

// Reader reads the relay for one consumer (a sync unit, a stream task). It
// implements binlog.StreamOpener. Each Open replaces the stream the Reader
// opened before; the current stream's file is registered with the relay,
// so the purger keeps it and every later file. Close unregisters it.
type Reader struct {
	relay *Relay
	name  string

	mu     sync.Mutex // guards the fields below
	cur    *stream
	closed bool
}

var _ binlog.StreamOpener = (*Reader)(nil)

// NewReader returns a reader named name (shown when it blocks a purge).
func (r *Relay) NewReader(name string) *Reader { return &Reader{relay: r, name: name} }

// Name is the reader's name.
func (rd *Reader) Name() string { return rd.name }

// Open starts a stream at loc: at the first transaction not contained in
// loc.GTID when it is set and the source uses GTID (enable-gtid) or loc has
// no file name, else at loc.Name:loc.Pos (a transaction boundary; the
// newest relay subdirectory holding that file name). A zero loc starts at
// the oldest relay file. The stream first yields a rotate event (artificial
// flag, log position 0) naming the file and the file's format description
// event, and does so again whenever it moves to the next file.
func (rd *Reader) Open(ctx context.Context, loc binlog.Location) (binlog.Streamer, error) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.closed {
		return nil, errs.New(CodeReaderClosed, false, "relay reader %q is closed", rd.name)
	}
	if rd.cur != nil {
		rd.cur.close()
		rd.cur = nil
	}
	s := &stream{rd: rd, relay: rd.relay, parser: replication.NewBinlogParser()}
	s.parser.SetVerifyChecksum(true)
	// Decode values exactly as a direct binlog dump does for consumers
	// (see binlog.Streamer), so relay and source paths yield equal rows.
	s.parser.SetUseDecimal(true)
	s.parser.SetParseTime(false)
	s.parser.SetTimestampStringLocation(time.UTC)
	if err := s.position(ctx, loc); err != nil {
		s.close()
		return nil, err
	}
	rd.cur = s
	return s, nil
}

// Close closes the current stream and unregisters the reader; streams it
// returned fail from then on.
func (rd *Reader) Close() {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	rd.closed = true
	if rd.cur != nil {
		rd.cur.close()
		rd.cur = nil
	}
}

// stream is one positioned read of the relay.
type stream struct {
	rd     *Reader
	relay  *Relay
	parser *replication.BinlogParser

	mu       sync.Mutex // guards the fields below; held while reading, not while waiting
	closed   bool
	file     relayFile
	f        *os.File
	br       *bufio.Reader
	off      int64
	checksum bool
	mariadb  bool
	tracker  txnTracker
	queue    []*replication.BinlogEvent
	filter   *gtidSet // GTID mode: groups already seen
	skipping bool
	buf      bytes.Buffer
}

func (s *stream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.f != nil {
		_ = s.f.Close()
		s.f = nil
	}
	s.release()
	s.relay.mu.Lock()
	delete(s.relay.readers, s)
	s.relay.broadcast()
	s.relay.mu.Unlock()
}

// position finds the file and offset to start at.
func (s *stream) position(_ context.Context, loc binlog.Location) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	files, err := allFiles(s.relay.cfg.Dir)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return errs.New(CodePositionNotFound, true, "relay of source %q has no file yet; retry once it has pulled from the source", s.relay.source)
	}
	useGTID := loc.GTID != "" && (s.relay.cfg.Source.EnableGTID || loc.Name == "")
	switch {
	case useGTID:
		return s.positionGTID(files, loc.GTID)
	case loc.Name == "":
		return s.openFile(files[0], 0)
	}
	f, ok := findFile(files, loc.Name)
	if !ok {
		oldest := files[0]
		if (binlog.Location{Name: loc.Name}).Compare(binlog.Location{Name: oldest.Name}) < 0 {
			return errs.New(CodePositionPurged, false,
				"relay of source %q no longer has %s (oldest relay file: %s): it was purged; start the consumer from a later position",
				s.relay.source, loc, oldest.Name)
		}
		return errs.New(CodePositionNotFound, true, "relay of source %q has no file %s (yet); newest relay file: %s",
			s.relay.source, loc.Name, files[len(files)-1].Name)
	}
	return s.openFile(f, loc.Pos)
}

func (s *stream) positionGTID(files []relayFile, text string) error {
	mariadb := !strings.Contains(text, ":")
	req, err := parseGTIDSet(mariadb, text)
	if err != nil {
		return errs.New(CodePositionNotFound, false, "relay of source %q: %w", s.relay.source, err)
	}
	start := 0
	for i, f := range files {
		set, ok, err := fileStartSet(f.Path)
		if err != nil || !ok || set.mariadb != mariadb {
			continue
		}
		if !req.containsSet(set) {
			if i == 0 {
				return errs.New(CodePositionPurged, false,
					"relay of source %q starts at GTID set %s in %s, after the requested %s: the transactions between were purged or never relayed",
					s.relay.source, set, f.Name, text)
			}
			break
		}
		start = i
	}
	s.filter = req
	return s.openFile(files[start], 0)
}

// fileStartSet returns the GTID set a file announces at its start.
func fileStartSet(path string) (*gtidSet, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = f.Close() }()
	br := bufio.NewReader(f)
	head := make([]byte, magicSize)
	if _, err := io.ReadFull(br, head); err != nil {
		return nil, false, err
	}
	var buf bytes.Buffer
	h, raw, err := readEvent(br, &buf)
	if err != nil || h.Type != replication.FORMAT_DESCRIPTION_EVENT {
		return nil, false, err
	}
	checksum, err := fdeChecksum(raw)
	if err != nil {
		return nil, false, err
	}
	for range 4 {
		h, raw, err := readEvent(br, &buf)
		if err != nil {
			return nil, false, nil
		}
		if set, ok, err := gtidListOf(h, raw, checksum); ok || err != nil {
			return set, ok, err
		}
	}
	return nil, false, nil
}

// openFile opens f and positions at source position pos (0: the first
// event after the format description event); s.mu is held.
func (s *stream) openFile(f relayFile, pos uint32) error {
	if s.f != nil {
		_ = s.f.Close()
		s.f = nil
	}
	fh, err := os.Open(f.Path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errs.New(CodePositionPurged, false, "relay of source %q: file %s was purged", s.relay.source, f.Name)
		}
		return errs.New(CodePositionNotFound, true, "relay of source %q: open %s: %w", s.relay.source, f.Name, err)
	}
	s.f, s.file = fh, f
	br := s.reader()
	br.Reset(fh)
	head := make([]byte, magicSize)
	if _, err := io.ReadFull(br, head); err != nil || !bytes.Equal(head, magic) {
		return errs.New(CodePositionNotFound, true, "relay of source %q: %s is not a binlog file (yet)", s.relay.source, f.Name)
	}
	h, raw, err := readEvent(br, &s.buf)
	if err != nil || h.Type != replication.FORMAT_DESCRIPTION_EVENT {
		return errs.New(CodePositionNotFound, true, "relay of source %q: %s has no complete format description event (yet)", s.relay.source, f.Name)
	}
	fde := bytes.Clone(raw)
	if s.checksum, err = fdeChecksum(fde); err != nil {
		return errs.New(CodePositionNotFound, false, "relay of source %q: %s: %w", s.relay.source, f.Name, err)
	}
	s.mariadb = strings.Contains(serverVersion(fde), "MariaDB")
	if s.mariadb {
		s.parser.SetFlavor("mariadb")
	} else {
		s.parser.SetFlavor("mysql")
	}
	s.tracker = txnTracker{checksum: s.checksum}
	s.skipping = false
	s.off = magicSize + int64(h.Size)
	startPos := uint64(magicSize)
	if pos > uint32(s.off) {
		off, err := s.offsetOf(br, pos)
		if err != nil {
			return err
		}
		s.off, startPos = off, uint64(pos)
	}
	if _, err := fh.Seek(s.off, io.SeekStart); err != nil {
		return errs.New(CodePositionNotFound, true, "relay of source %q: seek %s: %w", s.relay.source, f.Name, err)
	}
	br.Reset(fh)
	fdeEv, err := s.parser.Parse(fde)
	if err != nil {
		return errs.New(CodePositionNotFound, false, "relay of source %q: parse the format description event of %s: %w", s.relay.source, f.Name, err)
	}
	s.queue = append(s.queue, fakeRotate(f.Name, startPos), fdeEv)
	s.relay.mu.Lock()
	s.relay.readers[s] = readerPos{reader: s.rd.name, file: f}
	s.relay.mu.Unlock()
	return nil
}

// offsetOf is the offset of source position pos in the file s just opened,
// whose first event after the header br is at (s.off): that event's offset
// delta holds for the whole file (see doc.go). s.mu is held.
func (s *stream) offsetOf(br *bufio.Reader, pos uint32) (int64, error) {
	f := s.file
	h, _, err := readEvent(br, &s.buf)
	if err != nil {
		return 0, errs.New(CodePositionNotFound, true, "relay of source %q: %s:%d is not in the relay (yet)", s.relay.source, f.Name, pos)
	}
	delta := int64(h.LogPos) - int64(h.Size) - s.off
	target := int64(pos) - delta
	st, err := s.f.Stat()
	if err != nil {
		return 0, errs.New(CodePositionNotFound, true, "relay of source %q: stat %s: %w", s.relay.source, f.Name, err)
	}
	if target < s.off || target > st.Size() {
		return 0, errs.New(CodePositionNotFound, true, "relay of source %q: %s:%d is not in the relay file (it holds %d..%d)",
			s.relay.source, f.Name, pos, s.off+delta, st.Size()+delta)
	}
	return target, nil
}

// fakeRotate builds the rotate event a stream yields when it enters a file.
func fakeRotate(name string, pos uint64) *replication.BinlogEvent {
	raw := make([]byte, headerSize+8+len(name))
	raw[4] = byte(replication.ROTATE_EVENT)
	binary.LittleEndian.PutUint32(raw[9:], uint32(len(raw)))
	binary.LittleEndian.PutUint16(raw[17:], replication.LOG_EVENT_ARTIFICIAL_F)
	binary.LittleEndian.PutUint64(raw[headerSize:], pos)
	copy(raw[headerSize+8:], name)
	return &replication.BinlogEvent{
		RawData: raw,
		Header:  &replication.EventHeader{EventType: replication.ROTATE_EVENT, EventSize: uint32(len(raw)), Flags: replication.LOG_EVENT_ARTIFICIAL_F},
		Event:   &replication.RotateEvent{Position: pos, NextLogName: []byte(name)},
	}
}

// errWait means no event is available now.
var errWait = errors.New("relay: no event yet")

// GetEvent returns the next event, waiting for the writer when the stream
// is at the end of the relay, until ctx is done.
func (s *stream) GetEvent(ctx context.Context) (*replication.BinlogEvent, error) {
	for {
		wake := s.relay.Notify()
		ev, err := s.step()
		if ev != nil || (err != nil && !errors.Is(err, errWait)) {
			return ev, err
		}
		if err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		}
	}
}

// step yields one event, nil and nil for a skipped one, or errWait.
func (s *stream) step() (*replication.BinlogEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errs.New(CodeReaderClosed, false, "relay reader %q is closed", s.rd.name)
	}
	s.relay.mu.Lock()
	relayClosed, active := s.relay.closed, s.relay.active
	s.relay.mu.Unlock()
	if relayClosed {
		return nil, errs.New(CodeReaderClosed, false, "relay of source %q is closed", s.relay.source)
	}
	if len(s.queue) > 0 {
		ev := s.queue[0]
		s.queue = s.queue[1:]
		return ev, nil
	}
	isActive := active.sub == s.file.Sub && active.name == s.file.Name
	if isActive && s.off >= active.size {
		s.park()
		return nil, errWait
	}
	h, raw, err := readEvent(s.reader(), &s.buf)
	if err != nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, errPartial) {
			return nil, errs.New(CodeRelayFileNotFound, true, "relay of source %q: read %s at %d: %w", s.relay.source, s.file.Name, s.off, err)
		}
		if err := s.rewind(); err != nil {
			return nil, err
		}
		if isActive {
			s.park()
			return nil, errWait
		}
		return nil, s.advance()
	}
	s.off += int64(h.Size)
	if s.filter != nil {
		boundary, done := s.tracker.step(h, raw)
		switch {
		case s.skipping:
			if boundary {
				s.skipping = false
			}
			return nil, nil
		case s.tracker.inGroup && s.tracker.id != nil && s.filter.contains(*s.tracker.id):
			s.skipping = true
			return nil, nil
		case done != nil:
			s.filter.add(*done)
		}
	}
	ev, err := s.parser.Parse(bytes.Clone(raw))
	if err != nil {
		return nil, errs.New(CodeRelayFileNotFound, false, "relay of source %q: parse %s event at %s:%d: %w", s.relay.source, h.Type, s.file.Name, h.LogPos, err)
	}
	return ev, nil
}

// rewind puts the reader back at s.off after a short read.
func (s *stream) rewind() error {
	if _, err := s.f.Seek(s.off, io.SeekStart); err != nil {
		return errs.New(CodeRelayFileNotFound, true, "relay of source %q: seek %s: %w", s.relay.source, s.file.Name, err)
	}
	if s.br != nil {
		s.br.Reset(s.f)
	}
	return nil
}

// readerPool holds the read buffers of streams that wait at the end of the
// relay: a worker with many idle subtasks keeps one buffer per stream that
// is reading, not one per stream (256 KiB each).
var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 256<<10) }}

// reader returns the stream's buffered reader on s.f, taking one from the
// pool when the stream has none.
func (s *stream) reader() *bufio.Reader {
	if s.br == nil {
		s.br = readerPool.Get().(*bufio.Reader)
		s.br.Reset(s.f)
	}
	return s.br
}

// park gives the read buffer back while the stream waits at the end of the
// relay; the file offset goes back to s.off, the end of what was consumed,
// so that nothing read ahead into the buffer is lost.
func (s *stream) park() {
	if s.br == nil || s.f == nil {
		return
	}
	if _, err := s.f.Seek(s.off, io.SeekStart); err != nil {
		return // keep the buffer: it still matches the file offset
	}
	s.release()
}

// release returns the read buffer to the pool.
func (s *stream) release() {
	if s.br == nil {
		return
	}
	s.br.Reset(nil)
	readerPool.Put(s.br)
	s.br = nil
}

// advance moves to the next relay file, or returns errWait when there is
// none yet.
func (s *stream) advance() error {
	files, err := allFiles(s.relay.cfg.Dir)
	if err != nil {
		return errs.New(CodeRelayFileNotFound, true, "relay of source %q: %w", s.relay.source, err)
	}
	for _, f := range files {
		if s.file.before(f) {
			// The next file exists, so the writer finished this one; read
			// whatever landed between the end seen and the listing.
			if _, _, err := readEvent(s.reader(), &s.buf); err == nil {
				return s.rewind()
			}
			if err := s.rewind(); err != nil {
				return err
			}
			return s.openFile(f, 0)
		}
	}
	return errWait
}
