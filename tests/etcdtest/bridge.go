package etcdtest

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// relistenTimeout bounds how long up retries the bridge's address.
const relistenTimeout = time.Second

// bridge is a TCP proxy on a fixed loopback address in front of the
// embedded etcd's client port. Taking it down drops every client connection
// at once, which is how clients see the server (or the network) go away
// without waiting for etcd's graceful shutdown of open watch streams.
type bridge struct {
	addr   string // host:port the bridge listens on; fixed for its lifetime
	target string // host:port of etcd's client listener

	wg sync.WaitGroup // the accept loop and every pipe

	mu    sync.Mutex
	ln    net.Listener          // nil while the bridge is down
	conns map[net.Conn]struct{} // both ends of every open pipe
}

// newBridge reserves a free loopback port and starts listening on it.
func newBridge(target string) (*bridge, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("etcdtest: listen for bridge: %w", err)
	}
	b := &bridge{addr: ln.Addr().String(), target: target, conns: make(map[net.Conn]struct{})}
	b.serve(ln)
	return b, nil
}

// up starts accepting again on the bridge's address. It is a no-op while up.
func (b *bridge) up() error {
	b.mu.Lock()
	running := b.ln != nil
	b.mu.Unlock()
	if running {
		return nil
	}
	// The port may linger briefly after close.
	err := testutil.Poll(relistenTimeout, func() error {
		ln, err := net.Listen("tcp", b.addr)
		if err != nil {
			return err
		}
		b.serve(ln)
		return nil
	})
	if err != nil {
		return fmt.Errorf("etcdtest: re-listen bridge on %s: %w", b.addr, err)
	}
	return nil
}

func (b *bridge) serve(ln net.Listener) {
	b.mu.Lock()
	b.ln = ln
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.acceptLoop(ln)
	}()
}

// down closes the listener and every proxied connection, and waits for all
// bridge goroutines to end. It is a no-op while down.
func (b *bridge) down() {
	b.mu.Lock()
	if b.ln != nil {
		_ = b.ln.Close() // the accept loop sees the close and ends
		b.ln = nil
	}
	for c := range b.conns {
		_ = c.Close()
		delete(b.conns, c)
	}
	b.mu.Unlock()
	b.wg.Wait()
}

func (b *bridge) acceptLoop(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed by down
		}
		if !b.track(ln, c) {
			continue
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.pipe(ln, c)
		}()
	}
}

// track registers c unless the bridge went down (or up on a new listener)
// since ln accepted it; then it closes c and reports false.
func (b *bridge) track(ln net.Listener, c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ln != ln {
		_ = c.Close()
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *bridge) untrack(c net.Conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
	_ = c.Close()
}

func (b *bridge) pipe(ln net.Listener, client net.Conn) {
	defer b.untrack(client)
	server, err := net.DialTimeout("tcp", b.target, time.Second)
	if err != nil {
		return // etcd is not there; the client sees its connection closed
	}
	if !b.track(ln, server) {
		return
	}
	defer b.untrack(server)

	done := make(chan struct{})
	go func() {
		defer close(done)
		copyAndClose(server, client)
	}()
	copyAndClose(client, server)
	<-done
}

// copyAndClose copies src to dst until either side ends, then closes both
// so that the opposite direction ends too. A closed or reset connection is
// the normal end of a pipe, so the copy error carries no information.
func copyAndClose(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// Proxy is a TCP proxy on a loopback address in front of target (an etcd
// client address): Down cuts every client that connects through it off
// etcd at once, Up lets them reconnect. A cluster's own bridge is one; a
// test gives one worker a Proxy of its own to partition that worker only.
type Proxy struct{ b *bridge }

// NewProxy starts a Proxy for target on a free loopback port; it is taken
// down when the test ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	b, err := newBridge(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(b.down)
	return &Proxy{b: b}
}

// Addr is the host:port clients connect to; it stays the same across Down
// and Up.
func (p *Proxy) Addr() string { return p.b.addr }

// Down closes the listener and every proxied connection.
func (p *Proxy) Down() { p.b.down() }

// Up accepts connections again.
func (p *Proxy) Up(tb testing.TB) {
	tb.Helper()
	if err := p.b.up(); err != nil {
		tb.Fatal(err)
	}
}
