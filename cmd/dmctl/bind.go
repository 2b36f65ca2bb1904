package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/dmworker/dm-worker/ha"
)

func bindCommands() []command {
	return []command{{
		name:  "bind",
		args:  "SOURCE WORKER",
		short: "bind an existing source to an alive, unbound worker",
		run:   bind,
	}, {
		name:  "source transfer",
		args:  "SOURCE WORKER",
		short: "move a source (and its relay binding) to an alive, unbound worker in one etcd transaction",
		run:   sourceTransfer,
	}, {
		name:  "unbind",
		args:  "WORKER",
		short: "remove the binding of a worker (its source stops running there)",
		run:   unbind,
	}}
}

// bindResult is the --output json document of bind and unbind.
type bindResult struct {
	Source string `json:"source"`
	Worker string `json:"worker"`
}

func bind(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, st, c, err := e.connectCluster(ctx, cmd, args, "source", "worker")
	if err != nil {
		return err
	}
	source, worker := pos[0], pos[1]
	if err := c.checkSource(source); err != nil {
		return err
	}
	if err := c.checkBindable(worker, source); err != nil {
		return err
	}
	if err := putBound(ctx, st, source, worker); err != nil {
		return err
	}
	return e.emitf(bindResult{Source: source, Worker: worker}, "source %s bound to worker %s\n", source, worker)
}

func unbind(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, st, c, err := e.connectCluster(ctx, cmd, args, "worker")
	if err != nil {
		return err
	}
	worker := pos[0]
	b, ok := c.bounds[worker]
	if !ok && c.malformed(c.keys.Bound(worker)) == nil {
		return fmt.Errorf("worker %s is not bound to any source (see `dmctl worker list`)", worker)
	}
	if _, err := st.DeleteBound(ctx, worker); err != nil {
		return fmt.Errorf("unbind worker %s: %w", worker, err)
	}
	return e.emitf(bindResult{Source: b.Source, Worker: worker}, "worker %s unbound from source %s\n", worker, dash(b.Source))
}

// putBound binds source to worker.
func putBound(ctx context.Context, st *ha.Store, source, worker string) error {
	if _, err := st.PutBound(ctx, ha.Bound{Source: source, Worker: worker}); err != nil {
		return fmt.Errorf("bind source %s to worker %s: %w", source, worker, err)
	}
	return nil
}

// transferResult is the --output json document of source transfer.
type transferResult struct {
	Source string   `json:"source"`
	From   []string `json:"from"`
	Worker string   `json:"worker"`
}

// sourceTransfer moves a source to another worker with ha.Store.MoveBound:
// the old bindings (and the source's relay bindings) go and the new one is
// written in one transaction that fails if any of them changed meanwhile.
// It refuses a worker that is not alive or already bound, which the
// scheduler would move the source away from again, or leave it unserved.
func sourceTransfer(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, st, c, err := e.connectCluster(ctx, cmd, args, "source", "worker")
	if err != nil {
		return err
	}
	source, worker := pos[0], pos[1]
	if err := c.checkSource(source); err != nil {
		return err
	}
	from := c.boundWorkers(source)
	if slices.Contains(from, worker) {
		return fmt.Errorf("source %s is already bound to worker %s", source, worker)
	}
	if !c.alive(worker) {
		return fmt.Errorf("worker %s is not alive (no keepalive key): a source moved there would not run, and the "+
			"scheduler (if any worker runs with --scheduler) would move it away at once; start the worker first", worker)
	}
	if b, ok := c.bounds[worker]; ok {
		return fmt.Errorf("worker %s already serves source %s; a worker serves one source: choose an unbound worker (see `dmctl worker list`)",
			worker, b.Source)
	}
	mv := ha.Move{Source: source, To: worker}
	if mv.From, err = st.BoundRevisions(ctx, from...); err != nil {
		return err
	}
	if relay := c.relayWorkers(source); len(relay) > 0 {
		if mv.RelayFrom, err = st.RelayBoundRevisions(ctx, relay...); err != nil {
			return err
		}
	}
	ok, err := st.MoveBound(ctx, mv)
	if err != nil {
		return fmt.Errorf("transfer source %s to worker %s: %w", source, worker, err)
	}
	if !ok {
		return fmt.Errorf("transfer source %s to worker %s: the bindings changed meanwhile (another dmctl or the scheduler); "+
			"look at `dmctl worker list` and try again", source, worker)
	}
	return e.emitf(transferResult{Source: source, From: from, Worker: worker},
		"source %s moved from %s to worker %s\n", source, dash(strings.Join(from, ",")), worker)
}
