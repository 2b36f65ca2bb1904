package main

import (
	"context"
	"errors"
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
		short: "check a stream task file; refused, writing nothing, until workers run stream tasks",
		run:   streamCreate,
	}, {
		name:  "stream pause",
		args:  "STREAM",
		short: "pause a stream task; refused, writing nothing, until workers run stream tasks",
		run:   streams.setStage(streamStage, stage.Paused),
	}, {
		name:  "stream resume",
		args:  "STREAM [--ignore-untreated]",
		short: "resume a stream task (from its checkpoint, or from the current position with --ignore-untreated); refused, writing nothing, until workers run stream tasks",
		run:   streams.setStage(streamStage, stage.Running),
	}, {
		name:  "stream stop",
		args:  "STREAM",
		short: "delete a stream task's keys (stage, then config); no worker runs stream tasks yet",
		run:   streams.stop,
	}, {
		name:  "stream list",
		short: "list stream task keys with their source and expected stage; no worker runs stream tasks yet",
		run:   streamList,
	}}
}

// errStreamsNotRun is why dmctl writes no stream keys: the workers of this
// release do not watch them (stream tasks are the next issue), so a stream
// created, paused or resumed through them would do nothing at all.
var errStreamsNotRun = errors.New("stream tasks are not run by this dm-worker release yet — workers do not watch stream keys")

// streamResult is the --output json document of stream create/pause/
// resume/stop.
type streamResult struct {
	Stream          string   `json:"stream"`
	Stage           string   `json:"stage,omitempty"`
	IgnoreUntreated bool     `json:"ignore-untreated,omitempty"`
	Sources         []string `json:"sources"`
}

// streamCreate checks a stream file, that its source exists and that its
// name is new; while streams.notRun is set it then refuses, writing
// nothing. The writes after the refusal are what the stream-task issue
// turns on by dropping notRun from the streams table.
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
	if streams.notRun != nil {
		return streams.refuse(sc.Name, "the stream would never start",
			"The file is valid: keep it for a release that runs stream tasks; to replicate into a MySQL-compatible target now, use a task (`dmctl task start`)")
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
	if len(views) > 0 && streams.notRun != nil {
		e.warnNotRun(streams, "these are keys only, and STAGE is the expected stage in etcd, not a state any worker reached")
	}
	return e.emit(streamListJSON{Streams: views}, func(out io.Writer) error {
		rows := make([][]string, 0, len(views))
		for _, v := range views {
			rows = append(rows, []string{v.Stream, v.Source, v.Stage, v.Sink, v.Error})
		}
		return table(out, []string{"STREAM", "SOURCE", "STAGE", "SINK", "ERROR"}, rows)
	})
}
