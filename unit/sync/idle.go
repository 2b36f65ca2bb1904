package syncer

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errIdle cancels an idleWait's context when no event came in time.
var errIdle = errors.New("sync: no binlog event within the idle tick")

// idleWait gives the read loop a context for waiting on the next event that
// is cancelled once no event was read for d: one timer, reset per event,
// instead of a context.WithTimeout per event. A new context is made only
// after one expired. The read loop owns it; the timer's function only
// cancels.
type idleWait struct {
	parent context.Context
	d      time.Duration
	timer  *time.Timer
	ctx    context.Context // the read loop's current wait context

	mu     sync.Mutex
	cancel context.CancelCauseFunc // cancels ctx; called by the timer
}

// newIdleWait starts the timer; stop releases it.
func newIdleWait(parent context.Context, d time.Duration) *idleWait {
	w := &idleWait{parent: parent, d: d}
	w.ctx, w.cancel = context.WithCancelCause(parent)
	w.timer = time.AfterFunc(d, w.expire)
	return w
}

func (w *idleWait) expire() {
	w.mu.Lock()
	cancel := w.cancel
	w.mu.Unlock()
	cancel(errIdle)
}

// next returns the context to wait for the next event with, which ends d
// from now unless the parent ends first.
func (w *idleWait) next() context.Context {
	if w.ctx.Err() != nil {
		ctx, cancel := context.WithCancelCause(w.parent)
		w.mu.Lock()
		old := w.cancel
		w.ctx, w.cancel = ctx, cancel
		w.mu.Unlock()
		old(nil)
	}
	w.timer.Reset(w.d)
	return w.ctx
}

// expired reports whether ctx, from next, ended because the wait was idle.
func (w *idleWait) expired(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errIdle) && w.parent.Err() == nil
}

// stop stops the timer and releases the current context.
func (w *idleWait) stop() {
	w.timer.Stop()
	w.mu.Lock()
	cancel := w.cancel
	w.mu.Unlock()
	cancel(nil)
}
