package relay

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

// TestReadAheadBytes reads a stream through readAhead and bufio, as the
// dump does, in reads of random sizes over a source that returns short
// reads: the bytes and their order are the source's, and the source's
// failure comes after all of them.
func TestReadAheadBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	want := make([]byte, 3*readAheadChunks*readAheadChunk+12345)
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	failure := errors.New("connection reset")
	src := io.MultiReader(iotest.HalfReader(bytes.NewReader(want)), iotest.ErrReader(failure))
	a := newReadAhead(src)
	defer a.stop()
	br := bufio.NewReaderSize(a, dumpReadBuffer)
	var got []byte
	for len(got) < len(want) {
		n := 1 + rng.IntN(min(len(want)-len(got), 2*dumpReadBuffer))
		if n <= dumpReadBuffer && rng.IntN(2) == 0 {
			p, err := br.Peek(n)
			if err != nil {
				t.Fatalf("peek %d at %d: %v", n, len(got), err)
			}
			got = append(got, p...)
			_, _ = br.Discard(n)
			continue
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(br, p); err != nil {
			t.Fatalf("read %d at %d: %v", n, len(got), err)
		}
		got = append(got, p...)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read ahead differ from the source's")
	}
	if _, err := br.ReadByte(); !errors.Is(err, failure) {
		t.Fatalf("after the last byte: %v, want %v", err, failure)
	}
}

// TestReadAheadBounded: a reader that stops consuming holds the
// read-ahead at its ring of buffers, and stop ends its goroutine both
// then and while it waits in a read that closing the connection ends.
func TestReadAheadBounded(t *testing.T) {
	t.Run("ring full", func(t *testing.T) {
		src := &countingReader{}
		a := newReadAhead(src)
		deadline := time.Now().Add(10 * time.Second)
		for len(a.full) < readAheadChunks && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond) // a read beyond the ring would happen now
		if got, limit := src.n.Load(), int64(readAheadChunks*readAheadChunk); got != limit {
			t.Fatalf("read ahead %d bytes, want the ring's %d", got, limit)
		}
		a.stop()
	})
	t.Run("blocked read", func(t *testing.T) {
		client, server := net.Pipe()
		defer server.Close()
		a := newReadAhead(client)
		go func() { _, _ = server.Write([]byte("abc")) }()
		p := make([]byte, 3)
		if _, err := io.ReadFull(a, p); err != nil || string(p) != "abc" {
			t.Fatalf("read %q: %v", p, err)
		}
		_ = client.Close() // as dumpConn.close does before stop
		a.stop()
		if _, err := a.Read(p); err == nil {
			t.Fatal("read after stop succeeded")
		}
	})
}

// countingReader returns zeros without end and counts them.
type countingReader struct{ n atomic.Int64 }

func (r *countingReader) Read(p []byte) (int, error) {
	r.n.Add(int64(len(p)))
	return len(p), nil
}
