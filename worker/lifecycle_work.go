package worker

import (
	"context"
	"fmt"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/supervise"
)

// runWork runs work in w for a holder whose lifecycle is "run it, stop
// it, run it again" (the relay's pull, a stream's task); the stage is
// Running or Resuming and ops is held. When work returns an error that no
// stop asked for, l fails with it (the stage becomes Paused and the
// checker may resume it); after is called last either way. A run that
// cannot start (the previous one still stopping) fails l at once.
func (l *lifecycle) runWork(ctx context.Context, w *supervise.Work, clock Clock, work func(ctx context.Context) error, after func(err error)) {
	err := w.Start(ctx, func(rctx context.Context) {
		err := work(rctx)
		if err != nil && rctx.Err() == nil {
			l.fail([]errs.Error{errs.Entry(err, clock.Now())})
		} else {
			err = nil
		}
		after(err)
	})
	if err != nil {
		l.fail([]errs.Error{errs.Entry(fmt.Errorf("start %s: %w", l.what, err), clock.Now())})
		return
	}
	l.running()
}

// pauseWork is Pause of a holder whose work is w: the pause is marked
// explicit (the checker never resumes it), the work is stopped (bounded by
// ctx) and the stage settles to Paused. It runs under ops. When ctx ends
// first, the work is still waited for by the next resume or close.
func (l *lifecycle) pauseWork(ctx context.Context, w *supervise.Work) error {
	if _, err := l.pause(); err != nil {
		return err
	}
	err := w.Stop(ctx, l.what)
	l.settle()
	return err
}

// restartWork is the resume hook of a holder whose work is w and is started
// by run: the work that a failure or a pause ended is waited for (bounded
// by ctx; the stage stays Paused when it has not returned), the stage moves
// Paused → Resuming (refused as beginResume refuses), and run starts the
// work again. It runs under ops.
func (l *lifecycle) restartWork(ctx context.Context, auto bool, w *supervise.Work, run func(context.Context)) error {
	if err := w.Stop(ctx, l.what); err != nil {
		return err
	}
	if _, err := l.beginResume(auto); err != nil {
		return err
	}
	run(ctx)
	return nil
}

// stopWork is Close of a holder whose work is w: Stopping, the work
// stopped and waited for (also one an earlier stop gave up waiting for),
// then release (e.g. close files), then Stopped. It runs under ops and
// reports false when the holder was already stopped.
func (l *lifecycle) stopWork(w *supervise.Work, release func()) bool {
	if !l.beginStop() {
		return false
	}
	_ = w.Stop(context.Background(), l.what) // waits as long as the work takes
	if release != nil {
		release()
	}
	l.stopped()
	return true
}
