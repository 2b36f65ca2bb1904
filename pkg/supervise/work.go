// Package supervise holds the one supervisor primitive of the worker's data
// plane: Work, the goroutine an owner runs a long-lived job in (a subtask's
// supervisor, the relay's pull and purger, a stream task, a validator). It
// knows nothing of stages, units or etcd; the owners' lifecycles build on
// it.
package supervise

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrRunning is returned by Work.Start when the work started before has not
// returned by the time the caller's ctx ended.
var ErrRunning = errors.New("the previous run has not stopped yet")

// Work runs at most one goroutine at a time: Start waits for the one
// started before, and its done channel is kept until that goroutine has
// returned, so a Stop whose wait timed out leaves the next Start, Stop or
// Wait waiting for it (never two runs at once, never a Close while a run
// still writes). Its owner serialises Start and Stop (under its
// lifecycle's lock or another of its own). Build one with NewWork.
type Work struct {
	// life is the context of the owner of the work: when it ends the work
	// is cancelled, whoever started it. nil: the work runs until stopped.
	life context.Context

	mu sync.Mutex // guards the fields below
	// cancel cancels the last work started; nil before the first start.
	cancel context.CancelFunc
	// done is closed when the last work started returned; nil before the
	// first start. It is never dropped before that.
	done chan struct{}
}

// NewWork returns a Work whose runs are cancelled when life ends (life may
// be nil: runs end only when stopped).
func NewWork(life context.Context) *Work { return &Work{life: life} }

// Start waits (bounded by ctx) for the work started before to return, then
// runs work in a goroutine under a context that keeps ctx's values but not
// its cancellation (the work outlives the request that started it); it is
// cancelled by Stop or when the owner's life ends. It returns an error
// wrapping ErrRunning, and starts nothing, when the previous work is still
// running when ctx ends.
func (w *Work) Start(ctx context.Context, work func(ctx context.Context)) error {
	if err := w.Wait(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrRunning, err)
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

// Stop cancels the running work and waits for it to return, bounded by
// ctx; no-op when none runs. When ctx ends first the work keeps its done,
// so the next Start, Stop or Wait still waits for it. what names the work
// in the error.
func (w *Work) Stop(ctx context.Context, what string) error {
	w.mu.Lock()
	cancel := w.cancel
	w.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if err := w.Wait(ctx); err != nil {
		return fmt.Errorf("%s: wait for the work to stop: %w", what, err)
	}
	return nil
}

// Wait waits for the last work started to return, bounded by ctx.
func (w *Work) Wait(ctx context.Context) error {
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
