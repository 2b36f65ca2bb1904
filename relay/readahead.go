package relay

import (
	"io"
	"sync"
)

// Read-ahead of a dump connection: readAheadChunks buffers of
// readAheadChunk bytes. The pump then never reads the socket itself, so
// the source keeps sending while the pump writes the file, and the socket
// reads run on the other core.
const (
	readAheadChunk  = 256 << 10
	readAheadChunks = 4
)

// readAhead reads r ahead on a goroutine of its own into a fixed ring of
// buffers and hands out what it read with Peek and Discard (in place: only
// the bytes of a peek that spans two chunks are copied, into carry) or
// Read. Memory stays readAheadChunks*readAheadChunk bytes plus carry. One
// goroutine reads from it; stop may be called from any goroutine. Once r
// fails (closing the connection makes it fail) the reader gets the failure
// after the data read before it.
type readAhead struct {
	full chan []byte // filled chunks, in order; closed after r failed or stop
	free chan []byte // empty buffers for the goroutine
	quit chan struct{}
	once sync.Once
	done chan struct{} // closed when the goroutine has returned
	err  error         // r's failure; written by the goroutine before it closes full

	// cur is the unread data at the front: part of the chunk curBuf, or of
	// carry when curBuf is nil. rest, part of the chunk restBuf, follows
	// it when a peek spanning chunks took the head of that chunk into
	// carry; then the next chunk of full.
	cur, curBuf   []byte
	rest, restBuf []byte
	carry         []byte
}

// newReadAhead starts reading r ahead; peeks are at most maxPeek bytes.
func newReadAhead(r io.Reader, maxPeek int) *readAhead {
	a := &readAhead{full: make(chan []byte, readAheadChunks), free: make(chan []byte, readAheadChunks),
		quit: make(chan struct{}), done: make(chan struct{}), carry: make([]byte, 0, maxPeek)}
	for range readAheadChunks {
		a.free <- make([]byte, readAheadChunk)
	}
	go a.fill(r)
	return a
}

// fill reads r into free buffers until r fails or stop. full has room for
// every buffer, so handing a chunk over never blocks.
func (a *readAhead) fill(r io.Reader) {
	defer close(a.done)
	defer close(a.full)
	for {
		var b []byte
		select {
		case b = <-a.free:
		case <-a.quit:
			a.err = io.ErrClosedPipe
			return
		}
		n, err := r.Read(b)
		if n > 0 {
			a.full <- b[:n]
		} else {
			a.free <- b
		}
		if err != nil {
			a.err = err
			return
		}
	}
}

// giveBack returns a chunk's buffer to the goroutine; free has room for
// every buffer.
func (a *readAhead) giveBack(buf []byte) {
	if buf != nil {
		a.free <- buf[:cap(buf)]
	}
}

// next returns the data that follows cur (rest, or the next chunk),
// waiting for it.
func (a *readAhead) next() (b, buf []byte, err error) {
	if a.restBuf != nil {
		b, buf = a.rest, a.restBuf
		a.rest, a.restBuf = nil, nil
		return b, buf, nil
	}
	b, ok := <-a.full
	if !ok {
		return nil, nil, a.err
	}
	return b, b, nil
}

// advance makes the data after cur, which is all read, the new cur.
func (a *readAhead) advance() error {
	a.giveBack(a.curBuf)
	a.cur, a.curBuf = nil, nil
	b, buf, err := a.next()
	if err != nil {
		return err
	}
	a.cur, a.curBuf = b, buf
	return nil
}

// Peek returns the next n bytes (n at most maxPeek) without reading them;
// they stay valid until the next call of any method.
func (a *readAhead) Peek(n int) ([]byte, error) {
	for len(a.cur) < n {
		if len(a.cur) == 0 {
			if err := a.advance(); err != nil {
				return nil, err
			}
			continue
		}
		b, buf, err := a.next()
		if err != nil {
			return nil, err
		}
		// cur and the head of b, into carry (cur may be in carry already:
		// append moves it to the front).
		a.carry = append(a.carry[:0], a.cur...)
		a.giveBack(a.curBuf)
		take := min(n-len(a.carry), len(b))
		a.carry = append(a.carry, b[:take]...)
		a.cur, a.curBuf = a.carry, nil
		if take < len(b) {
			a.rest, a.restBuf = b[take:], buf
		} else {
			a.giveBack(buf)
		}
	}
	return a.cur[:n], nil
}

// Discard reads n bytes that Peek returned.
func (a *readAhead) Discard(n int) {
	a.cur = a.cur[n:]
}

// Read copies the next bytes into p, waiting for them when there are none
// yet.
func (a *readAhead) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(a.cur) == 0 {
		if err := a.advance(); err != nil {
			return 0, err
		}
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	return n, nil
}

// stop ends the read-ahead goroutine, once any read it is in returns
// (closing the connection ends it), and waits for it.
func (a *readAhead) stop() {
	a.once.Do(func() { close(a.quit) })
	<-a.done
}
