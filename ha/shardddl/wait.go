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
// error that waiting cannot cure (a malformed key of the group).
//
// Each change of the group costs every waiter one read of the whole group:
// a worker with many tables waiting on one lock should use WaitSource, one
// watch for all its tables.
func (c *Coordinator) Wait(ctx context.Context, target, table Table, prev Role) (LockState, error) {
	var out LockState
	err := c.watchGroup(ctx, target, func(ctx context.Context) (bool, error) {
		st, err := c.State(ctx, target, table)
		if err != nil || st.Role == prev {
			return false, err
		}
		out = st
		return true, nil
	})
	return out, err
}

// WaitSource blocks until done, given the states of every table of this
// source's share of the group of target (States), returns true, and
// returns those states. It is Wait for all the source's tables at once.
func (c *Coordinator) WaitSource(ctx context.Context, target Table, done func(map[Table]LockState) bool) (map[Table]LockState, error) {
	var out map[Table]LockState
	err := c.watchGroup(ctx, target, func(ctx context.Context) (bool, error) {
		states, err := c.States(ctx, target)
		if err != nil || !done(states) {
			return false, err
		}
		out = states
		return true, nil
	})
	return out, err
}

// States returns the state of every table of this source's share of the
// group of target, deciding the lock first if it is ready.
func (c *Coordinator) States(ctx context.Context, target Table) (map[Table]LockState, error) {
	g, err := settle(ctx, c.cli, c.keys, c.lg, c.task, target)
	if err != nil {
		return nil, err
	}
	out := map[Table]LockState{}
	for _, t := range g.shares[c.source].v.Tables {
		out[t] = g.state(c.member(t))
	}
	return out, nil
}

// watchGroup runs check at the start and after every change of the group
// until it reports done, fails with an error waiting cannot cure, or ctx
// ends.
func (c *Coordinator) watchGroup(ctx context.Context, target Table, check func(context.Context) (bool, error)) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &waiter{check: check, cancel: cancel}
	err := ha.Watch(wctx, c.cli, c.keys.group(c.task, target), ignoreValue, w, ha.WatchOptions{Logger: c.lg})
	switch {
	case w.err != nil:
		return w.err
	case w.found:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return err
}

// waiter is the handler of one watchGroup; ha.Watch calls it from
// watchGroup's goroutine only.
type waiter struct {
	check  func(context.Context) (bool, error)
	cancel context.CancelFunc

	found bool
	err   error // terminal
}

func (w *waiter) Resync(ctx context.Context, _ []ha.Item[struct{}], _ int64) error {
	return w.run(ctx)
}

func (w *waiter) Changed(ctx context.Context, _ ha.Item[struct{}]) error { return w.run(ctx) }

// run checks; it ends the watch when done or on a terminal error. Other
// errors restart the watch (ha.Watch backs off and relists).
func (w *waiter) run(ctx context.Context) error {
	if w.found || w.err != nil {
		return nil // the rest of the events of the last response
	}
	done, err := w.check(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil
	case err != nil && isTerminal(err):
		w.err = err
		w.cancel()
		return nil
	case err != nil:
		return err
	case done:
		w.found = true
		w.cancel()
	}
	return nil
}

// ignoreValue decodes nothing: the waiter reads the group itself.
func ignoreValue(string, []byte) (struct{}, error) { return struct{}{}, nil }
