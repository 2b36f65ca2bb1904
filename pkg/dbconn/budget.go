package dbconn

import (
	"database/sql/driver"
	"errors"
	"slices"
	"sync"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/backoff"
)

// DefaultTargetConnectionLimit is the number of connections a worker opens
// to one target server (host:port) at most, over all of its tasks, when the
// worker config's target-connection-limit is 0: well below MariaDB's
// default max_connections (151), leaving room for other clients.
const DefaultTargetConnectionLimit = 64

// DefaultSourceConnectionLimit is the number of connections a worker
// opens to one source server (host:port) at most, binlog dumps not
// counted, when the worker config's source-connection-limit is 0: two
// dumps of the default 4 threads (6 connections each) and a few prechecks,
// validators and stream snapshots at once, a tenth of MariaDB's and MySQL's
// default max_connections (151). The source serves its applications first.
const DefaultSourceConnectionLimit = 16

// DefaultMaxConnWait is how long one caller waits for a connection to a
// server before it gets a resumable error (BudgetOptions.MaxWait).
const DefaultMaxConnWait = 2 * time.Minute

// CodeTargetConnections and CodeSourceConnections are the codes of the
// error a caller gets after waiting MaxWait for a connection to a target or
// a source: resumable.
const (
	CodeTargetConnections = "target-connections"
	CodeSourceConnections = "source-connections"
)

// Kind is the side of replication whose servers a Budget bounds the
// connections to: it names them in logs and errors and picks the default
// limit, the setting and the advice an error gives.
type Kind int

// The kinds of budget.
const (
	// Targets: the servers tasks write to (target-connection-limit).
	Targets Kind = iota
	// Sources: the servers tasks, relays and streams read from
	// (source-connection-limit); binlog dumps are counted apart
	// (BinlogReader).
	Sources
)

// kindInfo is what differs between the kinds of budget.
type kindInfo struct {
	// name is the servers' role in messages: "target", "source".
	name string
	// setting is the worker config key of the limit.
	setting      string
	code         string
	defaultLimit int
	// fix is what, besides the server's max_connections and the limit,
	// lowers the connections wanted of a server (%s is its address).
	fix string
}

func (k Kind) info() kindInfo {
	if k == Sources {
		return kindInfo{name: "source", setting: "source-connection-limit", code: CodeSourceConnections,
			defaultLimit: DefaultSourceConnectionLimit,
			fix:          "or lower mydumper threads, validator worker-count or the number of tasks dumping from %s at once"}
	}
	return kindInfo{name: "target", setting: "target-connection-limit", code: CodeTargetConnections,
		defaultLimit: DefaultTargetConnectionLimit,
		fix:          "or lower syncer worker-count, loader pool-size or validator worker-count of the tasks writing to %s"}
}

// String is the servers' role: "target" or "source".
func (k Kind) String() string { return k.info().name }

// Timings of the budget.
const (
	// pollInterval is how often a waiting caller re-checks the server: the
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
	// waitLogEvery bounds the warnings about callers waiting, per server.
	waitLogEvery = 30 * time.Second
)

// BudgetOptions configure a Budget.
type BudgetOptions struct {
	// Kind is the side of the servers (Targets, the zero value, or
	// Sources).
	Kind Kind
	// Limit is the number of connections to one server at most; <= 0:
	// the kind's default (DefaultTargetConnectionLimit,
	// DefaultSourceConnectionLimit).
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
// hold to each server of its kind (targets or sources), keyed by
// host:port, over all their owners (tasks, the relay, streams). A
// connection takes a token of its server before it dials and
// gives it back when it closes. Callers beyond the limit wait in line;
// while they wait, pools holding more than their share, or idle
// connections, give theirs up (a pool's own waiting caller gets the
// connection directly, without a new dial). A server that refuses a
// connection with "Too many connections" (1040, 1203, 1226) lowers the
// server's limit for a while (multiplicative decrease, then one step per
// RaiseEvery) and the caller waits and retries with backoff instead of
// failing; only a wait longer than MaxWait fails, resumably, naming the
// server, the limit and the fix. A budget of sources also counts each
// server's binlog dumps (BinlogReader), which take no token, and learns
// each server's flavor once (Flavor).
//
// A Budget is safe for concurrent use; it starts no goroutine (waiting
// callers do its periodic work). Code holding one connection of a budgeted
// pool must not wait for a second one of the same server (unless it
// reserved them together, Reserve): if every connection were held that
// way, none would come back.
type Budget struct {
	kind       kindInfo
	limit      int
	maxWait    time.Duration
	raiseEvery time.Duration
	log        *zap.Logger

	mu sync.Mutex
	// servers, and every field of server, Pool and waiter documented as
	// guarded by the budget, are guarded by mu.
	servers map[string]*server
}

// NewBudget returns a Budget with o's settings.
func NewBudget(o BudgetOptions) *Budget {
	b := &Budget{kind: o.Kind.info(), limit: o.Limit, maxWait: o.MaxWait, raiseEvery: o.RaiseEvery, log: o.Logger, servers: map[string]*server{}}
	if b.limit <= 0 {
		b.limit = b.kind.defaultLimit
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

// Limit is the configured limit per server.
func (b *Budget) Limit() int { return b.limit }

// server is the budget of one server; every field is guarded by Budget.mu.
type server struct {
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
	// binlogReaders counts the open binlog dumps from the server (no
	// token; see BinlogReader).
	binlogReaders int
	// flavor is the server's, once learned (see Flavor); "" before.
	// learning is closed when the running detection ends; nil when none
	// runs.
	flavor   string
	learning chan struct{}
}

// waiter is one caller waiting for a token; fields guarded by Budget.mu
// until ready is closed, read-only by the caller afterwards.
type waiter struct {
	pool  *Pool
	since time.Time
	ready chan struct{} // closed when granted
	// group > 0: the waiter reserves group tokens at once for its pool
	// (Reserve), at most the server's limit; never handed a connection.
	group int
	// granted: the caller holds a token; conn is a connection of its own
	// pool handed over with the token (nil: dial a new one).
	granted bool
	conn    driver.Conn
}

// needLocked is how many tokens w takes when granted.
func (w *waiter) needLocked(t *server) int {
	if w.group == 0 {
		return 1
	}
	return max(1, min(w.group, t.limit))
}

// serverLocked returns the server of addr, creating it.
func (b *Budget) serverLocked(addr string) *server {
	t, ok := b.servers[addr]
	if !ok {
		t = &server{addr: addr, limit: b.limit, pools: map[*Pool]struct{}{}, retry: backoff.New(100*time.Millisecond, 5*time.Second)}
		b.servers[addr] = t
	}
	return t
}

// raiseLocked grows a lowered limit back by one step per raiseEvery.
func (b *Budget) raiseLocked(t *server, now time.Time) {
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
func (t *server) fairLocked() int {
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
func (t *server) nextLocked(now time.Time) *waiter {
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
// be closed rather than kept: the server is over its limit, or next (of
// another pool) has a better claim to the token.
func (t *server) yieldsLocked(p *Pool, next *waiter, now time.Time) bool {
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

// ownWaiterLocked is p's oldest waiter of one connection, nil when none.
func (t *server) ownWaiterLocked(p *Pool) *waiter {
	for _, w := range t.waiters {
		if w.pool == p && w.group == 0 {
			return w
		}
	}
	return nil
}

// grantLocked gives w a token (with c, a connection of w's pool that keeps
// its token, or nil for a new token) and wakes it.
func (t *server) grantLocked(w *waiter, c driver.Conn) {
	t.waiters = slices.DeleteFunc(t.waiters, func(x *waiter) bool { return x == w })
	w.pool.waiting--
	switch {
	case w.group > 0:
		n := w.needLocked(t)
		t.open += n
		w.pool.open += n
		w.pool.reserved += n
		w.group = n
	case c == nil:
		t.open++
		t.dialing++
		w.pool.open++
	}
	w.granted, w.conn = true, c
	close(w.ready)
}

// dispatchLocked grants tokens while the limit and the backoff allow.
func (b *Budget) dispatchLocked(t *server, now time.Time) {
	b.raiseLocked(t, now)
	for len(t.waiters) > 0 && !now.Before(t.retryAt) {
		// The chosen waiter waits for all the tokens it needs; no smaller
		// one passes it meanwhile, so a group is not starved.
		w := t.nextLocked(now)
		if t.open+w.needLocked(t) > t.limit {
			return
		}
		t.grantLocked(w, nil)
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
// connection for lack of connections (1040, 1203, 1226), as go-sql-driver
// or go-mysql (binlog dumps) reports it.
func IsTooManyConnections(err error) bool {
	var (
		me *mysql.MySQLError
		ge *gomysql.MyError
	)
	return errors.As(err, &me) && tooManyConnections[me.Number] || errors.As(err, &ge) && tooManyConnections[ge.Code]
}
