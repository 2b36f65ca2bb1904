package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dmworker/dm-worker/pkg/errs"
)

// errWorkRunning is returned by bgWork.start when the work started before
// has not returned by the time the caller's ctx ended.
var errWorkRunning = errors.New("the previous run has not stopped yet")

// bgWork is the one supervisor primitive of the worker: the goroutine a
// holder runs its work in — a subtask's supervisor, the relay's pull and
// purger, a stream's task. At most one goroutine runs per bgWork: start
// waits for the one started before, and done is kept until that goroutine
// has returned, so a stop whose wait timed out leaves the next start,
// stop or close waiting for it. Its owner calls start and stop under its
// lifecycle's ops (or another lock of its own).
type bgWork struct {
	// life is the context of the owner of the work (the SourceWorker):
	// when it ends the work is cancelled, whoever started it. nil: the
	// work runs until stopped.
	life context.Context

	mu sync.Mutex // guards the fields below
	// cancel cancels the last work started; nil before the first start.
	cancel context.CancelFunc
	// done is closed when the last work started returned; nil before the
	// first start. It is never dropped before that.
	done chan struct{}
}

// start waits (bounded by ctx) for the work started before to return, then
// runs work in a goroutine under a context that keeps ctx's values but not
// its cancellation (the work outlives the request that started it); it is
// cancelled by stop or when life ends. It returns an error wrapping
// errWorkRunning, and starts nothing, when the previous work is still
// running when ctx ends.
func (w *bgWork) start(ctx context.Context, work func(ctx context.Context)) error {
	if err := w.wait(ctx); err != nil {
		return fmt.Errorf("%w: %w", errWorkRunning, err)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	unlink := func() bool { return false }
	if w.life != nil {
		unlink = context.AfterFunc(w.life, cancel)
	}
	done := make(chan struct{})
	w.mu.Lock()
	w.cancel, w.done = cancel, done
	w.mu.Unlock()
	go func() {
		defer close(done)
		defer cancel()
		defer unlink()
		work(rctx)
	}()
	return nil
}

// stop cancels the running work and waits for it to return, bounded by
// ctx; no-op when none runs. When ctx ends first the work keeps its done,
// so the next start, stop or wait still waits for it.
func (w *bgWork) stop(ctx context.Context, what string) error {
	w.mu.Lock()
	cancel := w.cancel
	w.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if err := w.wait(ctx); err != nil {
		return fmt.Errorf("%s: wait for the work to stop: %w", what, err)
	}
	return nil
}

// wait waits for the last work started to return, bounded by ctx.
func (w *bgWork) wait(ctx context.Context) error {
	w.mu.Lock()
	done := w.done
	w.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runWork runs work in w for a holder whose lifecycle is "run it, stop
// it, run it again" (the relay's pull, a stream's task); the stage is
// Running or Resuming and ops is held. When work returns an error that no
// stop asked for, l fails with it (the stage becomes Paused and the
// checker may resume it); after is called last either way. A run that
// cannot start (the previous one still stopping) fails l at once.
func (l *lifecycle) runWork(ctx context.Context, w *bgWork, clock Clock, work func(ctx context.Context) error, after func(err error)) {
	err := w.start(ctx, func(rctx context.Context) {
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
// by ctx; the stage stays Paused when it has not returned), the stage moves
// Paused → Resuming (refused as beginResume refuses), and run starts the
// work again. It runs under ops.
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
// stopped and waited for (also one an earlier stop gave up waiting for),
// then release (e.g. close files), then Stopped. It runs under ops and
// reports false when the holder was already stopped.
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
