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

// readAhead is an io.Reader over r whose reads are done ahead by a
// goroutine of its own into a fixed ring of buffers: memory stays
// readAheadChunks*readAheadChunk bytes. One goroutine reads from it; stop
// may be called from any goroutine, and once r fails (closing the
// connection makes it fail) the reader's Read returns the failure after
// the data read before it.
type readAhead struct {
	full chan []byte // filled chunks, in order; closed after r failed or stop
	free chan []byte // empty buffers for the goroutine
	quit chan struct{}
	once sync.Once
	done chan struct{} // closed when the goroutine has returned

	cur []byte // unread part of the chunk being consumed
	buf []byte // the whole buffer of that chunk, given back once read
	err error  // r's failure; written by the goroutine before it closes full
}

// newReadAhead starts reading r ahead.
func newReadAhead(r io.Reader) *readAhead {
	a := &readAhead{full: make(chan []byte, readAheadChunks), free: make(chan []byte, readAheadChunks),
		quit: make(chan struct{}), done: make(chan struct{})}
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
		}
		if err != nil {
			a.err = err
			return
		}
	}
}

// Read copies read-ahead bytes into p, waiting for them when there are
// none yet.
func (a *readAhead) Read(p []byte) (int, error) {
	if len(a.cur) == 0 {
		if a.buf != nil {
			a.free <- a.buf[:cap(a.buf)]
			a.buf = nil
		}
		b, ok := <-a.full
		if !ok {
			return 0, a.err
		}
		a.cur, a.buf = b, b
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
