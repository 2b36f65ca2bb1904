package relay

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// syncRecord is one sync point made durable, as syncHook saw it.
type syncRecord struct {
	p    syncPoint
	meta bool
}

// TestRelaySyncPointsInOrder: while the source rotates its binlog many
// times, sync points are made durable in the order they were taken, a
// file's final point comes after all its others, and no meta names a file
// before every earlier file's final fsync.
func TestRelaySyncPointsInOrder(t *testing.T) {
	src := startSource(t, mariadbtest.Options{FastCommit: true})
	r := newRelay(t, t.TempDir(), sourceConfig(src))
	var (
		mu   sync.Mutex
		seen []syncRecord
	)
	r.syncHook = func(p syncPoint, meta bool) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, syncRecord{p, meta})
	}
	rn := startRun(t, r)
	workload(t, src, rowsTotal, 7)
	waitCaughtUp(t, r, src)
	rn.stop(t)

	mu.Lock()
	defer mu.Unlock()
	closed := map[string]bool{} // files whose final point is durable
	var files []string          // files in the order of their first point
	var seq uint64
	for i, s := range seen {
		p := s.p
		if p.seq <= seq {
			t.Fatalf("point %d (seq %d of %s) made durable after seq %d", i, p.seq, p.name, seq)
		}
		seq = p.seq
		if closed[p.name] {
			t.Fatalf("point %d of %s after its final point", i, p.name)
		}
		if len(files) == 0 || files[len(files)-1] != p.name {
			files = append(files, p.name)
		}
		if s.meta {
			for _, f := range files[:len(files)-1] {
				if !closed[f] {
					t.Fatalf("point %d: meta names %s:%d before the final fsync of %s", i, p.meta.BinlogName, p.meta.BinlogPos, f)
				}
			}
		}
		if p.last {
			closed[p.name] = true
		}
	}
	if len(closed) < 3 {
		t.Fatalf("only %d rotations over %d sync points; the workload is too small to test anything", len(closed), len(seen))
	}
	if files[len(files)-1] != r.Written().Name {
		t.Fatalf("last point names %s, the relay ends in %s", files[len(files)-1], r.Written().Name)
	}
}

// TestSyncQueueOrder: points pushed while two runners drain the queue run
// in push order, one at a time, and the file of a final point is closed
// after it; after a failure, later points only have their files closed.
func TestSyncQueueOrder(t *testing.T) {
	dir := t.TempDir()
	q := newSyncQueue()
	var (
		mu      sync.Mutex
		ran     []uint64
		running bool
	)
	fail := errors.New("disk failed")
	do := func(p *syncPoint) error {
		mu.Lock()
		if running {
			mu.Unlock()
			t.Error("two points ran at once")
			return nil
		}
		running = true
		ran = append(ran, p.seq)
		mu.Unlock()
		err := p.file.Sync()
		mu.Lock()
		running = false
		mu.Unlock()
		if p.seq == 90 {
			return fail
		}
		return err
	}
	var finals []*os.File
	var wg sync.WaitGroup
	for seq := uint64(1); seq <= 100; seq++ {
		f, err := os.Create(filepath.Join(dir, "f"))
		if err != nil {
			t.Fatal(err)
		}
		p := &syncPoint{file: f, seq: seq, last: true}
		finals = append(finals, f)
		q.push(p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = q.run(do)
		}()
	}
	wg.Wait()
	if err := q.run(do); !errors.Is(err, fail) {
		t.Fatalf("queue error %v, want %v", err, fail)
	}
	if len(ran) != 90 {
		t.Fatalf("%d points ran, want 90 (up to the failure)", len(ran))
	}
	for i, s := range ran {
		if s != uint64(i+1) {
			t.Fatalf("points ran in order %v", ran)
		}
	}
	for i, f := range finals {
		if err := f.Close(); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("file of final point %d left open (%v)", i+1, err)
		}
	}
	if q.closingFiles() != 0 || !q.idle() {
		t.Fatalf("queue not empty after run: %d closing, idle %v", q.closingFiles(), q.idle())
	}
}

// TestSyncQueueClosingBound: rotations wait for the disk only past
// maxClosingFiles files or maxClosingBytes bytes waiting for their fsync,
// and a run of the queue brings both back to zero.
func TestSyncQueueClosingBound(t *testing.T) {
	q := newSyncQueue()
	dir := t.TempDir()
	final := func(size int64) {
		f, err := os.CreateTemp(dir, "f")
		if err != nil {
			t.Fatal(err)
		}
		q.push(&syncPoint{file: f, last: true, size: size})
	}
	for i := 0; i < maxClosingFiles; i++ {
		final(1 << 20)
	}
	if q.tooManyClosing() {
		t.Fatalf("%d small files: too many already", maxClosingFiles)
	}
	final(1 << 20)
	if !q.tooManyClosing() {
		t.Fatalf("%d files: not too many", maxClosingFiles+1)
	}
	if err := q.run(func(*syncPoint) error { return nil }); err != nil || q.tooManyClosing() || q.closingFiles() != 0 {
		t.Fatalf("after a run: err %v, closing %d, too many %v", err, q.closingFiles(), q.tooManyClosing())
	}
	final(maxClosingBytes / 2)
	final(maxClosingBytes / 2)
	if q.tooManyClosing() {
		t.Fatal("exactly maxClosingBytes: too many")
	}
	final(1)
	if !q.tooManyClosing() {
		t.Fatal("past maxClosingBytes in 3 files: not too many")
	}
	if err := q.run(func(*syncPoint) error { return nil }); err != nil || q.tooManyClosing() {
		t.Fatalf("after the second run: err %v, too many %v", err, q.tooManyClosing())
	}
}
