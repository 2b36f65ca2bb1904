package dbconn

import (
	"database/sql/driver"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/backoff"
)

// DefaultTargetConnectionLimit is the number of connections a worker opens
// to one target server (host:port) at most, over all of its tasks, when the
// worker config's target-connection-limit is 0: well below MariaDB's
// default max_connections (151), leaving room for other clients.
const DefaultTargetConnectionLimit = 64

// DefaultMaxConnWait is how long one caller waits for a connection to a
// target before it gets a resumable error (BudgetOptions.MaxWait).
const DefaultMaxConnWait = 2 * time.Minute

// CodeTargetConnections is the code of the error a caller gets after
// waiting MaxWait for a connection to a target: resumable.
const CodeTargetConnections = "target-connections"

// Timings of the budget.
const (
	// pollInterval is how often a waiting caller re-checks the target: the
	// limit's recovery, the end of a backoff, idle connections to release.
	pollInterval = 100 * time.Millisecond
	// rotateAfter: a caller waiting this long takes the next connection
	// returned by a pool holding more connections than its own pool.
	rotateAfter = time.Second
	// DefaultRaiseEvery is how often a limit lowered after "Too many
	// connections" grows back by one step (a sixteenth of the limit).
	DefaultRaiseEvery = 5 * time.Second
	// budgetIdleTime closes connections of budgeted pools idle this long.
	budgetIdleTime = 30 * time.Second
	// waitLogEvery bounds the warnings about callers waiting, per target.
	waitLogEvery = 30 * time.Second
)

// BudgetOptions configure a Budget.
type BudgetOptions struct {
	// Limit is the number of connections to one target server at most;
	// <= 0: DefaultTargetConnectionLimit.
	Limit int
	// MaxWait bounds one caller's wait for a connection (<= 0:
	// DefaultMaxConnWait).
	MaxWait time.Duration
	// RaiseEvery is the recovery step of a lowered limit (<= 0:
	// DefaultRaiseEvery).
	RaiseEvery time.Duration
	// Logger logs lowered limits and long waits; nil: none.
	Logger *zap.Logger
}

// Budget bounds the connections the pools opened through it (Budget.Open)
// hold to each target server, keyed by host:port, over all their owners
// (tasks). A connection takes a token of its target before it dials and
// gives it back when it closes. Callers beyond the limit wait in line;
// while they wait, pools holding more than their share, or idle
// connections, give theirs up (a pool's own waiting caller gets the
// connection directly, without a new dial). A server that refuses a
// connection with "Too many connections" (1040, 1203, 1226) lowers the
// target's limit for a while (multiplicative decrease, then one step per
// RaiseEvery) and the caller waits and retries with backoff instead of
// failing; only a wait longer than MaxWait fails, resumably, naming the
// target, the limit and the fix.
//
// A Budget is safe for concurrent use; it starts no goroutine (waiting
// callers do its periodic work). Code holding one connection of a budgeted
// pool must not wait for a second one of the same target: if every
// connection were held that way, none would come back.
type Budget struct {
	limit      int
	maxWait    time.Duration
	raiseEvery time.Duration
	log        *zap.Logger

	mu sync.Mutex
	// targets, and every field of target, Pool and waiter documented as
	// guarded by the budget, are guarded by mu.
	targets map[string]*target
}

// NewBudget returns a Budget with o's settings.
func NewBudget(o BudgetOptions) *Budget {
	b := &Budget{limit: o.Limit, maxWait: o.MaxWait, raiseEvery: o.RaiseEvery, log: o.Logger, targets: map[string]*target{}}
	if b.limit <= 0 {
		b.limit = DefaultTargetConnectionLimit
	}
	if b.maxWait <= 0 {
		b.maxWait = DefaultMaxConnWait
	}
	if b.raiseEvery <= 0 {
		b.raiseEvery = DefaultRaiseEvery
	}
	if b.log == nil {
		b.log = zap.NewNop()
	}
	return b
}

// Limit is the configured limit per target.
func (b *Budget) Limit() int { return b.limit }

// target is the budget of one server; every field is guarded by Budget.mu.
type target struct {
	addr string
	// limit is the effective limit: Budget.limit, or less after the server
	// refused connections; changed is when it last moved.
	limit   int
	changed time.Time
	// open counts tokens: connections open or being dialed; dialing the
	// latter.
	open, dialing int
	waiters       []*waiter // in arrival order
	pools         map[*Pool]struct{}
	// After a refusal no dial starts before retryAt.
	retryAt time.Time
	retry   *backoff.Backoff
	lastErr error // the server's last refusal
	// Counters for metrics and the log.
	refusals, timeouts uint64
	lastSweep, lastLog time.Time
}

// waiter is one caller waiting for a token; fields guarded by Budget.mu
// until ready is closed, read-only by the caller afterwards.
type waiter struct {
	pool  *Pool
	since time.Time
	ready chan struct{} // closed when granted
	// granted: the caller holds a token; conn is a connection of its own
	// pool handed over with the token (nil: dial a new one).
	granted bool
	conn    driver.Conn
}

// targetLocked returns the target of addr, creating it.
func (b *Budget) targetLocked(addr string) *target {
	t, ok := b.targets[addr]
	if !ok {
		t = &target{addr: addr, limit: b.limit, pools: map[*Pool]struct{}{}, retry: backoff.New(100*time.Millisecond, 5*time.Second)}
		b.targets[addr] = t
	}
	return t
}

// raiseLocked grows a lowered limit back by one step per raiseEvery.
func (b *Budget) raiseLocked(t *target, now time.Time) {
	if t.limit >= b.limit {
		return
	}
	steps := int(now.Sub(t.changed) / b.raiseEvery)
	if steps <= 0 {
		return
	}
	t.limit = min(b.limit, t.limit+steps*max(1, b.limit/16))
	t.changed = t.changed.Add(time.Duration(steps) * b.raiseEvery)
}

// fairLocked is the share of the limit each active pool (holding or
// waiting for a connection) may keep while others wait.
func (t *target) fairLocked() int {
	active := 0
	for p := range t.pools {
		if p.open > 0 || p.waiting > 0 {
			active++
		}
	}
	return max(1, t.limit/max(1, active))
}

// nextLocked is the waiter the next token goes to: the oldest when it has
// waited rotateAfter, else the first whose pool holds less than its fair
// share, else the oldest.
func (t *target) nextLocked(now time.Time) *waiter {
	if len(t.waiters) == 0 {
		return nil
	}
	head := t.waiters[0]
	if now.Sub(head.since) >= rotateAfter {
		return head
	}
	fair := t.fairLocked()
	for _, w := range t.waiters {
		if w.pool.open < fair {
			return w
		}
	}
	return head
}

// yieldsLocked reports whether a connection of p that comes back should
// be closed rather than kept: the target is over its limit, or next (of
// another pool) has a better claim to the token.
func (t *target) yieldsLocked(p *Pool, next *waiter, now time.Time) bool {
	if t.open > t.limit && p.open > t.fairLocked() {
		return true
	}
	if next == nil || next.pool == p {
		return false
	}
	if now.Sub(next.since) >= rotateAfter && p.open > next.pool.open {
		return true
	}
	fair := t.fairLocked()
	return next.pool.open < fair && p.open > fair
}

// ownWaiterLocked is p's oldest waiter, nil when none.
func (t *target) ownWaiterLocked(p *Pool) *waiter {
	for _, w := range t.waiters {
		if w.pool == p {
			return w
		}
	}
	return nil
}

// grantLocked gives w a token (with c, a connection of w's pool that keeps
// its token, or nil for a new token) and wakes it.
func (t *target) grantLocked(w *waiter, c driver.Conn) {
	t.waiters = slices.DeleteFunc(t.waiters, func(x *waiter) bool { return x == w })
	w.pool.waiting--
	if c == nil {
		t.open++
		t.dialing++
		w.pool.open++
	}
	w.granted, w.conn = true, c
	close(w.ready)
}

// dispatchLocked grants tokens while the limit and the backoff allow.
func (b *Budget) dispatchLocked(t *target, now time.Time) {
	b.raiseLocked(t, now)
	for len(t.waiters) > 0 && t.open < t.limit && !now.Before(t.retryAt) {
		t.grantLocked(t.nextLocked(now), nil)
	}
}

// tooManyConnections are the server errors meaning it has no connection
// to spare (for everyone, or for this user).
var tooManyConnections = map[uint16]bool{
	1040: true, // ER_CON_COUNT_ERROR: Too many connections
	1203: true, // ER_TOO_MANY_USER_CONNECTIONS: max_user_connections
	1226: true, // ER_USER_LIMIT_REACHED: max_user_connections / max_connections_per_hour
}

// IsTooManyConnections reports whether err is a server's refusal of a new
// connection for lack of connections (1040, 1203, 1226).
func IsTooManyConnections(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && tooManyConnections[me.Number]
}
