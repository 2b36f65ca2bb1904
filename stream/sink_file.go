package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/fsutil"
)

// fileFlushSize is how much the file sink buffers before writing to the
// file within one batch; it bounds the sink's memory beside one event.
const fileFlushSize = 1 << 20

// The file sink's streaming batch limits (BatchLimits): more events per
// batch than DefaultBatchEvents, the same bytes (so a stream still holds
// at most ~12 MiB of batches). Its fsyncs no longer delay the stream (the
// task writes while the previous batches are fsynced, BufferedSink), so a
// batch's size only spreads the per-batch work (hand-off, acknowledgement,
// status) over more events.
const (
	fileBatchEvents = 4096
	fileBatchBytes  = DefaultBatchBytes
)

// fileSink writes JSON lines {"key":…,"value":…} into
// <dir>/<stream>.<6-digit seq>.jsonl. A file is closed once it reaches
// rotate-size and the next sequence number is started; a single line is
// never split. Write fsyncs the file (and the directory when it created a
// file) before it returns, so an acknowledged event survives a crash.
//
// On its first Write it continues after the highest existing sequence
// number, appending to that file while it is below rotate-size; a line
// torn by a crash (no trailing newline, never acknowledged) is cut off
// first, and its event is written again by the retried batch.
type fileSink struct {
	stream string
	dir    string
	rotate int64
	logger *zap.Logger
	name   *regexp.Regexp // matches this stream's file names, group 1 = seq

	mu sync.Mutex
	// The fields below are guarded by mu.
	f    *os.File // the current file; nil before the first Write and after a failure
	seq  int      // sequence number of f
	size int64    // bytes in f
	buf  []byte   // lines not yet written to f
	// written counts the batches WriteBuffered wrote (their marks);
	// durable is the highest mark whose lines are fsynced.
	written, durable int64

	// syncMu serializes SyncTo, which holds mu only around its bookkeeping:
	// its fsync runs while WriteBuffered writes the next batches.
	syncMu sync.Mutex
}

func newFileSink(stream string, cfg config.FileSinkConfig, logger *zap.Logger) (*fileSink, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("stream %q: sink.file.dir must not be empty", stream)
	}
	rotate := int64(cfg.RotateSize)
	if rotate <= 0 {
		rotate = int64(config.DefaultFileRotateSize)
	}
	return &fileSink{
		stream: stream,
		dir:    cfg.Dir,
		rotate: rotate,
		logger: logger,
		name:   regexp.MustCompile(`^` + regexp.QuoteMeta(stream) + `\.([0-9]{6,})\.jsonl$`),
	}, nil
}

var _ BufferedSink = (*fileSink)(nil)

// BatchLimits makes the file sink's streaming batches larger.
func (s *fileSink) BatchLimits() (events, bytes int) { return fileBatchEvents, fileBatchBytes }

// fileName is the path of sequence number seq.
func (s *fileSink) fileName(seq int) string {
	return filepath.Join(s.dir, fmt.Sprintf("%s.%06d.jsonl", s.stream, seq))
}

// Probe checks that the directory exists or can be created, that a file
// can be created in it, and that its file system has free space.
func (s *fileSink) Probe(ctx context.Context) error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("file sink of stream %q: directory %s cannot be created: %w; create it or give sink.file.dir a writable path",
			s.stream, s.dir, err)
	}
	probe, err := os.CreateTemp(s.dir, "."+s.stream+".probe-*")
	if err != nil {
		return fmt.Errorf("file sink of stream %q: directory %s is not writable: %w; give the worker write access or another sink.file.dir",
			s.stream, s.dir, err)
	}
	_, werr := probe.Write([]byte("probe\n"))
	cerr := probe.Close()
	rerr := os.Remove(probe.Name())
	if err := errors.Join(werr, cerr, rerr); err != nil {
		return fmt.Errorf("file sink of stream %q: directory %s: writing a probe file failed: %w", s.stream, s.dir, err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.dir, &st); err != nil {
		return fmt.Errorf("file sink of stream %q: directory %s: free space unknown: %w", s.stream, s.dir, err)
	}
	if free := st.Bavail * uint64(st.Bsize); free == 0 {
		return fmt.Errorf("file sink of stream %q: directory %s has 0 bytes free, needs at least one event line and up to rotate-size %d bytes per file; free some space",
			s.stream, s.dir, s.rotate)
	}
	return nil
}

// Write appends the batch and fsyncs it. A failure (disk full, I/O error)
// is retried with backoff until ctx is done, continuing after the events
// already made durable by a rotation.
func (s *fileSink) Write(ctx context.Context, batch []Event) error {
	if len(batch) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	done := 0 // batch[:done] is durable
	return retryLoop(ctx, s.logger, fmt.Sprintf("file sink of stream %q: write %d event(s) into %s", s.stream, len(batch), s.dir),
		func(context.Context) error {
			n, err := s.write(batch[done:])
			done += n
			if err != nil {
				s.reset()
			}
			return err
		})
}

// WriteBuffered appends batch to the file without fsyncing it and
// returns its mark: SyncTo(mark) makes it (and every batch written
// before it) durable. This is how the stream task writes to a file sink
// (BufferedSink): it writes each batch as it comes and fsyncs in another
// goroutine, so that the stream does not wait for an fsync between two
// batches; its checkpoint still moves only after the fsync that covered
// the batch. A failure is retried like Write's while every earlier batch
// is durable; with lines of earlier batches not yet fsynced it is
// returned at once (a failed write may have lost them from the page
// cache), and the task restarts from its checkpoint, before them.
func (s *fileSink) WriteBuffered(ctx context.Context, batch []Event) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(batch) == 0 {
		return s.written, nil // nothing new to make durable (a batch that only moves the checkpoint)
	}
	done, err := s.writeLines(batch)
	if err != nil {
		s.reset()
		if s.written > s.durable {
			return 0, fmt.Errorf("file sink of stream %q: write %d event(s) into %s: %w; lines of earlier batches were not fsynced yet, so the stream restarts from its checkpoint",
				s.stream, len(batch), s.dir, err)
		}
		err = retryLoop(ctx, s.logger, fmt.Sprintf("file sink of stream %q: write %d event(s) into %s", s.stream, len(batch)-done, s.dir),
			func(context.Context) error {
				n, err := s.writeLines(batch[done:])
				done += n
				if err != nil {
					s.reset()
				}
				return err
			})
		if err != nil {
			return 0, err
		}
	}
	s.written++
	return s.written, nil
}

// SyncTo makes the batches of WriteBuffered up to mark durable: it fsyncs
// the current file (earlier files were fsynced when they were closed),
// which covers every batch written when it began, and returns once mark is
// covered. It holds the sink's lock only to take a duplicate of the file's
// descriptor, so WriteBuffered goes on during the fsync.
func (s *fileSink) SyncTo(mark int64) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	if s.durable >= mark {
		s.mu.Unlock()
		return nil
	}
	target := s.written
	if s.f == nil {
		s.mu.Unlock()
		return fmt.Errorf("file sink of stream %q: the file of batches %d to %d was closed after a failed write before they were fsynced", s.stream, s.durable+1, mark)
	}
	name := s.f.Name()
	fd, err := syscall.Dup(int(s.f.Fd()))
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("fsync %s: duplicate its descriptor: %w", name, err)
	}
	err = syscall.Fsync(fd)
	if cerr := syscall.Close(fd); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", name, err)
	}
	s.mu.Lock()
	s.durable = max(s.durable, target)
	s.mu.Unlock()
	return nil
}

// write appends batch and fsyncs; it returns how many leading events are
// durable (fsynced) when it fails.
func (s *fileSink) write(batch []Event) (int, error) {
	durable, err := s.writeLines(batch)
	if err != nil {
		return durable, err
	}
	if err := s.f.Sync(); err != nil {
		return durable, fmt.Errorf("fsync %s: %w", s.f.Name(), err)
	}
	return len(batch), nil
}

// writeLines appends batch without fsyncing the file it ends in; it
// returns how many leading events are durable (in files a rotation closed
// and fsynced) when it fails.
func (s *fileSink) writeLines(batch []Event) (int, error) {
	if s.f == nil {
		if err := s.open(); err != nil {
			return 0, err
		}
	}
	durable := 0
	s.buf = s.buf[:0]
	for i, e := range batch {
		if total := s.size + int64(len(s.buf)); total > 0 && total >= s.rotate {
			if err := s.next(); err != nil {
				return durable, err
			}
			durable = i
		}
		s.buf = appendSinkRecord(s.buf, e)
		s.buf = append(s.buf, '\n')
		if len(s.buf) >= fileFlushSize {
			if err := s.flush(); err != nil {
				return durable, err
			}
		}
	}
	if err := s.flush(); err != nil {
		return durable, err
	}
	return durable, nil
}

// flush writes the buffered lines to the current file.
func (s *fileSink) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	n, err := s.f.Write(s.buf)
	s.size += int64(n)
	s.buf = s.buf[:0]
	if err != nil {
		return fmt.Errorf("write %s: %w", s.f.Name(), err)
	}
	return nil
}

// next finishes the current file (flush, fsync, close) and creates the
// file of the next sequence number.
func (s *fileSink) next() error {
	if err := s.flush(); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", s.f.Name(), err)
	}
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", s.f.Name(), err)
	}
	s.f = nil
	s.logger.Info("file sink rotated", zap.String("closed", s.fileName(s.seq)), zap.Int64("size", s.size))
	return s.create(s.seq + 1)
}

// open finds the highest existing sequence number and continues it (cut
// to its last complete line) while it is below rotate-size, else creates
// the next one.
func (s *fileSink) open() error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("create directory %s: %w", s.dir, err)
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", s.dir, err)
	}
	last := -1
	for _, e := range entries {
		if m := s.name.FindStringSubmatch(e.Name()); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil && n > last {
				last = n
			}
		}
	}
	if last < 0 {
		return s.create(1)
	}
	f, err := os.OpenFile(s.fileName(last), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", s.fileName(last), err)
	}
	size, err := cutTornLine(f)
	if err != nil {
		_ = f.Close() // the cut failed: nothing written through f
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	if size >= s.rotate {
		if err := f.Close(); err != nil {
			return fmt.Errorf("close %s: %w", f.Name(), err)
		}
		return s.create(last + 1)
	}
	if _, err := f.Seek(size, io.SeekStart); err != nil {
		_ = f.Close() // nothing written through f
		return fmt.Errorf("seek %s: %w", f.Name(), err)
	}
	s.f, s.seq, s.size = f, last, size
	s.logger.Info("file sink continues a file", zap.String("file", f.Name()), zap.Int64("size", size))
	return nil
}

// create makes the (new, empty) file of sequence number seq and fsyncs
// the directory so that the file's name is durable too.
func (s *fileSink) create(seq int) error {
	f, err := os.OpenFile(s.fileName(seq), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", s.fileName(seq), err)
	}
	if err := fsutil.SyncDir(s.dir); err != nil {
		_ = f.Close() // empty file, nothing to lose
		return err
	}
	s.f, s.seq, s.size = f, seq, 0
	return nil
}

// reset closes the current file after a failure; the next attempt opens it
// again and cuts a torn line.
func (s *fileSink) reset() {
	s.buf = s.buf[:0]
	if s.f != nil {
		if err := s.f.Close(); err != nil {
			s.logger.Warn("file sink: close after a failed write", zap.String("file", s.f.Name()), zap.Error(err))
		}
		s.f = nil
	}
}

// Close fsyncs and closes the current file.
func (s *fileSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	f := s.f
	s.f = nil
	return errors.Join(f.Sync(), f.Close())
}

// cutTornLine truncates f after its last newline when it does not end with
// one (a line torn by a crash) and returns the resulting size.
func cutTornLine(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	if size == 0 {
		return 0, nil
	}
	var chunk [64 << 10]byte
	end := size
	for end > 0 {
		n := min(int64(len(chunk)), end)
		if _, err := f.ReadAt(chunk[:n], end-n); err != nil {
			return 0, fmt.Errorf("read the end of the file: %w", err)
		}
		for i := n - 1; i >= 0; i-- {
			if chunk[i] == '\n' {
				keep := end - n + i + 1
				if keep == size {
					return size, nil
				}
				return keep, truncateSynced(f, keep)
			}
		}
		end -= n
	}
	return 0, truncateSynced(f, 0)
}

// truncate cuts f to size and fsyncs it.
func truncateSynced(f *os.File, size int64) error {
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("cut a torn last line: %w", err)
	}
	return f.Sync()
}
