package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/stage"
)

func streamCommands() []command {
	return []command{{
		name:  "stream create",
		args:  "FILE",
		short: "create a stream task from a config file and run it",
		run:   streamCreate,
	}, {
		name:  "stream pause",
		args:  "STREAM",
		short: "pause a stream task",
		run:   streamSetStage(stage.Paused),
	}, {
		name:  "stream resume",
		args:  "STREAM [--ignore-untreated]",
		short: "resume a stream task (from its checkpoint, or from the current position with --ignore-untreated)",
		run:   streamSetStage(stage.Running),
	}, {
		name:  "stream stop",
		args:  "STREAM",
		short: "delete a stream task (stage, then config)",
		run:   streamStop,
	}, {
		name:  "stream list",
		short: "list stream tasks with their source and expected stage",
		run:   streamList,
	}}
}

// streamIndex indexes every stream by the sources holding its config or
// stage key.
func streamIndex(ctx context.Context, st *ha.Store) (nameIndex, error) {
	k := st.Keys()
	return scanIndex(ctx, st, root(k.StreamConfigPrefix), root(k.StreamStagePrefix))
}

// streamResult is the --output json document of stream create/pause/
// resume/stop.
type streamResult struct {
	Stream          string   `json:"stream"`
	Stage           string   `json:"stage,omitempty"`
	IgnoreUntreated bool     `json:"ignore-untreated,omitempty"`
	Sources         []string `json:"sources"`
}

func streamCreate(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, err := parseArgs(cmd, newFlags(cmd), args, "FILE")
	if err != nil {
		return err
	}
	path := pos[0]
	sc, err := config.LoadStreamConfigFile(path)
	if err != nil {
		return err
	}
	if err := sc.Validate(); err != nil {
		return fmt.Errorf("stream config %s is invalid; fix these fields:\n%w", path, err)
	}
	st, err := e.store(ctx)
	if err != nil {
		return err
	}
	c, err := readCluster(ctx, st)
	if err != nil {
		return err
	}
	if err := c.checkSource(sc.SourceID); err != nil {
		return fmt.Errorf("stream %s: %w", sc.Name, err)
	}
	ix, err := streamIndex(ctx, st)
	if err != nil {
		return err
	}
	if on := ix[sc.Name]; len(on) > 0 {
		return fmt.Errorf("stream %s already exists on source(s) %s; stop it first with `dmctl stream stop %s` or choose another name",
			sc.Name, strings.Join(on, ", "), sc.Name)
	}
	if _, err := st.PutStreamConfig(ctx, sc); err != nil {
		return fmt.Errorf("write config of stream %s on source %s: %w", sc.Name, sc.SourceID, err)
	}
	if _, err := st.PutStreamStage(ctx, ha.Stage{Expect: stage.Running, Source: sc.SourceID, Task: sc.Name}); err != nil {
		return fmt.Errorf("write stage of stream %s on source %s: %w", sc.Name, sc.SourceID, err)
	}
	if len(c.boundWorkers(sc.SourceID)) == 0 {
		fmt.Fprintf(e.stderr, "note: source %s is not bound to a worker; the stream runs once it is bound (`dmctl bind %s WORKER`)\n",
			sc.SourceID, sc.SourceID)
	}
	res := streamResult{Stream: sc.Name, Stage: string(stage.Running), Sources: []string{sc.SourceID}}
	return e.emit(res, func(out io.Writer) error {
		_, err := fmt.Fprintf(out, "stream %s created on source %s with stage %s\n", sc.Name, sc.SourceID, stage.Running)
		return err
	})
}

// streamConfigSources returns the sources that hold a config key of
// stream, or an error when there is none.
func streamConfigSources(ctx context.Context, st *ha.Store, stream string) ([]string, error) {
	ix, err := scanIndex(ctx, st, root(st.Keys().StreamConfigPrefix))
	if err != nil {
		return nil, err
	}
	sources := ix[stream]
	if len(sources) == 0 {
		return nil, fmt.Errorf("stream %s does not exist (no stream config on any source; see `dmctl stream list`)", stream)
	}
	return sources, nil
}

// streamSetStage returns the command that sets the expected stage of a
// stream on every source that has its config; resume (Running) accepts
// --ignore-untreated.
func streamSetStage(want stage.Stage) func(context.Context, *env, *command, []string) error {
	return func(ctx context.Context, e *env, cmd *command, args []string) error {
		fs := newFlags(cmd)
		var ignore *bool
		if want == stage.Running {
			ignore = fs.Bool("ignore-untreated", false, "resume from the binlog position current at resume time, skipping untreated events")
		}
		pos, err := parseArgs(cmd, fs, args, "STREAM")
		if err != nil {
			return err
		}
		stream := pos[0]
		if err := config.ValidateName("stream", stream); err != nil {
			return err
		}
		st, err := e.store(ctx)
		if err != nil {
			return err
		}
		sources, err := streamConfigSources(ctx, st, stream)
		if err != nil {
			return err
		}
		res := streamResult{Stream: stream, Stage: string(want), Sources: sources, IgnoreUntreated: ignore != nil && *ignore}
		for _, s := range sources {
			stg := ha.Stage{Expect: want, Source: s, Task: stream, IgnoreUntreated: res.IgnoreUntreated}
			if _, err := st.PutStreamStage(ctx, stg); err != nil {
				return fmt.Errorf("write stage of stream %s on source %s: %w", stream, s, err)
			}
		}
		return e.emit(res, func(out io.Writer) error {
			_, err := fmt.Fprintf(out, "stream %s: expected stage %s on source(s) %s\n", stream, want, strings.Join(sources, ", "))
			return err
		})
	}
}

func streamStop(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, err := positional(cmd, args, "stream")
	if err != nil {
		return err
	}
	stream := pos[0]
	st, err := e.store(ctx)
	if err != nil {
		return err
	}
	ix, err := streamIndex(ctx, st)
	if err != nil {
		return err
	}
	sources := ix[stream]
	if len(sources) == 0 {
		return fmt.Errorf("stream %s does not exist (see `dmctl stream list`)", stream)
	}
	for _, s := range sources {
		if _, err := st.DeleteStreamStage(ctx, s, stream); err != nil {
			return fmt.Errorf("delete stage of stream %s on source %s: %w", stream, s, err)
		}
	}
	for _, s := range sources {
		if _, err := st.DeleteStreamConfig(ctx, s, stream); err != nil {
			return fmt.Errorf("delete config of stream %s on source %s: %w", stream, s, err)
		}
	}
	return e.emit(streamResult{Stream: stream, Sources: sources}, func(out io.Writer) error {
		_, err := fmt.Fprintf(out, "stream %s stopped and deleted on source(s) %s\n", stream, strings.Join(sources, ", "))
		return err
	})
}

// streamListJSON is the --output json document of "stream list".
type streamListJSON struct {
	Streams []streamView `json:"streams"`
}

// streamView is a stream on one source as "stream list" shows it.
type streamView struct {
	Stream string `json:"stream"`
	Source string `json:"source"`
	// Stage is the expected stage ("" when the stage key is missing).
	Stage           string `json:"stage"`
	IgnoreUntreated bool   `json:"ignore-untreated,omitempty"`
	Sink            string `json:"sink,omitempty"`
	// Error describes a malformed or missing key of this stream.
	Error string `json:"error,omitempty"`
}

func streamList(ctx context.Context, e *env, cmd *command, args []string) error {
	if _, err := positional(cmd, args); err != nil {
		return err
	}
	st, err := e.store(ctx)
	if err != nil {
		return err
	}
	ix, err := streamIndex(ctx, st)
	if err != nil {
		return err
	}
	snaps := make(map[string]ha.StreamSnapshot)
	views := []streamView{}
	for _, name := range ix.names() {
		for _, s := range ix[name] {
			snap, ok := snaps[s]
			if !ok {
				if snap, err = st.GetStreams(ctx, s); err != nil {
					return fmt.Errorf("read streams of source %s: %w", s, err)
				}
				snaps[s] = snap
			}
			v := streamView{Stream: name, Source: s}
			it := snap.Items[name]
			switch {
			case it == nil:
				v.Error = "keys changed while listing"
			case it.Err != nil:
				v.Error = it.Err.Error()
			case it.Config == nil:
				v.Error = "config key missing"
			case it.Stage == nil:
				v.Error = "stage key missing"
			}
			if it != nil && it.Stage != nil {
				v.Stage, v.IgnoreUntreated = string(it.Stage.Expect), it.Stage.IgnoreUntreated
			}
			if it != nil && it.Config != nil {
				v.Sink = it.Config.Sink.Type
			}
			views = append(views, v)
		}
	}
	return e.emit(streamListJSON{Streams: views}, func(out io.Writer) error {
		rows := make([][]string, 0, len(views))
		for _, v := range views {
			rows = append(rows, []string{v.Stream, v.Source, v.Stage, v.Sink, v.Error})
		}
		return table(out, []string{"STREAM", "SOURCE", "STAGE", "SINK", "ERROR"}, rows)
	})
}
