package main

import (
	"context"
	"fmt"
	"io"

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
	pos, err := positional(cmd, args, "source", "worker")
	if err != nil {
		return err
	}
	source, worker := pos[0], pos[1]
	st, err := e.store(ctx)
	if err != nil {
		return err
	}
	c, err := readCluster(ctx, st)
	if err != nil {
		return err
	}
	if err := c.checkSource(source); err != nil {
		return err
	}
	if err := c.checkBindable(worker, source); err != nil {
		return err
	}
	if _, err := st.PutBound(ctx, ha.Bound{Source: source, Worker: worker}); err != nil {
		return fmt.Errorf("bind source %s to worker %s: %w", source, worker, err)
	}
	return e.emit(bindResult{Source: source, Worker: worker}, func(out io.Writer) error {
		_, err := fmt.Fprintf(out, "source %s bound to worker %s\n", source, worker)
		return err
	})
}

func unbind(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, err := positional(cmd, args, "worker")
	if err != nil {
		return err
	}
	worker := pos[0]
	st, err := e.store(ctx)
	if err != nil {
		return err
	}
	c, err := readCluster(ctx, st)
	if err != nil {
		return err
	}
	b, ok := c.bounds[worker]
	if !ok && c.malformed(c.keys.Bound(worker)) == nil {
		return fmt.Errorf("worker %s is not bound to any source (see `dmctl worker list`)", worker)
	}
	if _, err := st.DeleteBound(ctx, worker); err != nil {
		return fmt.Errorf("unbind worker %s: %w", worker, err)
	}
	return e.emit(bindResult{Source: b.Source, Worker: worker}, func(out io.Writer) error {
		_, err := fmt.Fprintf(out, "worker %s unbound from source %s\n", worker, dash(b.Source))
		return err
	})
}
