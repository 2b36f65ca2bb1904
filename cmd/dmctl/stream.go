package main

import (
	"context"
	"fmt"
	"io"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/stage"
)

func streamCommands() []command {
	return []command{{
		name:  "stream create",
		args:  "FILE",
		short: "create a stream task from a config file; the bound worker deploys and runs it",
		run:   streamCreate,
	}, {
		name:  "stream pause",
		args:  "STREAM",
		short: "pause a stream task (its checkpoint is kept)",
		run:   streams.setStage(streamStage, stage.Paused),
	}, {
		name:  "stream resume",
		args:  "STREAM [--ignore-untreated]",
		short: "resume a stream task (from its checkpoint, or from the current position with --ignore-untreated)",
		run:   streams.setStage(streamStage, stage.Running),
	}, {
		name:  "stream stop",
		args:  "STREAM",
		short: "stop and delete a stream task (stage, then config)",
		run:   streams.stop,
	}, {
		name:  "stream status",
		args:  "STREAM",
		short: "show each source's expected stage and worker's stage, state, checkpoint, lag, fill-history and errors of a stream task",
		run:   streamStatus,
	}, {
		name:  "stream list",
		short: "list stream tasks with their source, expected stage and sink",
		run:   streamList,
	}}
}

// streamResult is the --output json document of stream create/pause/
// resume/stop.
type streamResult struct {
	Stream          string   `json:"stream"`
	Stage           string   `json:"stage,omitempty"`
	IgnoreUntreated bool     `json:"ignore-untreated,omitempty"`
	Sources         []string `json:"sources"`
}

// streamCreate checks a stream file, that its source exists and that its
// name is new, then writes its config and the expected stage Running; the
// worker bound to the source deploys and runs it.
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
	st, c, err := e.cluster(ctx)
	if err != nil {
		return err
	}
	if err := c.checkSource(sc.SourceID); err != nil {
		return fmt.Errorf("stream %s: %w", sc.Name, err)
	}
	if err := streams.checkNew(ctx, st, sc.Name); err != nil {
		return err
	}
	if _, err := st.PutStreamConfig(ctx, sc); err != nil {
		return fmt.Errorf("write config of stream %s on source %s: %w", sc.Name, sc.SourceID, err)
	}
	if err := streams.putStage(ctx, st, streamStage, ha.Stage{Expect: stage.Running, Source: sc.SourceID, Task: sc.Name}); err != nil {
		return err
	}
	if len(c.boundWorkers(sc.SourceID)) == 0 {
		e.noteUnbound(sc.SourceID, "the stream")
	}
	return e.emitf(streams.result(sc.Name, stage.Running, false, []string{sc.SourceID}), "stream %s created on source %s with stage %s\n",
		sc.Name, sc.SourceID, stage.Running)
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
	_, st, err := e.connect(ctx, cmd, args)
	if err != nil {
		return err
	}
	ix, err := streams.index(ctx, st)
	if err != nil {
		return err
	}
	views := []streamView{}
	err = eachSnapshot(ctx, st, ix, readStreams, func(name, s string, snap ha.StreamSnapshot) {
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
	})
	if err != nil {
		return err
	}
	return e.emit(streamListJSON{Streams: views}, func(out io.Writer) error {
		rows := make([][]string, 0, len(views))
		for _, v := range views {
			rows = append(rows, []string{v.Stream, v.Source, v.Stage, v.Sink, v.Error})
		}
		return table(out, []string{"STREAM", "SOURCE", "STAGE", "SINK", "ERROR"}, rows)
	})
}
