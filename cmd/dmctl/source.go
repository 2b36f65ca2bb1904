package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/stage"
)

func sourceCommands() []command {
	return []command{{
		name:  "source create",
		args:  "FILE [--worker W] [--dry-run]",
		short: "create a source from a config file and bind it to W or to a free alive worker",
		run:   sourceCreate,
	}, {
		name:  "source update",
		args:  "FILE",
		short: "replace the config of an existing source, keeping its binding",
		run:   sourceUpdate,
	}, {
		name:  "source delete",
		args:  "SOURCE",
		short: "delete a source that has no tasks or streams, with its bindings and relay keys",
		run:   sourceDelete,
	}, {
		name:  "source list",
		short: "list sources with their bound worker and relay stage",
		run:   sourceList,
	}}
}

// loadSource reads and validates a source config file and warns about the
// DM fields it accepted without effect.
func (e *env) loadSource(path string) (*config.SourceConfig, error) {
	cfg, err := checkSourceFile(path)
	if err != nil {
		return nil, err
	}
	e.warnNotes(path, cfg.Notes)
	return cfg, nil
}

// sourceResult is the --output json document of source create/update/delete.
type sourceResult struct {
	Source string `json:"source"`
	// Worker is the worker the source is bound to (create) or was unbound
	// from (delete); empty when none.
	Worker string `json:"worker,omitempty"`
	// Relay is the relay stage written, if any.
	Relay string `json:"relay,omitempty"`
}

func sourceCreate(ctx context.Context, e *env, cmd *command, args []string) error {
	fs := newFlags(cmd)
	worker := fs.String("worker", "", "bind the source to this worker (alive and unbound)")
	dryRun := fs.Bool("dry-run", false, "check the file and print the config it would write, without connecting to etcd")
	pos, err := parseArgs(cmd, fs, args, "FILE")
	if err != nil {
		return err
	}
	if *dryRun {
		return dryRunSource(e, pos[0])
	}
	if *worker != "" {
		if err := config.ValidateName("worker", *worker); err != nil {
			return err
		}
	}
	cfg, err := e.loadSource(pos[0])
	if err != nil {
		return err
	}
	st, c, err := e.cluster(ctx)
	if err != nil {
		return err
	}
	source := cfg.SourceID
	if c.hasSource(source) {
		return fmt.Errorf("source %s already exists; change it with `dmctl source update FILE` or delete it first", source)
	}
	w := *worker
	if w == "" {
		if ws := c.boundWorkers(source); len(ws) > 0 {
			return fmt.Errorf("source %s has no config but worker %s is still bound to it; unbind it first with `dmctl unbind %s`", source, ws[0], ws[0])
		}
		if w, err = c.freeWorker(); err != nil {
			return fmt.Errorf("cannot bind new source %s: %w", source, err)
		}
	} else if err := c.checkBindable(w, source); err != nil {
		return fmt.Errorf("cannot bind new source %s: %w", source, err)
	}

	res := sourceResult{Source: source, Worker: w}
	if _, err := st.PutSourceConfig(ctx, cfg); err != nil {
		return fmt.Errorf("write config of source %s: %w", source, err)
	}
	if cfg.EnableRelay {
		if err := putRelayStage(ctx, st, source, stage.Running); err != nil {
			return err
		}
		res.Relay = string(stage.Running)
	}
	if err := putBound(ctx, st, source, w); err != nil {
		return err
	}
	return e.emitf(res, "source %s created and bound to worker %s%s\n", source, w, relayNote(res.Relay))
}

func relayNote(relay string) string {
	if relay == "" {
		return ""
	}
	return "; relay " + relay
}

func sourceUpdate(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, err := parseArgs(cmd, newFlags(cmd), args, "FILE")
	if err != nil {
		return err
	}
	cfg, err := e.loadSource(pos[0])
	if err != nil {
		return err
	}
	st, c, err := e.cluster(ctx)
	if err != nil {
		return err
	}
	source := cfg.SourceID
	if !c.hasSource(source) {
		return fmt.Errorf("source %s does not exist; create it with `dmctl source create FILE`", source)
	}
	_, hasRelay, err := relayExpect(ctx, st, source)
	if err != nil {
		return err
	}
	res := sourceResult{Source: source}
	if _, err := st.PutSourceConfig(ctx, cfg); err != nil {
		return fmt.Errorf("write config of source %s: %w", source, err)
	}
	// As on create: enabling relay in the config starts it unless a relay
	// stage (possibly Paused) already says otherwise.
	if cfg.EnableRelay && !hasRelay {
		if err := putRelayStage(ctx, st, source, stage.Running); err != nil {
			return err
		}
		res.Relay = string(stage.Running)
	}
	return e.emitf(res, "source %s updated%s\n", source, relayNote(res.Relay))
}

func sourceDelete(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, st, c, err := e.connectCluster(ctx, cmd, args, "source")
	if err != nil {
		return err
	}
	source := pos[0]
	_, hasRelay, err := relayExpect(ctx, st, source)
	if err != nil {
		return err
	}
	hasConfig := c.hasSource(source)
	bound, relayBound := c.boundWorkers(source), c.relayWorkers(source)
	if !hasConfig && !hasRelay && len(bound) == 0 && len(relayBound) == 0 {
		return fmt.Errorf("source %s does not exist (see `dmctl source list`)", source)
	}
	tasks, err := readSubTasks(ctx, st, source)
	if err != nil {
		return err
	}
	if err := stillHas(source, "task", tasks.Items); err != nil {
		return err
	}
	streams, err := readStreams(ctx, st, source)
	if err != nil {
		return err
	}
	if err := stillHas(source, "stream", streams.Items); err != nil {
		return err
	}

	// Unbind first so that the worker stops using the source before its
	// relay stage and config disappear.
	for _, w := range bound {
		if _, err := st.DeleteBound(ctx, w); err != nil {
			return fmt.Errorf("unbind worker %s from source %s: %w", w, source, err)
		}
	}
	if err := deleteRelayBounds(ctx, st, source, relayBound); err != nil {
		return err
	}
	if err := deleteRelayStage(ctx, st, source); err != nil {
		return err
	}
	if _, err := st.DeleteSourceConfig(ctx, source); err != nil {
		return fmt.Errorf("delete config of source %s: %w", source, err)
	}
	return e.emitf(sourceResult{Source: source, Worker: strings.Join(bound, ",")}, "source %s deleted\n", source)
}

// stillHas returns an error naming the tasks or streams (kind) that source
// still has, or nil when items is empty.
func stillHas[V any](source, kind string, items map[string]V) error {
	if len(items) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(items))
	return fmt.Errorf("source %s still has %s(s) %s; stop them first with `dmctl %s stop NAME`", source, kind, strings.Join(names, ", "), kind)
}

// sourceView is one source as "source list" shows it.
type sourceView struct {
	Source      string `json:"source"`
	Worker      string `json:"worker"`
	EnableRelay bool   `json:"enable-relay"`
	// Relay is the expected relay stage; empty when there is no relay
	// stage key.
	Relay string `json:"relay"`
	// RelayWorker is the worker whose relay key names the source.
	RelayWorker string `json:"relay-worker,omitempty"`
	// Error describes a malformed config key.
	Error string `json:"error,omitempty"`
}

// sourceListJSON is the --output json document of "source list".
type sourceListJSON struct {
	Sources []sourceView `json:"sources"`
}

func sourceList(ctx context.Context, e *env, cmd *command, args []string) error {
	_, st, c, err := e.connectCluster(ctx, cmd, args)
	if err != nil {
		return err
	}
	names := make(map[string]bool, len(c.sources))
	for s := range c.sources {
		names[s] = true
	}
	for key := range c.bad {
		if s, ok := strings.CutPrefix(key, c.keys.SourceConfigPrefix()); ok {
			names[s] = true
		}
	}
	views := make([]sourceView, 0, len(names))
	for _, s := range slices.Sorted(maps.Keys(names)) {
		relay, _, err := relayExpect(ctx, st, s)
		if err != nil {
			return err
		}
		v := sourceView{Source: s, Worker: strings.Join(c.boundWorkers(s), ","), Relay: relay,
			RelayWorker: strings.Join(c.relayWorkers(s), ",")}
		if cfg := c.sources[s]; cfg != nil {
			v.EnableRelay = cfg.EnableRelay
		} else {
			v.Error = c.malformed(c.keys.SourceConfig(s)).Error()
		}
		views = append(views, v)
	}
	return e.emit(sourceListJSON{Sources: views}, func(out io.Writer) error {
		rows := make([][]string, 0, len(views))
		for _, v := range views {
			rows = append(rows, []string{v.Source, v.Worker, strconv.FormatBool(v.EnableRelay), v.Relay, v.Error})
		}
		return table(out, []string{"SOURCE", "WORKER", "ENABLE-RELAY", "RELAY", "ERROR"}, rows)
	})
}
