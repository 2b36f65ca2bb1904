package dbconn

import (
	"database/sql"
	"slices"
	"strings"
	"time"
)

// TargetConnections is a task's view of its target's connection budget,
// as the subtask status shows it ("target-connections").
type TargetConnections struct {
	// Target is the server, host:port.
	Target string `json:"target"`
	// Limit is the worker's target-connection-limit; EffectiveLimit is
	// lower for a while after the server refused connections.
	Limit          int `json:"limit"`
	EffectiveLimit int `json:"effective-limit"`
	// Open and Waiting are the worker's connections to the target (over
	// all tasks) and the callers waiting for one.
	Open    int `json:"open"`
	Waiting int `json:"waiting"`
	// TaskOpen and TaskWaiting are the task's share of them; WaitingSince
	// is when the task's longest waiting caller started waiting.
	TaskOpen     int        `json:"task-open"`
	TaskWaiting  int        `json:"task-waiting"`
	WaitingSince *time.Time `json:"waiting-since,omitempty"`
}

// OwnerStatus returns the connections of owner's pools (nil when owner
// has no open pool). When owner has pools to several targets, the one it
// waits for, else the one where it holds most connections, is shown.
func (b *Budget) OwnerStatus(owner string) *TargetConnections {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	var best *TargetConnections
	for _, t := range b.servers {
		st, ok := b.ownerStatusLocked(t, owner, now)
		if !ok {
			continue
		}
		if best == nil || st.TaskWaiting > best.TaskWaiting ||
			st.TaskWaiting == best.TaskWaiting && (st.TaskOpen > best.TaskOpen || st.TaskOpen == best.TaskOpen && st.Target < best.Target) {
			best = &st
		}
	}
	return best
}

// ownerStatusLocked is owner's status at t; false when owner has no pool
// there.
func (b *Budget) ownerStatusLocked(t *server, owner string, now time.Time) (TargetConnections, bool) {
	b.raiseLocked(t, now)
	st := TargetConnections{Target: t.addr, Limit: b.limit, EffectiveLimit: t.limit, Open: t.open, Waiting: len(t.waiters)}
	found := false
	for p := range t.pools {
		if p.owner == owner {
			found = true
			st.TaskOpen += p.open
		}
	}
	for _, w := range t.waiters {
		if w.pool.owner != owner {
			continue
		}
		found = true
		st.TaskWaiting++
		if st.WaitingSince == nil {
			since := w.since.UTC()
			st.WaitingSince = &since
		}
	}
	return st, found
}

// ServerStats are the numbers of one server of a Budget, for metrics.
type ServerStats struct {
	// Addr is the server, host:port.
	Addr                  string
	Limit, EffectiveLimit int
	Open, Waiting, Pools  int
	// Refusals counts dials the server refused for lack of connections;
	// Timeouts callers that waited MaxWait in vain.
	Refusals, Timeouts uint64
	// LongestWait is how long the oldest waiting caller has waited.
	LongestWait time.Duration
	// BinlogReaders counts the binlog dumps open from the server (sources
	// only; they take no token).
	BinlogReaders int
}

// Stats returns the numbers of every server the budget has seen, sorted
// by address.
func (b *Budget) Stats() []ServerStats {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	out := make([]ServerStats, 0, len(b.servers))
	for _, t := range b.servers {
		b.raiseLocked(t, now)
		st := ServerStats{Addr: t.addr, Limit: b.limit, EffectiveLimit: t.limit, Open: t.open, Waiting: len(t.waiters),
			Pools: len(t.pools), Refusals: t.refusals, Timeouts: t.timeouts, BinlogReaders: t.binlogReaders}
		if len(t.waiters) > 0 {
			st.LongestWait = now.Sub(t.waiters[0].since)
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(x, y ServerStats) int { return strings.Compare(x.Addr, y.Addr) })
	return out
}

// SourceConnections is the worker's connections to its bound source, as
// the worker status shows them ("source-connections").
type SourceConnections struct {
	// Source is the server, host:port.
	Source string `json:"source"`
	// Limit is the worker's source-connection-limit; EffectiveLimit is
	// lower for a while after the server refused connections.
	Limit          int `json:"limit"`
	EffectiveLimit int `json:"effective-limit"`
	// Open counts the budget's tokens (connections open or being
	// dialed); InUse and Idle the open ones serving a caller and idle in
	// their pools; Waiting the callers waiting for one, the longest since
	// WaitingSince.
	Open         int        `json:"open"`
	InUse        int        `json:"in-use"`
	Idle         int        `json:"idle"`
	Waiting      int        `json:"waiting"`
	WaitingSince *time.Time `json:"waiting-since,omitempty"`
	// BinlogReaders counts the binlog dumps from the source (the relay,
	// or each task, validator or stream reading it directly): one
	// connection each, not in the budget.
	BinlogReaders int `json:"binlog-readers"`
	// Refusals counts new connections the source refused for lack of
	// connections (each was retried); WaitTimeouts callers that waited
	// in vain (they got a resumable error).
	Refusals     uint64 `json:"refusals"`
	WaitTimeouts uint64 `json:"wait-timeouts"`
}

// ServerStatus returns the connections to the server at addr (host:port);
// one the budget has not seen yet shows none in use.
func (b *Budget) ServerStatus(addr string) *SourceConnections {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	t := b.serverLocked(addr)
	now := time.Now()
	b.raiseLocked(t, now)
	st := &SourceConnections{Source: addr, Limit: b.limit, EffectiveLimit: t.limit, Open: t.open, Waiting: len(t.waiters),
		BinlogReaders: t.binlogReaders, Refusals: t.refusals, WaitTimeouts: t.timeouts}
	if len(t.waiters) > 0 {
		since := t.waiters[0].since.UTC()
		st.WaitingSince = &since
	}
	dbs := make([]*sql.DB, 0, len(t.pools))
	for p := range t.pools {
		dbs = append(dbs, p.db)
	}
	b.mu.Unlock()
	// database/sql's counts, read outside mu: its lock is taken while it
	// calls into the budget.
	for _, db := range dbs {
		s := db.Stats()
		st.InUse += s.InUse
		st.Idle += s.Idle
	}
	return st
}
