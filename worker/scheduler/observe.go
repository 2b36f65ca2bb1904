package scheduler

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/ha"
)

// observeEvery bounds how stale the observed leader may get if a watch
// event is missed.
const observeEvery = 2 * time.Second

// observe keeps Status.Leader up to date until ctx ends: it reads the
// election's leader after every change of the election prefix and every
// observeEvery.
func (s *Scheduler) observe(ctx context.Context, session *concurrency.Session) {
	el := concurrency.NewElection(session, s.keys.SchedulerLeader())
	poke := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Returns only when wctx ends.
		_ = ha.Watch(wctx, s.cfg.Client, s.keys.SchedulerLeader()+"/", ignoreValue, poker{ch: poke}, ha.WatchOptions{Logger: s.lg})
	}()
	ticker := time.NewTicker(observeEvery)
	defer ticker.Stop()
	for {
		s.readLeader(wctx, el)
		select {
		case <-wctx.Done():
			return
		case <-ticker.C:
		case <-poke:
		}
	}
}

// readLeader reads the current leader's name into the status; "" when
// there is none or it cannot be read.
func (s *Scheduler) readLeader(ctx context.Context, el *concurrency.Election) {
	ctx, cancel := context.WithTimeout(ctx, passTimeout)
	defer cancel()
	resp, err := el.Leader(ctx)
	switch {
	case errors.Is(err, concurrency.ErrElectionNoLeader):
		s.setLeader("")
	case err != nil:
		if ctx.Err() == nil {
			s.lg.Debug("read the scheduler leader", zap.Error(err))
		}
		s.setLeader("")
	default:
		s.setLeader(string(resp.Kvs[0].Value))
	}
}

// poker is an ha.Handler that pokes ch (without blocking) on every relist
// and on every event whose key is relevant (all when relevant is nil).
type poker struct {
	ch       chan<- struct{}
	relevant func(key string) bool
}

// Resync pokes.
func (p poker) Resync(context.Context, []ha.Item[struct{}], int64) error {
	p.poke()
	return nil
}

// Changed pokes when the key is relevant.
func (p poker) Changed(_ context.Context, it ha.Item[struct{}]) error {
	if p.relevant == nil || p.relevant(it.Key) {
		p.poke()
	}
	return nil
}

func (p poker) poke() {
	select {
	case p.ch <- struct{}{}:
	default:
	}
}

// ignoreValue is the Decoder of watches that only need to know that
// something changed.
func ignoreValue(string, []byte) (struct{}, error) { return struct{}{}, nil }
