package relay

import (
	"errors"
	"os"
	"sync"
	"time"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/fsutil"
)

// maxClosingFiles and maxClosingBytes bound the finished files waiting
// for their fsync: a rotation beyond either waits for the disk (see
// rotateOut), so that open files and the written-but-not-durable data stay
// bounded when the disk is slower than the source. What is not durable yet
// is not lost on a crash: the meta names only durable data, and the relay
// pulls the rest again. With 2 files, as before, a source faster than the
// disk made every third rotation wait for a whole file's fsync (0.73x
// mariadb-binlog --raw on 863 MB in four 256 MiB files, 1.18x with 8).
const (
	maxClosingFiles = 8
	maxClosingBytes = 2 << 30
)

// syncPoint is what one fsync makes durable: the file, and the meta that
// describes its end when the point was taken.
type syncPoint struct {
	file    *os.File
	name    string
	dir     string
	meta    Meta
	seq     uint64
	last    bool  // the file's final point (a rotation): close it after its fsync
	size    int64 // the file's size when the point was taken
	syncDir bool  // the file is new: make its directory entry durable first
}

// syncQueue runs the writer's sync points one at a time, in the order they
// were taken, on the syncer goroutine or on a caller that must wait for
// them (sync). Order is what keeps the meta right: a point's meta is
// written only after its fsync and those of all points before it, so the
// meta never goes back and never names file N+1 before file N is durable,
// though rotations do not wait for the disk.
type syncQueue struct {
	exec sync.Mutex // held while running points: one runner at a time

	mu      sync.Mutex // guards the fields below
	points  []*syncPoint
	running bool
	closing int // final points queued (files waiting to be closed)
	// closingBytes is the size of those files.
	closingBytes int64
	err          error // the first failure; later points are only closed

	wake chan struct{} // wakes the syncer after a push
}

func newSyncQueue() *syncQueue { return &syncQueue{wake: make(chan struct{}, 1)} }

// push queues p and wakes the syncer.
func (q *syncQueue) push(p *syncPoint) {
	q.mu.Lock()
	q.points = append(q.points, p)
	if p.last {
		q.closing++
		q.closingBytes += p.size
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default: // already woken
	}
}

// idle reports whether no point is queued or running.
func (q *syncQueue) idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.points) == 0 && !q.running
}

// closingFiles is the number of finished files queued for their fsync.
func (q *syncQueue) closingFiles() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closing
}

// tooManyClosing reports whether the finished files queued for their
// fsync pass maxClosingFiles or maxClosingBytes.
func (q *syncQueue) tooManyClosing() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closing > maxClosingFiles || q.closingBytes > maxClosingBytes
}

// run runs the queued points in order with do, closing the file of each
// final point after it, and returns the queue's first failure, if any.
// After a failure, points are no longer run, only closed.
func (q *syncQueue) run(do func(*syncPoint) error) error {
	q.exec.Lock()
	defer q.exec.Unlock()
	for {
		q.mu.Lock()
		if len(q.points) == 0 {
			q.running = false
			err := q.err
			q.mu.Unlock()
			return err
		}
		p := q.points[0]
		q.points[0] = nil
		q.points = q.points[1:]
		q.running = true
		failed := q.err != nil
		q.mu.Unlock()

		var err error
		if !failed {
			err = do(p)
		}
		if p.last {
			_ = p.file.Close()
		}
		q.mu.Lock()
		if p.last {
			q.closing--
			q.closingBytes -= p.size
		}
		if err != nil && q.err == nil {
			q.err = err
		}
		q.mu.Unlock()
	}
}

// syncer runs the queued sync points whenever woken, until stop is closed
// or a point fails; the failure is sent to failed (buffered).
func (w *writer) syncer(stop <-chan struct{}, failed chan<- error, every time.Duration) {
	last := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-w.q.wake:
		}
		// One fsync per interval: a journal commit flushing the file while
		// the pull writes slows the pull to the disk's speed, and a rotation
		// would otherwise fsync the finished file at once.
		if d := every - time.Since(last); d > 0 {
			select {
			case <-stop:
				return
			case <-time.After(d):
			}
		}
		last = time.Now()
		if err := w.q.run(w.finishSync); err != nil {
			failed <- err
			return
		}
	}
}

// finishSync makes p durable: fsync (and, for a new file, its directory
// entry), then the meta unless a newer point's meta was written already.
// It runs under the queue's exec lock, in the order of the points; w.mu
// need not be held.
func (w *writer) finishSync(p *syncPoint) error {
	if err := p.file.Sync(); err != nil {
		if errors.Is(err, os.ErrClosed) {
			// Only the end of a connection closes the current file, after
			// its final sync.
			return nil
		}
		return errs.New(CodeRelayWrite, false, "relay of source %q: fsync %s: %w", w.r.source, p.name, err)
	}
	if p.syncDir {
		if err := fsutil.SyncDir(p.dir); err != nil {
			return errs.New(CodeRelayWrite, false, "relay of source %q: %w", w.r.source, err)
		}
	}
	wrote := p.seq > w.metaSeq
	if wrote {
		if err := writeMeta(p.dir, p.meta); err != nil {
			return errs.New(CodeRelayWrite, false, "relay of source %q: %w", w.r.source, err)
		}
		w.metaSeq = p.seq
	}
	if h := w.r.syncHook; h != nil {
		h(*p, wrote)
	}
	return nil
}
