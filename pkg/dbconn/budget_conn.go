package dbconn

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// States of a budgetConn, as far as database/sql lets us see them.
const (
	// connInUse: new, or taken out of the pool (ResetSession), or broken.
	connInUse int32 = iota
	// connReturned: returned to the pool healthy (IsValid), idle or given
	// up: its session holds no transaction and it may serve another
	// caller of the same pool.
	connReturned
)

// budgetConn is a connection of a budgeted pool: it holds a token of its
// server until it closes. It forwards every interface the go-sql-driver
// connection implements (database/sql looks them up on the connection it
// gets: a missing one silently changes how queries are sent), and says
// "not valid" when it comes back to its pool while the budget wants the
// connection elsewhere, so database/sql closes it instead of keeping it
// idle, and Close hands it to a caller of the same pool or frees its token.
type budgetConn struct {
	inner  driver.Conn
	pool   *Pool
	state  atomic.Int32
	closed atomic.Bool
}

var (
	_ driver.Conn               = (*budgetConn)(nil)
	_ driver.ConnBeginTx        = (*budgetConn)(nil)
	_ driver.ConnPrepareContext = (*budgetConn)(nil)
	_ driver.ExecerContext      = (*budgetConn)(nil)
	_ driver.QueryerContext     = (*budgetConn)(nil)
	_ driver.Pinger             = (*budgetConn)(nil)
	_ driver.NamedValueChecker  = (*budgetConn)(nil)
	_ driver.SessionResetter    = (*budgetConn)(nil)
	_ driver.Validator          = (*budgetConn)(nil)
)

func newBudgetConn(inner driver.Conn, p *Pool) *budgetConn {
	return &budgetConn{inner: inner, pool: p}
}

// errNoBeginTx: database/sql never calls Begin on a connection that
// implements ConnBeginTx; this one needs a driver connection that does.
var errNoBeginTx = errors.New("dbconn: the driver connection does not implement BeginTx")

func (c *budgetConn) Prepare(query string) (driver.Stmt, error) { return c.inner.Prepare(query) }

// Begin is never called by database/sql (BeginTx is implemented).
func (c *budgetConn) Begin() (driver.Tx, error) { return nil, errNoBeginTx }

func (c *budgetConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.inner.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	return nil, errNoBeginTx
}

func (c *budgetConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.inner.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return c.inner.Prepare(query)
}

func (c *budgetConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if e, ok := c.inner.(driver.ExecerContext); ok {
		return e.ExecContext(ctx, query, args)
	}
	return nil, driver.ErrSkip
}

func (c *budgetConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if q, ok := c.inner.(driver.QueryerContext); ok {
		return q.QueryContext(ctx, query, args)
	}
	return nil, driver.ErrSkip
}

func (c *budgetConn) Ping(ctx context.Context) error {
	if p, ok := c.inner.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *budgetConn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.inner.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// ResetSession is called when database/sql takes the connection out of
// its pool for a caller.
func (c *budgetConn) ResetSession(ctx context.Context) error {
	c.state.Store(connInUse)
	if r, ok := c.inner.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// IsValid is called when a healthy connection comes back to its pool:
// false makes database/sql close it (Close then hands it on) when the
// budget has a better use for it.
func (c *budgetConn) IsValid() bool {
	if v, ok := c.inner.(driver.Validator); ok && !v.IsValid() {
		return false
	}
	c.state.Store(connReturned)
	return !c.pool.b.yields(c.pool)
}

// Close hands a returned connection to a waiting caller of its pool, or
// closes it and gives its token back.
func (c *budgetConn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	reusable := c.state.Load() == connReturned
	if v, ok := c.inner.(driver.Validator); ok && !v.IsValid() {
		reusable = false
	}
	if reusable && c.pool.b.handOver(c.pool, c.inner) {
		return nil
	}
	err := c.inner.Close()
	c.pool.b.release(c.pool)
	return err
}

// handOver gives raw, with its token, to a waiting caller of p when the
// budget has no better use for the token; it reports whether it did.
func (b *Budget) handOver(p *Pool, raw driver.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := p.t
	now := time.Now()
	if p.closed || t.open > t.limit {
		return false
	}
	next := t.nextLocked(now)
	if next == nil || next.pool != p && t.yieldsLocked(p, next, now) {
		return false
	}
	w := next
	if w.pool != p || w.group > 0 {
		if w = t.ownWaiterLocked(p); w == nil {
			return false
		}
	}
	t.grantLocked(w, raw)
	return true
}

// release gives the token of a closed connection of p back.
func (b *Budget) release(p *Pool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p.t.open--
	p.open--
	b.dispatchLocked(p.t, time.Now())
}

// yields reports whether a connection of p coming back to it should
// rather serve a waiting caller: one of p itself (handed over), or one of
// another pool with a better claim (the connection closes), or the server
// is over its lowered limit.
func (b *Budget) yields(p *Pool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := p.t
	if p.closed {
		return false
	}
	now := time.Now()
	b.raiseLocked(t, now)
	next := t.nextLocked(now)
	if next != nil && t.ownWaiterLocked(p) != nil {
		return true
	}
	return t.yieldsLocked(p, next, now)
}

// relieve is the budget's periodic work for server t, done by its waiting
// callers: grant what the limit allows, and at most every pollInterval/2
// ask the pools whose idle connections should serve the waiting callers
// to close them.
func (b *Budget) relieve(t *server) {
	b.mu.Lock()
	now := time.Now()
	b.dispatchLocked(t, now)
	if len(t.waiters) == 0 || now.Sub(t.lastSweep) < pollInterval/2 {
		b.mu.Unlock()
		return
	}
	t.lastSweep = now
	b.logWaitLocked(t, now)
	pools := make([]*Pool, 0, len(t.pools))
	for p := range t.pools {
		if p.open > 0 {
			pools = append(pools, p)
		}
	}
	b.mu.Unlock()
	for _, p := range pools {
		p.shedIdle()
	}
}

// shedIdle closes p's idle connections when p is idle or yields (see
// yields); database/sql closes idle connections at once when the idle
// limit drops, and the old limit is restored right after.
func (p *Pool) shedIdle() {
	st := p.db.Stats()
	if st.Idle == 0 || st.InUse > 0 && !p.b.yields(p) {
		return
	}
	p.shedMu.Lock()
	defer p.shedMu.Unlock()
	p.db.SetMaxIdleConns(-1)
	p.db.SetMaxIdleConns(p.maxIdle)
}

// logWaitLocked warns, at most every waitLogEvery, about callers waiting
// long for connections to t.
func (b *Budget) logWaitLocked(t *server, now time.Time) {
	oldest := now.Sub(t.waiters[0].since)
	if oldest < 10*time.Second || now.Sub(t.lastLog) < waitLogEvery {
		return
	}
	t.lastLog = now
	b.log.Warn("callers wait for connections to the "+b.kind.name+": all of the worker's connections to it are in use",
		zap.String(b.kind.name, t.addr), zap.Int("open", t.open), zap.Int("limit", t.limit), zap.Int("configured-limit", b.limit),
		zap.Int("waiting", len(t.waiters)), zap.Duration("longest-wait", oldest))
}
