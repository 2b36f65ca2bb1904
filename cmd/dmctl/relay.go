package main

import (
	"context"
	"fmt"
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
	}, {
		name:  "relay purge",
		args:  "SOURCE (--inactive | --filename F | --time T)",
		short: "purge relay files of a source on its bound worker; prints the files removed",
		run:   relayPurge,
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
	pos, st, c, err := e.connectCluster(ctx, cmd, args, "source")
	if err != nil {
		return err
	}
	source := pos[0]
	if err := c.checkSource(source); err != nil {
		return err
	}
	workers := c.boundWorkers(source)
	if len(workers) == 0 {
		return fmt.Errorf("source %s is not bound to any worker; bind it first with `dmctl bind %s WORKER`", source, source)
	}
	if err := putRelayStage(ctx, st, source, stage.Running); err != nil {
		return err
	}
	for _, w := range workers {
		if _, err := st.PutRelayBound(ctx, ha.Bound{Source: source, Worker: w}); err != nil {
			return fmt.Errorf("write relay key of worker %s for source %s: %w", w, source, err)
		}
	}
	res := relayResult{Source: source, Stage: string(stage.Running), Workers: workers}
	return e.emitf(res, "relay of source %s started on worker %s\n", source, strings.Join(workers, ","))
}

// relaySetStage returns the command that sets the relay stage of an
// existing relay to want.
func relaySetStage(want stage.Stage) func(context.Context, *env, *command, []string) error {
	return func(ctx context.Context, e *env, cmd *command, args []string) error {
		pos, st, c, err := e.connectCluster(ctx, cmd, args, "source")
		if err != nil {
			return err
		}
		source := pos[0]
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
		if err := putRelayStage(ctx, st, source, want); err != nil {
			return err
		}
		return e.emitf(relayResult{Source: source, Stage: string(want)}, "relay of source %s: expected stage %s\n", source, want)
	}
}

func relayStop(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, st, c, err := e.connectCluster(ctx, cmd, args, "source")
	if err != nil {
		return err
	}
	source := pos[0]
	_, ok, err := relayExpect(ctx, st, source)
	if err != nil {
		return err
	}
	workers := c.relayWorkers(source)
	if !ok && len(workers) == 0 {
		return fmt.Errorf("relay of source %s is not started; nothing to stop (see `dmctl source list`)", source)
	}
	if err := deleteRelayStage(ctx, st, source); err != nil {
		return err
	}
	if err := deleteRelayBounds(ctx, st, source, workers); err != nil {
		return err
	}
	return e.emitf(relayResult{Source: source, Workers: workers}, "relay of source %s stopped\n", source)
}

// putRelayStage writes the relay stage of source.
func putRelayStage(ctx context.Context, st *ha.Store, source string, want stage.Stage) error {
	if _, err := st.PutRelayStage(ctx, ha.Stage{Expect: want, Source: source}); err != nil {
		return fmt.Errorf("write relay stage of source %s: %w", source, err)
	}
	return nil
}

// deleteRelayStage deletes the relay stage of source.
func deleteRelayStage(ctx context.Context, st *ha.Store, source string) error {
	if _, err := st.DeleteRelayStage(ctx, source); err != nil {
		return fmt.Errorf("delete relay stage of source %s: %w", source, err)
	}
	return nil
}

// deleteRelayBounds deletes the relay keys of workers, which name source.
func deleteRelayBounds(ctx context.Context, st *ha.Store, source string, workers []string) error {
	for _, w := range workers {
		if _, err := st.DeleteRelayBound(ctx, w); err != nil {
			return fmt.Errorf("delete relay key of worker %s for source %s: %w", w, source, err)
		}
	}
	return nil
}
