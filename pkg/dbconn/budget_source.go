package dbconn

import (
	"context"
	"strings"
	"sync"
)

// BinlogReader counts one binlog dump from the server at addr (host:port)
// until done is called (more calls do nothing). Binlog dumps take no token
// of the budget: each reader holds exactly one connection for as long as
// it reads, and waiting for a token would stall replication behind
// short-lived queries; status and metrics show them beside the budget. A
// nil Budget counts nothing.
func (b *Budget) BinlogReader(addr string) (done func()) {
	if b == nil {
		return func() {}
	}
	b.mu.Lock()
	b.serverLocked(addr).binlogReaders++
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.serverLocked(addr).binlogReaders--
			b.mu.Unlock()
		})
	}
}

// Flavor returns the flavor of ep's server, config.FlavorMariaDB or
// config.FlavorMySQL: configured when it is not "", else learned once per
// server (host:port) with SELECT VERSION() over one connection of the
// budget, closed right after, and remembered for the budget's life, so
// that 200 subtasks of a source ask it once, not 200 times. Concurrent
// callers wait for one query (under their own ctx); a failure is not
// remembered. A nil Budget asks the server every time, over a connection
// of its own.
func (b *Budget) Flavor(ctx context.Context, ep *Endpoint, configured string) (string, error) {
	if f := strings.ToLower(configured); f != "" {
		return f, nil
	}
	if b == nil {
		return detectOnce(ctx, nil, ep)
	}
	addr := ep.Addr()
	for {
		b.mu.Lock()
		t := b.serverLocked(addr)
		if t.flavor != "" {
			f := t.flavor
			b.mu.Unlock()
			return f, nil
		}
		if wait := t.learning; wait != nil {
			b.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		learning := make(chan struct{})
		t.learning = learning
		b.mu.Unlock()
		f, err := detectOnce(ctx, b, ep)
		b.mu.Lock()
		if err == nil {
			t.flavor = f
		}
		t.learning = nil
		close(learning)
		b.mu.Unlock()
		return f, err
	}
}

// detectOnce asks ep's server its flavor over a pool of one connection
// from b (nil: a pool of its own), closed afterwards.
func detectOnce(ctx context.Context, b *Budget, ep *Endpoint) (string, error) {
	db, err := b.Open(ep, ep.DriverConfig(), "flavor", 1)
	if err != nil {
		return "", err
	}
	f, err := DetectFlavor(ctx, db)
	_ = db.Close() // the connection's close error says nothing about the answer
	return f, err
}
