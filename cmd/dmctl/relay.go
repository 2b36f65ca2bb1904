package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/stage"
)

func relayCommands() []command {
	return []command{{
		name:  "relay start",
		args:  "SOURCE",
		short: "run relay for a source on its bound worker (even with enable-relay: false)",
		run:   relayStart,
	}, {
		name:  "relay pause",
		args:  "SOURCE",
		short: "pause the relay of a source",
		run:   relaySetStage(stage.Paused),
	}, {
		name:  "relay resume",
		args:  "SOURCE",
		short: "resume the relay of a source",
		run:   relaySetStage(stage.Running),
	}, {
		name:  "relay stop",
		args:  "SOURCE",
		short: "stop the relay of a source (delete its relay stage and relay keys)",
		run:   relayStop,
	}}
}

// relayResult is the --output json document of the relay commands.
type relayResult struct {
	Source string `json:"source"`
	// Stage is the relay stage written; empty after stop.
	Stage string `json:"stage,omitempty"`
	// Workers are the workers whose relay key was written (start) or
	// deleted (stop).
	Workers []string `json:"workers,omitempty"`
}

func relayStart(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, err := positional(cmd, args, "source")
	if err != nil {
		return err
	}
	source := pos[0]
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
	workers := c.boundWorkers(source)
	if len(workers) == 0 {
		return fmt.Errorf("source %s is not bound to any worker; bind it first with `dmctl bind %s WORKER`", source, source)
	}
	if _, err := st.PutRelayStage(ctx, ha.Stage{Expect: stage.Running, Source: source}); err != nil {
		return fmt.Errorf("write relay stage of source %s: %w", source, err)
	}
	for _, w := range workers {
		if _, err := st.PutRelayBound(ctx, ha.Bound{Source: source, Worker: w}); err != nil {
			return fmt.Errorf("write relay key of worker %s for source %s: %w", w, source, err)
		}
	}
	res := relayResult{Source: source, Stage: string(stage.Running), Workers: workers}
	return e.emit(res, func(out io.Writer) error {
		_, err := fmt.Fprintf(out, "relay of source %s started on worker %s\n", source, strings.Join(workers, ","))
		return err
	})
}

// relaySetStage returns the command that sets the relay stage of an
// existing relay to want.
func relaySetStage(want stage.Stage) func(context.Context, *env, *command, []string) error {
	return func(ctx context.Context, e *env, cmd *command, args []string) error {
		pos, err := positional(cmd, args, "source")
		if err != nil {
			return err
		}
		source := pos[0]
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
		_, ok, err := relayExpect(ctx, st, source)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("relay of source %s is not started; start it with `dmctl relay start %s`", source, source)
		}
		if _, err := st.PutRelayStage(ctx, ha.Stage{Expect: want, Source: source}); err != nil {
			return fmt.Errorf("write relay stage of source %s: %w", source, err)
		}
		return e.emit(relayResult{Source: source, Stage: string(want)}, func(out io.Writer) error {
			_, err := fmt.Fprintf(out, "relay of source %s: expected stage %s\n", source, want)
			return err
		})
	}
}

func relayStop(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, err := positional(cmd, args, "source")
	if err != nil {
		return err
	}
	source := pos[0]
	st, err := e.store(ctx)
	if err != nil {
		return err
	}
	c, err := readCluster(ctx, st)
	if err != nil {
		return err
	}
	_, ok, err := relayExpect(ctx, st, source)
	if err != nil {
		return err
	}
	workers := c.relayWorkers(source)
	if !ok && len(workers) == 0 {
		return fmt.Errorf("relay of source %s is not started; nothing to stop (see `dmctl source list`)", source)
	}
	if _, err := st.DeleteRelayStage(ctx, source); err != nil {
		return fmt.Errorf("delete relay stage of source %s: %w", source, err)
	}
	for _, w := range workers {
		if _, err := st.DeleteRelayBound(ctx, w); err != nil {
			return fmt.Errorf("delete relay key of worker %s for source %s: %w", w, source, err)
		}
	}
	return e.emit(relayResult{Source: source, Workers: workers}, func(out io.Writer) error {
		_, err := fmt.Fprintf(out, "relay of source %s stopped\n", source)
		return err
	})
}
