package dbconn

import (
	"context"
	"database/sql"
	"time"
)

// Reserve waits until n tokens of the server of db, a pool opened by
// b.Open, are free and takes them at once for db (n at most the server's
// limit in force): db's next n new connections dial with them without
// waiting. Code that must hold several connections at the same time (a
// dump's readers and its lock session) reserves them first, so that two
// such callers never each hold part of what they need and wait for the
// rest from the other. release gives back the tokens no connection took
// (more calls do nothing); tokens taken by connections go back as those
// close. While a reservation waits, no smaller caller of the server is
// served before it. The wait is bounded like a connection's (MaxWait:
// the resumable error naming the server and the limit) and by ctx. A nil
// Budget, or a db it did not open, reserves nothing.
func (b *Budget) Reserve(ctx context.Context, db *sql.DB, n int) (release func(), err error) {
	p := b.poolOf(db)
	if p == nil || n <= 0 {
		return func() {}, nil
	}
	began := time.Now()
	w := b.enqueue(p, n)
	if _, err := p.wait(ctx, w, began); err != nil {
		return nil, err
	}
	released := false
	release = func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if !released {
			released = true
			b.unreserveLocked(p)
		}
	}
	if err := ctx.Err(); err != nil {
		release() // granted as ctx ended
		return nil, err
	}
	return release, nil
}

// poolOf is the registration of db, nil when b is nil or did not open it.
func (b *Budget) poolOf(db *sql.DB) *Pool {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.servers {
		for p := range t.pools {
			if p.db == db {
				return p
			}
		}
	}
	return nil
}

// takeReserved takes one of p's reserved tokens for a dial: ok, or false
// when p has none; after the server refused a connection it is not taken
// before the backoff passes, and retryIn says how long that is.
func (b *Budget) takeReserved(p *Pool) (ok bool, retryIn time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.reserved == 0 {
		return false, 0
	}
	if d := time.Until(p.t.retryAt); d > 0 {
		return false, d
	}
	p.reserved--
	p.t.dialing++
	return true, 0
}

// unreserveLocked gives p's reserved tokens no connection took back.
func (b *Budget) unreserveLocked(p *Pool) {
	if p.reserved == 0 {
		return
	}
	p.t.open -= p.reserved
	p.open -= p.reserved
	p.reserved = 0
	b.dispatchLocked(p.t, time.Now())
}
