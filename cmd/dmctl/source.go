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
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/stage"
)

func sourceCommands() []command {
	return []command{{
		name:  "source create",
		args:  "FILE [--worker W]",
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

// loadSource reads and validates a source config file.
func loadSource(path string) (*config.SourceConfig, error) {
	cfg, err := config.LoadSourceConfigFile(path)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("source config %s is invalid; fix these fields:\n%w", path, err)
	}
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
	pos, err := parseArgs(cmd, fs, args, "FILE")
	if err != nil {
		return err
	}
	if *worker != "" {
		if err := config.ValidateName("worker", *worker); err != nil {
			return err
		}
	}
	cfg, err := loadSource(pos[0])
	if err != nil {
		return err
	}
	st, err := e.store(ctx)
	if err != nil {
		return err
	}
	c, err := readCluster(ctx, st)
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
		if _, err := st.PutRelayStage(ctx, ha.Stage{Expect: stage.Running, Source: source}); err != nil {
			return fmt.Errorf("write relay stage of source %s: %w", source, err)
		}
		res.Relay = string(stage.Running)
	}
	if _, err := st.PutBound(ctx, ha.Bound{Source: source, Worker: w}); err != nil {
		return fmt.Errorf("bind source %s to worker %s: %w", source, w, err)
	}
	return e.emit(res, func(out io.Writer) error {
		_, err := fmt.Fprintf(out, "source %s created and bound to worker %s%s\n", source, w, relayNote(res.Relay))
		return err
	})
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
	cfg, err := loadSource(pos[0])
	if err != nil {
		return err
	}
	st, err := e.store(ctx)
	if err != nil {
		return err
	}
	source := cfg.SourceID
	c, err := readCluster(ctx, st)
	if err != nil {
		return err
	}
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
		if _, err := st.PutRelayStage(ctx, ha.Stage{Expect: stage.Running, Source: source}); err != nil {
			return fmt.Errorf("write relay stage of source %s: %w", source, err)
		}
		res.Relay = string(stage.Running)
	}
	return e.emit(res, func(out io.Writer) error {
		_, err := fmt.Fprintf(out, "source %s updated%s\n", source, relayNote(res.Relay))
		return err
	})
}

func sourceDelete(ctx context.Context, e *env, cmd *command, args []string) error {
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
	_, hasRelay, err := relayExpect(ctx, st, source)
	if err != nil {
		return err
	}
	hasConfig := c.hasSource(source)
	bound, relayBound := c.boundWorkers(source), c.relayWorkers(source)
	if !hasConfig && !hasRelay && len(bound) == 0 && len(relayBound) == 0 {
		return fmt.Errorf("source %s does not exist (see `dmctl source list`)", source)
	}
	tasks, err := st.GetSubTasks(ctx, source)
	if err != nil {
		return fmt.Errorf("read tasks of source %s: %w", source, err)
	}
	if len(tasks.Items) > 0 {
		names := slices.Sorted(maps.Keys(tasks.Items))
		return fmt.Errorf("source %s still has task(s) %s; stop them first with `dmctl task stop NAME`", source, strings.Join(names, ", "))
	}
	streams, err := st.GetStreams(ctx, source)
	if err != nil {
		return fmt.Errorf("read streams of source %s: %w", source, err)
	}
	if len(streams.Items) > 0 {
		names := slices.Sorted(maps.Keys(streams.Items))
		return fmt.Errorf("source %s still has stream(s) %s; stop them first with `dmctl stream stop NAME`", source, strings.Join(names, ", "))
	}

	// Unbind first so that the worker stops using the source before its
	// relay stage and config disappear.
	for _, w := range bound {
		if _, err := st.DeleteBound(ctx, w); err != nil {
			return fmt.Errorf("unbind worker %s from source %s: %w", w, source, err)
		}
	}
	for _, w := range relayBound {
		if _, err := st.DeleteRelayBound(ctx, w); err != nil {
			return fmt.Errorf("delete relay key of worker %s for source %s: %w", w, source, err)
		}
	}
	if _, err := st.DeleteRelayStage(ctx, source); err != nil {
		return fmt.Errorf("delete relay stage of source %s: %w", source, err)
	}
	if _, err := st.DeleteSourceConfig(ctx, source); err != nil {
		return fmt.Errorf("delete config of source %s: %w", source, err)
	}
	res := sourceResult{Source: source, Worker: strings.Join(bound, ",")}
	return e.emit(res, func(out io.Writer) error {
		_, err := fmt.Fprintf(out, "source %s deleted\n", source)
		return err
	})
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
	if _, err := positional(cmd, args); err != nil {
		return err
	}
	st, err := e.store(ctx)
	if err != nil {
		return err
	}
	c, err := readCluster(ctx, st)
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
