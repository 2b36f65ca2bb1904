package main

import (
	"context"
	"fmt"

	"github.com/dmworker/dm-worker/ha"
)

func bindCommands() []command {
	return []command{{
		name:  "bind",
		args:  "SOURCE WORKER",
		short: "bind an existing source to an alive, unbound worker",
		run:   bind,
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
