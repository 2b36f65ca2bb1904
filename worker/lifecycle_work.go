package worker

import (
	"context"
	"fmt"
	"sync"

	"github.com/dmworker/dm-worker/pkg/errs"
)

// bgWork is the one goroutine a holder runs its work in — the relay's
// pull, a stream's task — for holders whose lifecycle is "run it, stop it,
// run it again" (a subtask's supervisor has more steps and keeps its own).
// It is started, stopped and restarted only under the lifecycle's ops.
type bgWork struct {
	mu     sync.Mutex
	cancel context.CancelFunc // of the running work; nil when none runs
	done   chan struct{}      // closed when the running work returned
}

// start runs work in a goroutine under a context that keeps ctx's values
// but not its cancellation (the work outlives the request that started
// it). When work returns an error that no stop asked for, l fails with it
// (the stage becomes Paused and the checker may resume it); after is
// called last either way.
func (w *bgWork) start(ctx context.Context, l *lifecycle, clock Clock, work func(ctx context.Context) error, after func(err error)) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	w.mu.Lock()
	w.cancel, w.done = cancel, done
	w.mu.Unlock()
	l.running()
	go func() {
		defer close(done)
		err := work(rctx)
		if err != nil && rctx.Err() == nil {
			l.fail([]errs.Error{errs.Entry(err, clock.Now())})
		} else {
			err = nil
		}
		after(err)
	}()
}

// stop cancels the running work and waits for it to return, bounded by
// ctx; no-op when none runs.
func (w *bgWork) stop(ctx context.Context, what string) error {
	w.mu.Lock()
	cancel, done := w.cancel, w.done
	w.cancel = nil
	w.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: wait for the work to stop: %w", what, ctx.Err())
	}
}

// pauseWork is Pause of a holder whose work is w: the pause is marked
// explicit (the checker never resumes it), the work is stopped (bounded by
// ctx) and the stage settles to Paused. It runs under ops.
func (l *lifecycle) pauseWork(ctx context.Context, w *bgWork) error {
	if _, err := l.pause(); err != nil {
		return err
	}
	err := w.stop(ctx, l.what)
	l.settle()
	return err
}

// restartWork is the resume hook of a holder whose work is w and is started
// by run: the work that a failure or a pause ended is waited for (bounded
// by ctx), the stage moves Paused → Resuming (refused as beginResume
// refuses), and run starts the work again. It runs under ops.
func (l *lifecycle) restartWork(ctx context.Context, auto bool, w *bgWork, run func(context.Context)) error {
	if err := w.stop(ctx, l.what); err != nil {
		return err
	}
	if _, err := l.beginResume(auto); err != nil {
		return err
	}
	run(ctx)
	return nil
}

// stopWork is Close of a holder whose work is w: Stopping, the work
// stopped and waited for, then release (e.g. close files), then Stopped.
// It runs under ops and reports false when the holder was already stopped.
func (l *lifecycle) stopWork(w *bgWork, release func()) bool {
	if !l.beginStop() {
		return false
	}
	_ = w.stop(context.Background(), l.what) // waits as long as the work takes
	if release != nil {
		release()
	}
	l.stopped()
	return true
}
