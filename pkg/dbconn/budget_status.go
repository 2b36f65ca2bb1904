package dbconn

import (
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
	for _, t := range b.targets {
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
func (b *Budget) ownerStatusLocked(t *target, owner string, now time.Time) (TargetConnections, bool) {
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

// TargetStats are the numbers of one target of a Budget, for metrics.
type TargetStats struct {
	Target                string
	Limit, EffectiveLimit int
	Open, Waiting, Pools  int
	// Refusals counts dials the server refused for lack of connections;
	// Timeouts callers that waited MaxWait in vain.
	Refusals, Timeouts uint64
	// LongestWait is how long the oldest waiting caller has waited.
	LongestWait time.Duration
}

// Stats returns the numbers of every target the budget has seen, sorted
// by target.
func (b *Budget) Stats() []TargetStats {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	out := make([]TargetStats, 0, len(b.targets))
	for _, t := range b.targets {
		b.raiseLocked(t, now)
		st := TargetStats{Target: t.addr, Limit: b.limit, EffectiveLimit: t.limit, Open: t.open, Waiting: len(t.waiters),
			Pools: len(t.pools), Refusals: t.refusals, Timeouts: t.timeouts}
		if len(t.waiters) > 0 {
			st.LongestWait = now.Sub(t.waiters[0].since)
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(x, y TargetStats) int { return strings.Compare(x.Target, y.Target) })
	return out
}
