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

func taskCommands() []command {
	return []command{{
		name:  "task start",
		args:  "FILE [--stage Running|Paused]",
		short: "split a DM task file into one subtask per source and create them",
		run:   taskStart,
	}, {
		name:  "task pause",
		args:  "TASK",
		short: "pause a task on every source",
		run:   taskSetStage(stage.Paused),
	}, {
		name:  "task resume",
		args:  "TASK",
		short: "resume a task on every source",
		run:   taskSetStage(stage.Running),
	}, {
		name:  "task stop",
		args:  "TASK",
		short: "delete a task (stages, then configs) on every source",
		run:   taskStop,
	}, {
		name:  "task status",
		args:  "TASK",
		short: "show each source's worker, stage, unit, errors and progress of a task",
		run:   taskStatus,
	}, {
		name:  "task list",
		short: "list tasks with their sources and expected stages",
		run:   taskList,
	}}
}

// taskIndex indexes every task by the sources holding its config, subtask
// stage or validator stage key.
func taskIndex(ctx context.Context, st *ha.Store) (nameIndex, error) {
	k := st.Keys()
	return scanIndex(ctx, st, root(k.SubTaskConfigPrefix), root(k.SubTaskStagePrefix), root(k.ValidatorStagePrefix))
}

// taskConfigSources returns the sources that hold a config key of task, or
// an error when there is none.
func taskConfigSources(ctx context.Context, st *ha.Store, task string) ([]string, error) {
	ix, err := scanIndex(ctx, st, root(st.Keys().SubTaskConfigPrefix))
	if err != nil {
		return nil, err
	}
	sources := ix[task]
	if len(sources) == 0 {
		return nil, fmt.Errorf("task %s does not exist (no subtask config on any source; see `dmctl task list`)", task)
	}
	return sources, nil
}

// taskResult is the --output json document of task start/pause/resume/stop.
type taskResult struct {
	Task    string   `json:"task"`
	Stage   string   `json:"stage,omitempty"`
	Sources []string `json:"sources"`
}

func taskStart(ctx context.Context, e *env, cmd *command, args []string) error {
	fs := newFlags(cmd)
	stageFlag := fs.String("stage", string(stage.Running), "expected stage of the new subtasks: Running or Paused")
	pos, err := parseArgs(cmd, fs, args, "FILE")
	if err != nil {
		return err
	}
	want := stage.Stage(*stageFlag)
	if want != stage.Running && want != stage.Paused {
		return usagef(cmd, "--stage %q: use Running or Paused", *stageFlag)
	}
	path := pos[0]
	tc, err := config.LoadTaskConfigFile(path)
	if err != nil {
		return err
	}
	subtasks, err := tc.SubTaskConfigs()
	if err != nil {
		return fmt.Errorf("task file %s is invalid; fix these fields:\n%w", path, err)
	}
	st, err := e.store(ctx)
	if err != nil {
		return err
	}
	c, err := readCluster(ctx, st)
	if err != nil {
		return err
	}
	var missing, unbound, sources []string
	for _, sc := range subtasks {
		sources = append(sources, sc.SourceID)
		if _, ok := c.sources[sc.SourceID]; !ok {
			missing = append(missing, sc.SourceID)
		} else if len(c.boundWorkers(sc.SourceID)) == 0 {
			unbound = append(unbound, sc.SourceID)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("task %s: source(s) %s do not exist; create them first with `dmctl source create FILE`",
			tc.Name, strings.Join(missing, ", "))
	}
	ix, err := taskIndex(ctx, st)
	if err != nil {
		return err
	}
	if on := ix[tc.Name]; len(on) > 0 {
		return fmt.Errorf("task %s already exists on source(s) %s; stop it first with `dmctl task stop %s` or choose another name",
			tc.Name, strings.Join(on, ", "), tc.Name)
	}

	for _, sc := range subtasks {
		if _, err := st.PutSubTask(ctx, sc, ha.Stage{Expect: want, Source: sc.SourceID, Task: sc.Name}); err != nil {
			return fmt.Errorf("write subtask %s of source %s: %w", sc.Name, sc.SourceID, err)
		}
		// As in DM, a task whose validator mode is set starts with its
		// validator; `dmctl validation stop` stops it.
		if sc.Validator.Mode != config.ValidationNone {
			if _, err := st.PutValidatorStage(ctx, ha.Stage{Expect: stage.Running, Source: sc.SourceID, Task: sc.Name}); err != nil {
				return fmt.Errorf("write validator stage of task %s on source %s: %w", sc.Name, sc.SourceID, err)
			}
		}
	}
	for _, s := range unbound {
		fmt.Fprintf(e.stderr, "note: source %s is not bound to a worker; its subtask runs once it is bound (`dmctl bind %s WORKER`)\n", s, s)
	}
	res := taskResult{Task: tc.Name, Stage: string(want), Sources: sources}
	return e.emit(res, func(out io.Writer) error {
		_, err := fmt.Fprintf(out, "task %s created on source(s) %s with stage %s\n", tc.Name, strings.Join(sources, ", "), want)
		return err
	})
}

// taskSetStage returns the command that sets the expected stage of a task
// on every source that has its config.
func taskSetStage(want stage.Stage) func(context.Context, *env, *command, []string) error {
	return func(ctx context.Context, e *env, cmd *command, args []string) error {
		pos, err := positional(cmd, args, "task")
		if err != nil {
			return err
		}
		task := pos[0]
		st, err := e.store(ctx)
		if err != nil {
			return err
		}
		sources, err := taskConfigSources(ctx, st, task)
		if err != nil {
			return err
		}
		for _, s := range sources {
			if _, err := st.PutSubTaskStage(ctx, ha.Stage{Expect: want, Source: s, Task: task}); err != nil {
				return fmt.Errorf("write stage of task %s on source %s: %w", task, s, err)
			}
		}
		return e.emit(taskResult{Task: task, Stage: string(want), Sources: sources}, func(out io.Writer) error {
			_, err := fmt.Fprintf(out, "task %s: expected stage %s on source(s) %s\n", task, want, strings.Join(sources, ", "))
			return err
		})
	}
}

func taskStop(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, err := positional(cmd, args, "task")
	if err != nil {
		return err
	}
	task := pos[0]
	st, err := e.store(ctx)
	if err != nil {
		return err
	}
	ix, err := taskIndex(ctx, st)
	if err != nil {
		return err
	}
	sources := ix[task]
	if len(sources) == 0 {
		return fmt.Errorf("task %s does not exist (see `dmctl task list`)", task)
	}
	// Stages first: a deleted stage drops the subtask on the worker, and a
	// config without a stage is inert.
	for _, s := range sources {
		if _, err := st.DeleteValidatorStage(ctx, s, task); err != nil {
			return fmt.Errorf("delete validator stage of task %s on source %s: %w", task, s, err)
		}
		if _, err := st.DeleteSubTaskStage(ctx, s, task); err != nil {
			return fmt.Errorf("delete stage of task %s on source %s: %w", task, s, err)
		}
	}
	for _, s := range sources {
		if _, err := st.DeleteSubTaskConfig(ctx, s, task); err != nil {
			return fmt.Errorf("delete config of task %s on source %s: %w", task, s, err)
		}
	}
	return e.emit(taskResult{Task: task, Sources: sources}, func(out io.Writer) error {
		_, err := fmt.Fprintf(out, "task %s stopped and deleted on source(s) %s\n", task, strings.Join(sources, ", "))
		return err
	})
}

// taskListJSON is the --output json document of "task list".
type taskListJSON struct {
	Tasks []taskView `json:"tasks"`
}

// taskView is one task as "task list" shows it.
type taskView struct {
	Task    string           `json:"task"`
	Sources []taskSourceView `json:"sources"`
}

// taskSourceView is a task's share on one source: its expected stage
// ("" when the stage key is missing) and validator stage.
type taskSourceView struct {
	Source    string `json:"source"`
	Stage     string `json:"stage"`
	Validator string `json:"validator,omitempty"`
	// Error describes a malformed key of this subtask.
	Error string `json:"error,omitempty"`
}

func taskList(ctx context.Context, e *env, cmd *command, args []string) error {
	if _, err := positional(cmd, args); err != nil {
		return err
	}
	st, err := e.store(ctx)
	if err != nil {
		return err
	}
	ix, err := taskIndex(ctx, st)
	if err != nil {
		return err
	}
	snaps := make(map[string]ha.SubTaskSnapshot)
	views := make([]taskView, 0, len(ix))
	for _, task := range ix.names() {
		v := taskView{Task: task}
		for _, s := range ix[task] {
			snap, ok := snaps[s]
			if !ok {
				if snap, err = st.GetSubTasks(ctx, s); err != nil {
					return fmt.Errorf("read tasks of source %s: %w", s, err)
				}
				snaps[s] = snap
			}
			sv := taskSourceView{Source: s}
			if it := snap.Items[task]; it != nil {
				sv = subTaskSourceView(s, it)
			}
			v.Sources = append(v.Sources, sv)
		}
		views = append(views, v)
	}
	return e.emit(taskListJSON{Tasks: views}, func(out io.Writer) error {
		var rows [][]string
		for _, v := range views {
			for _, s := range v.Sources {
				rows = append(rows, []string{v.Task, s.Source, s.Stage, s.Validator, s.Error})
			}
		}
		return table(out, []string{"TASK", "SOURCE", "STAGE", "VALIDATOR", "ERROR"}, rows)
	})
}

// subTaskSourceView describes one subtask item read from etcd.
func subTaskSourceView(source string, it *ha.SubTaskItem) taskSourceView {
	sv := taskSourceView{Source: source}
	if it.Stage != nil {
		sv.Stage = string(it.Stage.Expect)
	}
	if it.ValidatorStage != nil {
		sv.Validator = string(it.ValidatorStage.Expect)
	}
	switch {
	case it.Err != nil:
		sv.Error = it.Err.Error()
	case it.Config == nil:
		sv.Error = "config key missing"
	case it.Stage == nil:
		sv.Error = "stage key missing"
	}
	return sv
}
