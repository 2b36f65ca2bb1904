package worker

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/worker/scheduler"
)

// startScheduler runs the scheduler of this registration (the worker was
// started with --scheduler) until ctx ends or the keepalive lease, which
// its election session uses, is lost: a worker whose lease is gone can
// neither lead nor hold a binding.
func (s *Server) startScheduler(ctx context.Context, wg *sync.WaitGroup, ka *ha.Keepalive) {
	if !s.cfg.Scheduler {
		return
	}
	sch := scheduler.New(scheduler.Config{Client: s.cfg.Client, Store: s.store, Name: s.cfg.Name,
		Lease: ka.LeaseID(), Logger: s.log.Named("scheduler"), Metrics: s.cfg.SchedulerMetrics})
	s.mu.Lock()
	s.scheduler = sch
	s.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := sch.Run(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("scheduler stopped: its election session ended with the keepalive lease", zap.Error(err))
		}
	}()
}

// schedulerStatus is the scheduler's part of the status, nil without
// --scheduler.
func (s *Server) schedulerStatus() *scheduler.Status {
	s.mu.Lock()
	sch := s.scheduler
	s.mu.Unlock()
	if sch == nil {
		return nil
	}
	st := sch.Status()
	return &st
}
