package worker

import (
	"context"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/unit"
)

// supervise drives the pipeline until it finishes, fails or ctx is
// cancelled (by Pause, Close or Kill, which set the stage first, or by the
// end of the owner's context). It runs in the subtask's supervise.Work and is the
// only goroutine that calls units while it runs.
func (s *SubTask) supervise(ctx context.Context) {
	if !s.running() {
		// Paused or stopped before it started: the units stay as they are.
		s.settleCanceled(nil)
		return
	}
	if !s.prepare(ctx) {
		return
	}
	for {
		s.mu.Lock()
		u, resume := s.units[s.cur], s.started
		s.started = true
		s.mu.Unlock()

		var r unit.Result
		if resume {
			r = u.Resume(ctx)
		} else {
			s.logger.Info("unit processing", zap.String("unit", string(u.Type())))
			r = u.Process(ctx)
		}
		if !s.afterRun(u, r) {
			return
		}
	}
}

// prepare initialises the units not initialised yet and, the first time,
// chooses the unit to start at. It reports whether processing may start.
func (s *SubTask) prepare(ctx context.Context) bool {
	s.mu.Lock()
	units, inited, scanned := s.units, s.inited, s.scanned
	s.mu.Unlock()

	for i := inited; i < len(units); i++ {
		if err := units[i].Init(ctx); err != nil {
			if ctx.Err() != nil {
				s.settleCanceled(nil)
				return false
			}
			// A server that refuses connections at start is as resumable
			// as one that drops them later.
			s.failErr(errs.New(CodeUnitInit, errs.IsResumable(err), "subtask %q: init %s unit: %w; fix the cause and resume the task",
				s.name, units[i].Type(), err))
			return false
		}
		s.mu.Lock()
		s.inited = i + 1
		s.mu.Unlock()
	}
	if scanned {
		return true
	}
	start := 0
	for i := len(units) - 1; i > 0; i-- {
		fresh, err := units[i].IsFreshTask(ctx)
		if err != nil {
			if ctx.Err() != nil {
				s.settleCanceled(nil)
				return false
			}
			s.failErr(errs.Wrap(err, CodeUnitProgress, "subtask %q: read saved progress of %s unit", s.name, units[i].Type()))
			return false
		}
		if !fresh {
			start = i
			break
		}
	}
	if start == 0 && !s.precheck(ctx, units[0]) {
		return false
	}
	for _, u := range units[:start] {
		u.Close()
	}
	s.mu.Lock()
	s.cur, s.scanned, s.started = start, true, false
	s.mu.Unlock()
	if start > 0 {
		s.logger.Info("resuming pipeline at the last unit with saved progress", zap.String("unit", string(units[start].Type())))
	}
	return true
}

// precheck runs the factory's precheck when the pipeline starts at its
// first unit and that unit has no saved progress (a subtask that never ran),
// and reports whether processing may start. A passed precheck is not run
// again for this subtask; a failed one runs again at the next resume.
func (s *SubTask) precheck(ctx context.Context, first unit.Unit) bool {
	s.mu.Lock()
	done, cfg := s.prechecked, s.cfg
	s.mu.Unlock()
	if done {
		return true
	}
	fresh, err := first.IsFreshTask(ctx)
	if err == nil && fresh {
		err = s.factory.Precheck(ctx, cfg)
	}
	if err != nil {
		if ctx.Err() != nil {
			s.settleCanceled(nil)
			return false
		}
		s.failErr(err)
		return false
	}
	s.mu.Lock()
	s.prechecked = true
	s.mu.Unlock()
	return true
}

// afterRun moves the stage after one Process/Resume of u and reports
// whether the supervisor goes on with the next unit.
func (s *SubTask) afterRun(u unit.Unit, r unit.Result) bool {
	switch {
	case len(r.Errors) > 0:
		s.failRun(r.Errors)
		return false
	case r.IsCanceled:
		s.settleCanceled(u)
		return false
	}

	s.mu.Lock()
	last := s.cur == len(s.units)-1
	s.mu.Unlock()
	if s.stopping() {
		return false
	}
	if last {
		if s.finish() {
			s.logger.Info("subtask finished", zap.String("unit", string(u.Type())))
		}
		return false
	}

	u.Close()
	s.mu.Lock()
	s.cur++
	s.started = false
	next := s.units[s.cur].Type()
	s.mu.Unlock()
	goOn := s.handOver()
	s.logger.Info("unit finished; handing over", zap.String("unit", string(u.Type())), zap.String("next", string(next)))
	return goOn
}

// settleCanceled finishes a supervisor that stopped because its ctx was
// cancelled: a pausing subtask pauses its unit u (nil when no unit was
// running) and becomes Paused; a stopping one is left to Close or Kill.
func (s *SubTask) settleCanceled(u unit.Unit) {
	if s.stopping() {
		return
	}
	if u != nil {
		u.Pause()
	}
	s.settle()
}
