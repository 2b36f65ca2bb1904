package shardddl

import (
	"context"

	"github.com/dmworker/dm-worker/ha"
)

// Wait blocks until the state of the upstream table in the group of target
// has a role other than prev, and returns that state; it returns at once if
// the state already has. Every change of the group is also a chance to
// decide its lock, so every waiting worker is a decider: the first whose
// transaction commits decides, the others see the decision. The watch
// resumes from revisions (ha.Watch) and starts over on compaction or a lost
// connection. Wait returns ctx's error when ctx ends first, and at once an
// error that waiting cannot cure (a malformed key of the group, a table that
// is not a member).
func (c *Coordinator) Wait(ctx context.Context, target, table Table, prev Role) (LockState, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &waiter{c: c, target: target, m: c.member(table), prev: prev, cancel: cancel}
	err := ha.Watch(wctx, c.cli, c.keys.group(c.task, target), ignoreValue, w, ha.WatchOptions{Logger: c.lg})
	switch {
	case w.err != nil:
		return LockState{}, w.err
	case w.found:
		return w.st, nil
	case ctx.Err() != nil:
		return LockState{}, ctx.Err()
	}
	return LockState{}, err
}

// waiter is the handler of one Wait; ha.Watch calls it from Wait's
// goroutine only.
type waiter struct {
	c      *Coordinator
	target Table
	m      Member
	prev   Role
	cancel context.CancelFunc

	st    LockState
	found bool
	err   error // terminal
}

func (w *waiter) Resync(ctx context.Context, _ []ha.Item[struct{}], _ int64) error {
	return w.check(ctx)
}

func (w *waiter) Changed(ctx context.Context, _ ha.Item[struct{}]) error { return w.check(ctx) }

// check reads (and settles) the group; it ends the watch when the role
// changed or on a terminal error. Other errors restart the watch.
func (w *waiter) check(ctx context.Context) error {
	st, err := w.c.State(ctx, w.target, w.m.Table)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil
	case err != nil && isTerminal(err):
		w.err = err
		w.cancel()
		return nil
	case err != nil:
		return err
	case st.Role != w.prev:
		w.st, w.found = st, true
		w.cancel()
	}
	return nil
}

// ignoreValue decodes nothing: the waiter reads the group itself.
func ignoreValue(string, []byte) (struct{}, error) { return struct{}{}, nil }
