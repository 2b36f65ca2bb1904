package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/ha/shardddl"
	"github.com/dmworker/dm-worker/pkg/stage"
)

// nameKind is a kind of object that one name identifies on any number of
// sources: a task (a subtask per source) or a stream. The commands that act
// on a name on every source holding it (pause, resume, stop, validation)
// are written once over this table.
type nameKind struct {
	// name is the argument kind and the word in messages: "task", "stream".
	name string
	// config is the config key kind; configWhat names it in errors.
	config     keyKind
	configWhat string
	// stages are the stage key kinds, in the order stop deletes them.
	stages []keyKind
	// state are keys the worker writes for the object (a stream's
	// checkpoint); stop deletes them last, so that an object created again
	// under the same name starts afresh even if no worker saw the stop.
	state []keyKind
	// result is the --output json document of a command that wrote the
	// expected stage want (empty after stop) of name on sources.
	result func(name string, want stage.Stage, ignoreUntreated bool, sources []string) any
	// afterStop removes what the object keeps outside its per-source keys
	// (a task's shard DDL locks); nil for none.
	afterStop func(ctx context.Context, e *env, name string) error
}

// keyKind is one per-source key kind of a named object:
// {prefix(source)}{name}.
type keyKind struct {
	// label names the key in messages: "config", "stage", "validator stage".
	label  string
	prefix func(k ha.Keys, source string) string
	del    func(st *ha.Store, ctx context.Context, source, name string) (int64, error)
	// put writes a stage; nil for a config.
	put func(st *ha.Store, ctx context.Context, stg ha.Stage) (int64, error)
	// subject is shown before "<kind> <name>" in the text output of a
	// command that sets this stage.
	subject string
	// resumable stages accept --ignore-untreated when set to Running.
	resumable bool
}

// The key kinds and name kinds dmctl manages; fixed tables.
var (
	subTaskStage = keyKind{label: "stage", prefix: ha.Keys.SubTaskStagePrefix,
		del: (*ha.Store).DeleteSubTaskStage, put: (*ha.Store).PutSubTaskStage}
	validatorStage = keyKind{label: "validator stage", prefix: ha.Keys.ValidatorStagePrefix, subject: "validator of ",
		del: (*ha.Store).DeleteValidatorStage, put: (*ha.Store).PutValidatorStage}
	streamStage = keyKind{label: "stage", prefix: ha.Keys.StreamStagePrefix, resumable: true,
		del: (*ha.Store).DeleteStreamStage, put: (*ha.Store).PutStreamStage}

	tasks = &nameKind{
		name:       "task",
		config:     keyKind{label: "config", prefix: ha.Keys.SubTaskConfigPrefix, del: (*ha.Store).DeleteSubTaskConfig},
		configWhat: "subtask config",
		// The validator stage goes first: deleting the subtask stage drops
		// the subtask on the worker.
		stages: []keyKind{validatorStage, subTaskStage},
		result: func(name string, want stage.Stage, _ bool, sources []string) any {
			return taskResult{Task: name, Stage: string(want), Sources: sources}
		},
		// A task started again under the same name starts without the
		// old task's shard DDL locks, shares and infos.
		afterStop: func(ctx context.Context, e *env, name string) error {
			if err := shardddl.RemoveTask(ctx, e.cli, e.opts.prefix, name); err != nil {
				return fmt.Errorf("remove the shard DDL locks of task %s: %w", name, err)
			}
			return nil
		},
	}
	streams = &nameKind{
		name:       "stream",
		config:     keyKind{label: "config", prefix: ha.Keys.StreamConfigPrefix, del: (*ha.Store).DeleteStreamConfig},
		configWhat: "stream config",
		stages:     []keyKind{streamStage},
		state: []keyKind{{label: "checkpoint", prefix: ha.Keys.StreamCheckpointPrefix,
			del: (*ha.Store).DeleteStreamCheckpoint}},
		result: func(name string, want stage.Stage, ignoreUntreated bool, sources []string) any {
			return streamResult{Stream: name, Stage: string(want), IgnoreUntreated: ignoreUntreated, Sources: sources}
		},
	}
)

// index indexes every name of the kind by the sources holding any of its
// keys.
func (k *nameKind) index(ctx context.Context, st *ha.Store) (nameIndex, error) {
	prefixes := []string{root(st.Keys(), k.config.prefix)}
	for _, sk := range k.stages {
		prefixes = append(prefixes, root(st.Keys(), sk.prefix))
	}
	return scanIndex(ctx, st, prefixes...)
}

// sources returns the sources holding any key of name, or an error when
// there is none.
func (k *nameKind) sources(ctx context.Context, st *ha.Store, name string) ([]string, error) {
	ix, err := k.index(ctx, st)
	if err != nil {
		return nil, err
	}
	if sources := ix[name]; len(sources) > 0 {
		return sources, nil
	}
	return nil, fmt.Errorf("%s %s does not exist (see `dmctl %s list`)", k.name, name, k.name)
}

// configSources returns the sources holding a config key of name, or an
// error when there is none.
func (k *nameKind) configSources(ctx context.Context, st *ha.Store, name string) ([]string, error) {
	ix, err := scanIndex(ctx, st, root(st.Keys(), k.config.prefix))
	if err != nil {
		return nil, err
	}
	if sources := ix[name]; len(sources) > 0 {
		return sources, nil
	}
	return nil, fmt.Errorf("%s %s does not exist (no %s on any source; see `dmctl %s list`)", k.name, name, k.configWhat, k.name)
}

// checkNew returns an error when name has any key on any source.
func (k *nameKind) checkNew(ctx context.Context, st *ha.Store, name string) error {
	ix, err := k.index(ctx, st)
	if err != nil {
		return err
	}
	if on := ix[name]; len(on) > 0 {
		return fmt.Errorf("%s %s already exists on source(s) %s; stop it first with `dmctl %s stop %s` or choose another name",
			k.name, name, strings.Join(on, ", "), k.name, name)
	}
	return nil
}

// putStage writes stg (Task is the name) with the stage key kind sk.
func (k *nameKind) putStage(ctx context.Context, st *ha.Store, sk keyKind, stg ha.Stage) error {
	if _, err := sk.put(st, ctx, stg); err != nil {
		return fmt.Errorf("write %s of %s %s on source %s: %w", sk.label, k.name, stg.Task, stg.Source, err)
	}
	return nil
}

// setStage returns the command that writes the stage key sk of a name,
// expecting want, on every source that has the name's config; a resumable
// stage set to Running accepts --ignore-untreated.
func (k *nameKind) setStage(sk keyKind, want stage.Stage) func(context.Context, *env, *command, []string) error {
	return func(ctx context.Context, e *env, cmd *command, args []string) error {
		fs := newFlags(cmd)
		var ignore *bool
		if sk.resumable && want == stage.Running {
			ignore = fs.Bool("ignore-untreated", false, "resume from the binlog position current at resume time, skipping untreated events")
		}
		pos, err := positionalFlags(cmd, fs, args, k.name)
		if err != nil {
			return err
		}
		name := pos[0]
		st, err := e.store(ctx)
		if err != nil {
			return err
		}
		sources, err := k.configSources(ctx, st, name)
		if err != nil {
			return err
		}
		stg := ha.Stage{Expect: want, Task: name, IgnoreUntreated: ignore != nil && *ignore}
		for _, s := range sources {
			stg.Source = s
			if err := k.putStage(ctx, st, sk, stg); err != nil {
				return err
			}
		}
		skip := ""
		if stg.IgnoreUntreated {
			skip = " (ignore-untreated: the worker resumes from the source's current binlog position; changes since the checkpoint are skipped)"
		}
		return e.emitf(k.result(name, want, stg.IgnoreUntreated, sources), "%s%s %s: expected stage %s on source(s) %s%s\n",
			sk.subject, k.name, name, want, strings.Join(sources, ", "), skip)
	}
}

// stop is the command that deletes a name on every source holding any of
// its keys: stages first (a deleted stage drops the object on the worker,
// and a config without a stage is inert), then configs.
func (k *nameKind) stop(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, st, err := e.connect(ctx, cmd, args, k.name)
	if err != nil {
		return err
	}
	name := pos[0]
	sources, err := k.sources(ctx, st, name)
	if err != nil {
		return err
	}
	for _, s := range sources {
		for _, sk := range k.stages {
			if err := k.del(ctx, st, sk, s, name); err != nil {
				return err
			}
		}
	}
	for _, s := range sources {
		for _, kk := range append([]keyKind{k.config}, k.state...) {
			if err := k.del(ctx, st, kk, s, name); err != nil {
				return err
			}
		}
	}
	if k.afterStop != nil {
		if err := k.afterStop(ctx, e, name); err != nil {
			return err
		}
	}
	return e.emitf(k.result(name, "", false, sources), "%s %s stopped and deleted on source(s) %s\n",
		k.name, name, strings.Join(sources, ", "))
}

// del deletes the key of kind kk of name on source.
func (k *nameKind) del(ctx context.Context, st *ha.Store, kk keyKind, source, name string) error {
	if _, err := kk.del(st, ctx, source, name); err != nil {
		return fmt.Errorf("delete %s of %s %s on source %s: %w", kk.label, k.name, name, source, err)
	}
	return nil
}

// eachSnapshot calls visit for every name of ix and every source holding
// it, in order, with the snapshot of that source, which read reads once.
func eachSnapshot[S any](ctx context.Context, st *ha.Store, ix nameIndex,
	read func(context.Context, *ha.Store, string) (S, error), visit func(name, source string, snap S)) error {
	snaps := make(map[string]S)
	for _, name := range ix.names() {
		for _, s := range ix[name] {
			snap, ok := snaps[s]
			if !ok {
				var err error
				if snap, err = read(ctx, st, s); err != nil {
					return err
				}
				snaps[s] = snap
			}
			visit(name, s, snap)
		}
	}
	return nil
}

// readSubTasks reads every task of source.
func readSubTasks(ctx context.Context, st *ha.Store, source string) (ha.SubTaskSnapshot, error) {
	snap, err := st.GetSubTasks(ctx, source)
	if err != nil {
		return snap, fmt.Errorf("read tasks of source %s: %w", source, err)
	}
	return snap, nil
}

// readStreams reads every stream of source.
func readStreams(ctx context.Context, st *ha.Store, source string) (ha.StreamSnapshot, error) {
	snap, err := st.GetStreams(ctx, source)
	if err != nil {
		return snap, fmt.Errorf("read streams of source %s: %w", source, err)
	}
	return snap, nil
}

// noteUnbound tells the user that what (the new subtask or stream) of
// source waits for a binding.
func (e *env) noteUnbound(source, what string) {
	fmt.Fprintf(e.stderr, "note: source %s is not bound to a worker; %s runs once it is bound (`dmctl bind %s WORKER`)\n",
		source, what, source)
}
