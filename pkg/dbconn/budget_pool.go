package dbconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/backoff"
	"github.com/dmworker/dm-worker/pkg/errs"
)

// Pool is one database/sql pool's registration with a Budget.
type Pool struct {
	b *Budget
	t *server
	// owner is the task the pool works for (status); what names it in
	// errors (`task "t1"`).
	owner, what string
	maxIdle     int
	// db is set by Open before the pool is registered; read-only then.
	db *sql.DB
	// shedMu serializes shedIdle's pair of SetMaxIdleConns.
	shedMu sync.Mutex

	// Guarded by Budget.mu: the tokens the pool's connections hold (and
	// its reserved ones), its waiting callers, its reserved tokens no
	// connection took yet (Reserve), and whether its sql.DB was closed.
	open, waiting, reserved int
	closed                  bool
}

// Open opens a lazily connecting pool to e with cfg (from e.DriverConfig,
// maybe adjusted; see Endpoint.Open) of at most maxOpen connections, for
// owner (a task name, shown in status). Its connections count against the
// budget of e's server (host:port) and idle ones close after 30 seconds.
// A nil Budget opens an unbudgeted pool of maxOpen connections whose idle
// ones are kept 5 minutes.
func (b *Budget) Open(e *Endpoint, cfg *mysql.Config, owner string, maxOpen int) (*sql.DB, error) {
	if maxOpen <= 0 {
		return nil, fmt.Errorf("%s: server %s: a pool needs at least one connection (maxOpen %d)", e.Ref.Object, e.Addr(), maxOpen)
	}
	if b == nil {
		db, err := e.Open(cfg)
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(maxOpen)
		db.SetMaxIdleConns(maxOpen)
		db.SetConnMaxIdleTime(5 * time.Minute)
		return db, nil
	}
	inner, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: server %s: %w", e.Ref.Object, cfg.Addr, err)
	}
	p := &Pool{b: b, owner: owner, what: e.Ref.Object, maxIdle: maxOpen}
	b.mu.Lock()
	p.t = b.serverLocked(e.Addr())
	b.mu.Unlock()
	db := sql.OpenDB(&connector{inner: inner, e: e, pool: p})
	db.SetMaxOpenConns(maxOpen)
	db.SetMaxIdleConns(maxOpen)
	db.SetConnMaxIdleTime(budgetIdleTime)
	p.db = db
	b.mu.Lock()
	p.t.pools[p] = struct{}{}
	b.mu.Unlock()
	return db, nil
}

// unregister is the pool's sql.DB closing: its remaining connections give
// their tokens back as they close.
func (p *Pool) unregister() {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	p.closed = true
	delete(p.t.pools, p)
	p.b.unreserveLocked(p)
}

// connect returns a connection for the pool: one of its own handed over by
// a caller that gave it up, or a new one dialed with inner once a token is
// free. "Too many connections" lowers the server's limit and is retried;
// other failures return e.ConnectError.
func (p *Pool) connect(ctx context.Context, inner driver.Connector, e *Endpoint) (driver.Conn, error) {
	began := time.Now()
	for {
		var (
			raw driver.Conn
			err error
		)
		reserved, retryIn := p.b.takeReserved(p)
		switch {
		case retryIn > 0:
			// A reserved token waits out the server's backoff.
			if !backoff.Sleep(ctx, backoff.RealClock{}, retryIn) {
				return nil, ctx.Err()
			}
			continue
		case !reserved:
			raw, err = p.acquire(ctx, began)
		}
		if err != nil {
			return nil, err
		}
		if raw != nil {
			if r, ok := raw.(driver.SessionResetter); !ok || r.ResetSession(ctx) == nil {
				return newBudgetConn(raw, p), nil
			}
			// Not reusable: close it and dial with its token.
			_ = raw.Close() // a broken connection; its close error says nothing more
			p.b.redial(p)
		}
		conn, err := inner.Connect(ctx)
		if err == nil {
			p.b.dialed(p, true)
			return newBudgetConn(conn, p), nil
		}
		if !IsTooManyConnections(err) || ctx.Err() != nil {
			p.b.dialed(p, false)
			return nil, e.ConnectError(err)
		}
		p.b.refused(p, err)
	}
}

// acquire waits until the pool holds a token for the caller, at most until
// began+MaxWait; it returns a connection handed over with the token, or
// nil (dial a new one). While it waits it does the budget's periodic work.
func (p *Pool) acquire(ctx context.Context, began time.Time) (driver.Conn, error) {
	return p.wait(ctx, p.b.enqueue(p, 0), began)
}

// wait waits until w is granted, at most until began+MaxWait, doing the
// budget's periodic work meanwhile; it returns the connection handed over
// with the token, if any.
func (p *Pool) wait(ctx context.Context, w *waiter, began time.Time) (driver.Conn, error) {
	select {
	case <-w.ready:
		return w.conn, nil
	default:
	}
	p.b.relieve(p.t)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	deadline := time.NewTimer(p.b.maxWait - time.Since(began))
	defer deadline.Stop()
	for {
		select {
		case <-w.ready:
			return w.conn, nil
		case <-ctx.Done():
			if p.b.abandon(w) {
				return w.conn, nil // granted meanwhile; a dial with ctx fails and gives it back
			}
			return nil, ctx.Err()
		case <-deadline.C:
			if p.b.abandon(w) {
				return w.conn, nil
			}
			return nil, p.b.waitError(p, time.Since(began))
		case <-tick.C:
			p.b.relieve(p.t)
		}
	}
}

// enqueue puts a waiter for p (of group tokens; 0: one to dial with) in
// line and grants what the limit allows.
func (b *Budget) enqueue(p *Pool, group int) *waiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	w := &waiter{pool: p, since: now, ready: make(chan struct{}), group: group}
	p.t.waiters = append(p.t.waiters, w)
	p.waiting++
	b.dispatchLocked(p.t, now)
	return w
}

// abandon takes w out of line; it reports whether w was granted before.
func (b *Budget) abandon(w *waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.granted {
		return true
	}
	t := w.pool.t
	t.waiters = slices.DeleteFunc(t.waiters, func(x *waiter) bool { return x == w })
	w.pool.waiting--
	return false
}

// redial counts a dial made with a token that came with a handed-over
// connection that could not be reused.
func (b *Budget) redial(p *Pool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p.t.dialing++
}

// dialed ends a dial; a failed one gives its token back.
func (b *Budget) dialed(p *Pool, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := p.t
	t.dialing--
	if ok {
		t.retry.Reset()
		return
	}
	t.open--
	p.open--
	b.dispatchLocked(t, time.Now())
}

// refused handles a dial the server refused for lack of connections: the
// token goes back, the server's limit drops to three quarters of the
// connections the worker holds (at least 1), and no dial starts before a
// backoff passes.
func (b *Budget) refused(p *Pool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	t := p.t
	t.dialing--
	t.open--
	p.open--
	t.refusals++
	t.lastErr = err
	held := t.open - t.dialing
	delay := t.retry.Next()
	t.retryAt = now.Add(delay)
	if lowered := max(1, held*3/4); lowered < t.limit {
		b.log.Warn("the "+b.kind.name+" refused a connection for lack of connections; fewer connections to it for a while",
			zap.String(b.kind.name, t.addr), zap.String("task", p.owner), zap.Int("limit", lowered), zap.Int("configured-limit", b.limit),
			zap.Int("open", held), zap.Duration("retry-in", delay), zap.Error(err))
		t.limit = lowered
	}
	t.changed = now // the recovery starts over
	b.dispatchLocked(t, now)
}

// waitError is the error of a caller of p that waited too long.
func (b *Budget) waitError(p *Pool, waited time.Duration) error {
	b.mu.Lock()
	t := p.t
	t.timeouts++
	open, limit, waiting, lastErr := t.open, t.limit, len(t.waiters), t.lastErr
	b.mu.Unlock()
	k := b.kind
	lowered := ""
	if limit < b.limit {
		lowered = fmt.Sprintf(", lowered from %s %d after the server refused connections (%v)", k.setting, b.limit, lastErr)
	}
	return errs.New(k.code, true, "%s: waited %s for a connection to the %s %s: the worker's %d connections to it "+
		"are in use (limit %d%s; %d more callers waiting); raise the %s's max_connections or the worker's %s, "+k.fix,
		p.what, waited.Round(time.Second), k.name, t.addr, open, limit, lowered, waiting, k.name, k.setting, t.addr)
}

// Resize sets the size of db, a pool opened by b.Open, to maxOpen
// connections (idle ones included).
func (b *Budget) Resize(db *sql.DB, maxOpen int) {
	if p := b.poolOf(db); p != nil {
		p.shedMu.Lock()
		defer p.shedMu.Unlock()
		p.maxIdle = maxOpen
	}
	db.SetMaxOpenConns(maxOpen)
	db.SetMaxIdleConns(maxOpen)
}
