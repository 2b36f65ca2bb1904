package stream

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/dmworker/dm-worker/config"
)

// TestFileSinkBufferedGroupCommit writes batches with WriteBuffered while
// another goroutine makes them durable with SyncTo, across rotations, and
// checks the marks, the lines (every event once, in order) and that a
// SyncTo of a mark already covered returns at once.
func TestFileSinkBufferedGroupCommit(t *testing.T) {
	checkSinkLeaks(t)
	dir := t.TempDir()
	ctx := context.Background()
	line := len(appendSinkRecord(nil, sinkTestEvents(100, 1)[0])) + 1
	s := newTestFileSink(t, dir, config.ByteSize(25*line)).(BufferedSink)
	if ev, b := s.BatchLimits(); ev <= DefaultBatchEvents || b <= 0 {
		t.Fatalf("BatchLimits() = %d, %d: want more events than DefaultBatchEvents", ev, b)
	}
	// A batch without events (one that only moves the checkpoint) before
	// any file exists: its mark is durable at once.
	if mark, err := s.WriteBuffered(ctx, nil); err != nil || mark != 0 {
		t.Fatalf("WriteBuffered(no events) = %d, %v; want mark 0", mark, err)
	}
	if err := s.SyncTo(0); err != nil {
		t.Fatalf("SyncTo of an empty batch: %v", err)
	}
	marks := make(chan int64, 64)
	var (
		wg      sync.WaitGroup
		syncErr error
		synced  []int64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for m := range marks {
			if err := s.SyncTo(m); err != nil {
				syncErr = err
				return
			}
			synced = append(synced, m)
		}
	}()
	const batches, per = 20, 7
	for i := range batches {
		mark, err := s.WriteBuffered(ctx, sinkTestEvents(100+i*per, per))
		if err != nil {
			t.Fatal(err)
		}
		if mark != int64(i+1) {
			t.Fatalf("batch %d: mark %d, want %d", i, mark, i+1)
		}
		marks <- mark
		if i == batches/2 {
			empty, err := s.WriteBuffered(ctx, nil)
			if err != nil || empty != mark {
				t.Fatalf("WriteBuffered(no events) after batch %d = %d, %v; want its mark %d", i, empty, err, mark)
			}
		}
	}
	close(marks)
	wg.Wait()
	if syncErr != nil {
		t.Fatal(syncErr)
	}
	if len(synced) != batches || !slices.IsSorted(synced) {
		t.Fatalf("synced marks %v", synced)
	}
	fs := s.(*fileSink)
	fs.mu.Lock()
	durable, written := fs.durable, fs.written
	fs.mu.Unlock()
	if durable != written || written != batches {
		t.Fatalf("durable %d, written %d, want both %d", durable, written, batches)
	}
	if err := s.SyncTo(3); err != nil {
		t.Fatalf("SyncTo of a durable mark: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ids, files := readFileSinkLines(t, dir)
	if want := seqInts(100, 100+batches*per); !slices.Equal(ids, want) {
		t.Fatalf("lines hold ids %v, want %v", ids, want)
	}
	if len(files) < 5 {
		t.Fatalf("%d files, want the rotations of 140 lines at 25 a file: %v", len(files), files)
	}
}

// TestFileSinkBufferedFailureWithUnsyncedLines makes a write fail while an
// earlier batch is written but not fsynced: WriteBuffered must fail at once
// (not retry: the lines of that batch may be gone) and SyncTo of that
// batch must fail too, so that the task restarts before it.
func TestFileSinkBufferedFailureWithUnsyncedLines(t *testing.T) {
	checkSinkLeaks(t)
	dir := t.TempDir()
	ctx := context.Background()
	s := newTestFileSink(t, dir, 0).(BufferedSink)
	defer s.Close()
	mark, err := s.WriteBuffered(ctx, sinkTestEvents(100, 3))
	if err != nil {
		t.Fatal(err)
	}
	// The next write goes to a closed descriptor: it fails.
	fs := s.(*fileSink)
	fs.mu.Lock()
	if err := fs.f.Close(); err != nil {
		t.Fatal(err)
	}
	fs.mu.Unlock()
	if _, err := s.WriteBuffered(ctx, sinkTestEvents(103, 3)); err == nil {
		t.Fatal("WriteBuffered into a closed file succeeded")
	}
	if err := s.SyncTo(mark); err == nil {
		t.Fatal("SyncTo of a batch written before the failure succeeded")
	}
	// A sink whose earlier batches are durable retries a failure as Write does.
	dir2 := t.TempDir()
	s2 := newTestFileSink(t, dir2, 0).(BufferedSink)
	defer s2.Close()
	m1, err := s2.WriteBuffered(ctx, sinkTestEvents(100, 3))
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.SyncTo(m1); err != nil {
		t.Fatal(err)
	}
	fs2 := s2.(*fileSink)
	fs2.mu.Lock()
	if err := fs2.f.Close(); err != nil {
		t.Fatal(err)
	}
	fs2.mu.Unlock()
	m2, err := s2.WriteBuffered(ctx, sinkTestEvents(103, 3))
	if err != nil {
		t.Fatalf("WriteBuffered after durable batches: %v", err)
	}
	if err := s2.SyncTo(m2); err != nil {
		t.Fatal(err)
	}
	ids, _ := readFileSinkLines(t, dir2)
	if want := seqInts(100, 106); !slices.Equal(ids, want) {
		t.Fatalf("lines hold ids %v, want %v", ids, want)
	}
	if _, err := os.Stat(filepath.Join(dir2, "orders.000001.jsonl")); err != nil {
		t.Fatal(err)
	}
}
