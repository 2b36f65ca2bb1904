package relay

import (
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

// TestReadAheadBytes reads a stream through readAhead with peeks and reads
// of random sizes, as the dump does, over a source that returns short
// reads (so that peeks span chunks): the bytes and their order are the
// source's, and the source's failure comes after all of them.
func TestReadAheadBytes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		size  int
		short func(r io.Reader, rng *rand.Rand) io.Reader
	}{
		{"half reads", 3*readAheadChunks*readAheadChunk + 12345, func(r io.Reader, _ *rand.Rand) io.Reader { return iotest.HalfReader(r) }},
		{"tiny reads", 1<<20 + 777, func(r io.Reader, rng *rand.Rand) io.Reader { return &shortReader{r: r, rng: rng} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			want := make([]byte, tc.size)
			for i := range want {
				want[i] = byte(rng.Uint32())
			}
			failure := errors.New("connection reset")
			src := io.MultiReader(tc.short(bytes.NewReader(want), rand.New(rand.NewPCG(3, 4))), iotest.ErrReader(failure))
			a := newReadAhead(src, dumpReadBuffer)
			defer a.stop()
			var got []byte
			for len(got) < len(want) {
				n := 1 + rng.IntN(min(len(want)-len(got), 2*dumpReadBuffer))
				if n <= dumpReadBuffer && rng.IntN(2) == 0 {
					p, err := a.Peek(n)
					if err != nil {
						t.Fatalf("peek %d at %d: %v", n, len(got), err)
					}
					// A second peek of a part returns the same bytes.
					if q, err := a.Peek(n / 2); err != nil || !bytes.Equal(q, p[:n/2]) {
						t.Fatalf("second peek %d at %d: %v", n/2, len(got), err)
					}
					got = append(got, p...)
					a.Discard(n)
					continue
				}
				p := make([]byte, n)
				if _, err := io.ReadFull(a, p); err != nil {
					t.Fatalf("read %d at %d: %v", n, len(got), err)
				}
				got = append(got, p...)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("the bytes read ahead differ from the source's")
			}
			if _, err := a.Read(make([]byte, 1)); !errors.Is(err, failure) {
				t.Fatalf("after the last byte: %v, want %v", err, failure)
			}
		})
	}
}

// shortReader returns 1 to 5000 bytes per read.
type shortReader struct {
	r   io.Reader
	rng *rand.Rand
}

func (s *shortReader) Read(p []byte) (int, error) {
	return s.r.Read(p[:min(len(p), 1+s.rng.IntN(5000))])
}

// TestReadAheadBounded: a reader that stops consuming holds the
// read-ahead at its ring of buffers, and stop ends its goroutine both
// then and while it waits in a read that closing the connection ends.
func TestReadAheadBounded(t *testing.T) {
	t.Run("ring full", func(t *testing.T) {
		src := &countingReader{}
		a := newReadAhead(src, dumpReadBuffer)
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
		a := newReadAhead(client, dumpReadBuffer)
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
