package binlog

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// errIdle cancels an IdleWait's context when no event came in time;
// errWake when Wake asked for the idle work now.
var (
	errIdle = errors.New("binlog: no event within the idle tick")
	errWake = errors.New("binlog: the read loop was woken for its idle work")
)

// IdleWait gives a read loop a context for waiting on the next event that
// is cancelled once no event was read for a whole tick: one timer that
// fires every d and cancels only when no wait began since its last firing,
// so an event costs an atomic add, not a timer reset or a context. A wait
// is thus reported idle after between d and 2d without events. A new
// context is made only after one expired. The read loop owns it; the
// timer's function only re-arms or cancels.
type IdleWait struct {
	parent context.Context
	d      time.Duration
	timer  *time.Timer
	ctx    context.Context // the read loop's current wait context

	woken   atomic.Bool   // a Wake not yet seen by a wait
	waits   atomic.Uint64 // waits begun (Next calls)
	seen    atomic.Uint64 // waits at the timer's last firing
	stopped atomic.Bool

	mu     sync.Mutex
	cancel context.CancelCauseFunc // cancels ctx; called by the timer
}

// NewIdleWait starts the timer; Stop releases it.
func NewIdleWait(parent context.Context, d time.Duration) *IdleWait {
	w := &IdleWait{parent: parent, d: d}
	w.ctx, w.cancel = context.WithCancelCause(parent)
	w.timer = time.AfterFunc(d, w.expire)
	return w
}

func (w *IdleWait) expire() {
	if w.stopped.Load() {
		return
	}
	if n := w.waits.Load(); n != w.seen.Load() {
		w.seen.Store(n)
		w.timer.Reset(w.d)
		return
	}
	w.mu.Lock()
	cancel := w.cancel
	w.mu.Unlock()
	cancel(errIdle)
}

// Next returns the context to wait for the next event with, which ends
// once a whole tick passes without another Next call, unless the parent
// ends first.
func (w *IdleWait) Next() context.Context {
	w.waits.Add(1)
	if w.woken.Swap(false) {
		// A Wake that came while no wait ran (the loop handled an event
		// or did its idle work) is not lost: this wait ends at once.
		ctx, cancel := context.WithCancelCause(w.parent)
		cancel(errWake)
		return ctx
	}
	if w.ctx.Err() != nil {
		ctx, cancel := context.WithCancelCause(w.parent)
		w.mu.Lock()
		old := w.cancel
		w.ctx, w.cancel = ctx, cancel
		w.mu.Unlock()
		old(nil)
		w.seen.Store(w.waits.Load())
		w.timer.Reset(w.d)
		// A Wake between the check above and the swap cancelled the old
		// context, which no one waits on: end this one instead.
		if w.woken.Swap(false) {
			cancel(errWake)
		}
	}
	return w.ctx
}

// ClearWake marks the pending wake as seen, by a loop that is about to do
// its idle work for a wait that Woken reported: a Wake after this call
// ends the next wait.
func (w *IdleWait) ClearWake() { w.woken.Store(false) }

// Expired reports whether ctx, from Next, ended because the wait was idle
// or woken.
func (w *IdleWait) Expired(ctx context.Context) bool {
	c := context.Cause(ctx)
	return (errors.Is(c, errIdle) || errors.Is(c, errWake)) && w.parent.Err() == nil
}

// Woken reports whether ctx, from Next, ended because of Wake.
func (w *IdleWait) Woken(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errWake) && w.parent.Err() == nil
}

// Wake ends the current wait now, as if it had been idle, so that the read
// loop does its idle work at once. Safe from any goroutine; a wake while
// the loop handles an event ends no wait (the loop is not waiting).
func (w *IdleWait) Wake() {
	w.woken.Store(true)
	w.mu.Lock()
	cancel := w.cancel
	w.mu.Unlock()
	cancel(errWake)
}

// Stop stops the timer and releases the current context.
func (w *IdleWait) Stop() {
	w.stopped.Store(true)
	w.timer.Stop()
	w.mu.Lock()
	cancel := w.cancel
	w.mu.Unlock()
	cancel(nil)
}
