package scheduler

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/ha"
)

// Timing of the leader loop.
const (
	debounce      = 100 * time.Millisecond // events within it make one pass
	resyncEvery   = 2 * time.Second        // a pass at least this often
	passTimeout   = 5 * time.Second        // bounds one pass's etcd calls
	resignTimeout = 2 * time.Second
)

// leaderState is what the leader loop remembers between passes; it is used
// by the loop's goroutine only.
type leaderState struct {
	unplaced map[string]bool // sources already logged as unplaced
	bad      map[string]bool // malformed keys already logged
}

// lead runs scheduling passes until ctx ends or the election key of el is
// gone; on return this worker no longer acts as leader.
func (s *Scheduler) lead(ctx context.Context, el *concurrency.Election) {
	var wg sync.WaitGroup
	defer wg.Wait()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.setLeading(true)
	defer s.setLeading(false)

	poke := make(chan struct{}, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.watch(lctx, poke)
	}()
	st := &leaderState{unplaced: map[string]bool{}, bad: map[string]bool{}}
	ticker := time.NewTicker(resyncEvery)
	defer ticker.Stop()
	for {
		retry, leading := s.pass(lctx, el, st)
		if !leading || lctx.Err() != nil {
			return
		}
		if !retry {
			select {
			case <-lctx.Done():
				return
			case <-ticker.C:
				continue
			case <-poke:
			}
		}
		if !sleep(lctx, debounce) {
			return
		}
		drain(poke)
	}
}

// pass reads the cluster, decides and applies the moves. retry is true when
// a move's transaction found the cluster changed (a new pass is due at
// once); leading is false when the election key is gone.
func (s *Scheduler) pass(ctx context.Context, el *concurrency.Election, st *leaderState) (retry, leading bool) {
	ctx, cancel := context.WithTimeout(ctx, passTimeout)
	defer cancel()
	v, err := readView(ctx, s.cfg.Store, el.Key(), el.Rev())
	if err != nil {
		if ctx.Err() == nil {
			s.lg.Warn("scheduling pass: read the cluster; retrying at the next event or tick", zap.Error(err))
		}
		return false, true
	}
	if !v.leading {
		return false, false
	}
	st.logBad(s.lg, v.bad)
	p := decide(v.snap)
	st.logUnplaced(s.lg, p.Unplaced, v.snap.Rev)
	s.cfg.Metrics.setUnplaced(len(p.Unplaced))
	for _, mv := range p.Moves {
		ok, err := s.apply(ctx, el, mv, v.snap.Rev)
		if err != nil || !ok {
			p.Sources[mv.Source] = ""
			retry = retry || err == nil // a conflict re-reads at once; an error waits
		}
	}
	for _, sb := range p.Stale {
		ok, err := s.removeStale(ctx, el, sb, v.snap.Rev)
		retry = retry || (err == nil && !ok)
	}
	s.setSources(p.Sources)
	return retry, true
}

// removeStale deletes a dead worker's binding to a source another worker
// serves, guarded by leadership and by the worker still being dead.
func (s *Scheduler) removeStale(ctx context.Context, el *concurrency.Election, sb stale, rev int64) (bool, error) {
	fields := []zap.Field{zap.String("source", sb.Source), zap.String("worker", sb.Worker), zap.Int64("rev", rev)}
	ok, err := s.cfg.Store.DeleteBoundIf(ctx, sb.Worker, sb.Revision, leaderGuard(el),
		clientv3.Compare(clientv3.CreateRevision(s.keys.Keepalive(sb.Worker)), "=", 0))
	switch {
	case err != nil:
		s.lg.Warn("scheduler could not remove a stale binding; retrying at the next tick", append(fields, zap.Error(err))...)
	case ok:
		s.lg.Info("scheduler removed the stale binding of a dead worker to a source another worker serves", fields...)
		s.countMove(ReasonStale)
	}
	return ok, err
}

// apply runs one move in a transaction guarded by this worker's leadership
// and by the old workers still being dead.
func (s *Scheduler) apply(ctx context.Context, el *concurrency.Election, mv move, rev int64) (bool, error) {
	extra := []clientv3.Cmp{leaderGuard(el)}
	for _, w := range sortedKeys(mv.From) {
		extra = append(extra, clientv3.Compare(clientv3.CreateRevision(s.keys.Keepalive(w)), "=", 0))
	}
	fields := []zap.Field{zap.String("source", mv.Source), zap.Strings("from", sortedKeys(mv.From)),
		zap.Strings("relay-from", sortedKeys(mv.RelayFrom)), zap.String("to", mv.To),
		zap.String("reason", mv.Reason), zap.Int64("rev", rev)}
	ok, err := s.cfg.Store.MoveBound(ctx, mv.Move, extra...)
	switch {
	case err != nil:
		s.lg.Warn("scheduler move failed; retrying at the next tick", append(fields, zap.Error(err))...)
	case !ok:
		s.lg.Info("scheduler move refused: the cluster changed meanwhile; deciding again", fields...)
	default:
		s.lg.Info("scheduler moved source", fields...)
		s.countMove(mv.Reason)
	}
	return ok, err
}

// leaderGuard is the comparison that holds while el's session still owns
// the leadership it won.
func leaderGuard(el *concurrency.Election) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(el.Key()), "=", el.Rev())
}

// watch pokes on every change of keepalives, worker infos, bound and
// relay-bound keys and source configs, and on every relist.
func (s *Scheduler) watch(ctx context.Context, poke chan<- struct{}) {
	k := s.keys
	prefixes := []string{k.KeepalivePrefix(), k.WorkerInfoPrefix(), k.BoundPrefix(), k.RelayBoundPrefix(), k.SourceConfigPrefix()}
	h := poker{ch: poke, relevant: func(key string) bool {
		return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(key, p) })
	}}
	// Returns only when ctx ends.
	_ = ha.Watch(ctx, s.cfg.Client, k.Prefix+"/", ignoreValue, h, ha.WatchOptions{Logger: s.lg})
}

// logBad logs each malformed key once per leadership.
func (st *leaderState) logBad(lg *zap.Logger, bad map[string]error) {
	for key, err := range bad {
		if !st.bad[key] {
			st.bad[key] = true
			lg.Warn("scheduler ignores a malformed key; fix or delete it", zap.String("key", key), zap.Error(err))
		}
	}
}

// logUnplaced logs a source once when it becomes unplaced, and once when it
// is no longer.
func (st *leaderState) logUnplaced(lg *zap.Logger, unplaced []string, rev int64) {
	now := make(map[string]bool, len(unplaced))
	for _, src := range unplaced {
		now[src] = true
		if !st.unplaced[src] {
			lg.Warn("scheduler found no free alive worker for source; start another worker or free one",
				zap.String("source", src), zap.String("reason", "no-free-worker"), zap.Int64("rev", rev))
		}
	}
	for src := range st.unplaced {
		if !now[src] {
			lg.Info("source is no longer waiting for a free worker", zap.String("source", src), zap.Int64("rev", rev))
		}
	}
	st.unplaced = now
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// drain empties a poke channel.
func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}
