// Package scheduler keeps every source bound to an alive worker when no
// master process does: the workers started with --scheduler elect one leader
// through an etcd concurrency.Election on P/scheduler/leader, and the leader
// binds each source that has a config but no alive bound worker to a free
// alive worker (DESIGN.md §5 "Scheduler").
//
// It owns the election and the scheduling loop. Every binding change goes
// through ha.Store.MoveBound with a comparison that this worker still owns
// leadership, so no decision is applied after leadership is lost. It never
// touches the worker's own state (the worker reacts to its bound key like to
// a master's write) and never revokes the worker's lease.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/ha"
)

// ErrSessionLost is matched (errors.Is) by the error Run returns when the
// election session ends because the worker's keepalive lease was lost.
var ErrSessionLost = errors.New("scheduler: election session ended (the worker's keepalive lease was lost)")

// Config is what a Scheduler needs.
type Config struct {
	Client *clientv3.Client
	Store  *ha.Store
	Name   string // this worker's name
	// Lease is the worker's keepalive lease; the election session is created
	// on it and never revokes it.
	Lease   clientv3.LeaseID
	Logger  *zap.Logger
	Metrics *Metrics // nil records nothing
}

// Status is the scheduler's view, for the worker's status.
type Status struct {
	Leader   string `json:"leader"` // "" while unknown
	IsLeader bool   `json:"is-leader"`
	// Sources maps source -> bound worker as the leader last saw it ("" for
	// a source no worker could take); empty on followers.
	Sources map[string]string `json:"sources"`
	Moves   int64             `json:"moves"` // bindings this worker changed while leading
}

// Scheduler campaigns for leadership and schedules while it leads. Run it
// once; Status may be called at any time from any goroutine.
type Scheduler struct {
	cfg  Config
	keys ha.Keys
	lg   *zap.Logger

	mu     sync.Mutex // guards status
	status Status
}

// New returns a Scheduler for cfg; it does nothing until Run.
func New(cfg Config) *Scheduler {
	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	return &Scheduler{cfg: cfg, keys: cfg.Store.Keys(), lg: lg.With(zap.String("scheduler", cfg.Name)),
		status: Status{Sources: map[string]string{}}}
}

// Run campaigns for leadership and, while leading, keeps every source that
// has a config bound to an alive worker. It returns nil when ctx ends and an
// error matching ErrSessionLost when the election session ends (the lease was
// lost); the caller then starts a new Scheduler on the worker's new lease.
func (s *Scheduler) Run(ctx context.Context) error {
	session, err := concurrency.NewSession(s.cfg.Client,
		concurrency.WithLease(s.cfg.Lease), concurrency.WithContext(ctx))
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("scheduler of worker %s: start the election session on lease %x: %w",
			s.cfg.Name, int64(s.cfg.Lease), err)
	}
	// Never session.Close(): it would revoke the worker's keepalive lease.
	defer session.Orphan()
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		select {
		case <-session.Done():
			cancel() // leadership is over: stop at once
		case <-sctx.Done():
		}
	}()
	go func() {
		defer wg.Done()
		s.observe(sctx, session)
	}()
	err = s.campaignLoop(ctx, sctx, session)
	cancel()
	wg.Wait()
	s.setLeader("")
	if ctx.Err() != nil {
		return nil
	}
	s.lg.Error("scheduler stops: election session ended", zap.Int64("lease", int64(s.cfg.Lease)), zap.Error(err))
	return fmt.Errorf("scheduler of worker %s on lease %x: %w; restart it on the worker's new lease (last error: %v)",
		s.cfg.Name, int64(s.cfg.Lease), ErrSessionLost, err)
}

// campaignLoop campaigns and leads until sctx ends, campaigning again when
// the election key disappears while the session lives. ctx is Run's context:
// when it ended (a clean stop), leadership is resigned.
func (s *Scheduler) campaignLoop(ctx, sctx context.Context, session *concurrency.Session) error {
	for {
		el := concurrency.NewElection(session, s.keys.SchedulerLeader())
		if err := el.Campaign(sctx, s.cfg.Name); err != nil {
			return err // a cancelled Campaign resigns by itself
		}
		s.lg.Info("scheduler leads", zap.String("key", el.Key()), zap.Int64("rev", el.Rev()))
		s.lead(sctx, el)
		if ctx.Err() != nil {
			s.resign(ctx, el)
			return ctx.Err()
		}
		if sctx.Err() != nil {
			return sctx.Err()
		}
		s.lg.Warn("scheduler lost leadership: its election key is gone; campaigning again", zap.String("key", el.Key()))
	}
}

// resign gives leadership up after a clean stop, so that another worker
// takes over without waiting for this lease to expire.
func (s *Scheduler) resign(ctx context.Context, el *concurrency.Election) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resignTimeout)
	defer cancel()
	if err := el.Resign(rctx); err != nil {
		s.lg.Warn("resign scheduler leadership; it ends when the lease expires", zap.Error(err))
		return
	}
	s.lg.Info("scheduler resigned leadership")
}

// Status returns a copy of the scheduler's view.
func (s *Scheduler) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Sources = maps.Clone(st.Sources)
	return st
}

// setLeader records the observed leader.
func (s *Scheduler) setLeader(name string) {
	s.mu.Lock()
	if !s.status.IsLeader {
		s.status.Leader = name
	}
	s.mu.Unlock()
}

// setLeading records whether this worker leads; a follower has no sources.
func (s *Scheduler) setLeading(leading bool) {
	s.mu.Lock()
	s.status.IsLeader = leading
	if leading {
		s.status.Leader = s.cfg.Name
	} else {
		s.status.Leader = ""
	}
	s.status.Sources = map[string]string{}
	s.mu.Unlock()
	s.cfg.Metrics.setLeader(leading)
	if !leading {
		s.cfg.Metrics.setUnplaced(0)
	}
}

// setSources records the leader's view of the bindings.
func (s *Scheduler) setSources(sources map[string]string) {
	s.mu.Lock()
	s.status.Sources = sources
	s.mu.Unlock()
}

// countMove counts one applied move.
func (s *Scheduler) countMove(reason string) {
	s.mu.Lock()
	s.status.Moves++
	s.mu.Unlock()
	s.cfg.Metrics.moved(reason)
}
