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
		args:  "FILE [--stage Running|Paused] [--dry-run] [--remove-meta] [--start-time T]",
		short: "split a DM task file into one subtask per source and create them",
		run:   taskStart,
	}, {
		name:  "task check",
		args:  "FILE",
		short: "check every source and target requirement of a task file (privileges, binlog, keys, target); writes nothing to etcd",
		run:   taskCheck,
	}, {
		name:  "task pause",
		args:  "TASK",
		short: "pause a task on every source",
		run:   tasks.setStage(subTaskStage, stage.Paused),
	}, {
		name:  "task resume",
		args:  "TASK",
		short: "resume a task on every source",
		run:   tasks.setStage(subTaskStage, stage.Running),
	}, {
		name:  "task stop",
		args:  "TASK",
		short: "delete a task (stages, then configs) on every source",
		run:   tasks.stop,
	}, {
		name:  "task status",
		args:  "TASK",
		short: "show each source's worker, stage, unit, errors and progress of a task",
		run:   taskStatus,
	}, {
		name:  "task list",
		short: "list tasks with their sources and expected stages",
		run:   taskList,
	}, {
		name:  "task config",
		args:  "TASK",
		short: "print each source's subtask config as etcd holds it (YAML; passwords masked)",
		run:   taskConfig,
	}, {
		name:  "task handle-error",
		args:  "TASK skip|replace [--binlog-pos FILE:POS] [--sql STMT]... [--source S]",
		short: "skip or replace the binlog event a task's sync is stuck on, then resume it",
		run:   taskHandleError,
	}}
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
	dryRun := fs.Bool("dry-run", false, "check the file and print the subtasks it would create, without connecting to etcd")
	sm := addStartFlags(fs)
	pos, err := parseArgs(cmd, fs, args, "FILE")
	if err != nil {
		return err
	}
	if *dryRun {
		if sm.startTime != "" || sm.removeMeta {
			return usagef(cmd, "--dry-run touches nothing; it cannot be combined with --start-time or --remove-meta")
		}
		return dryRunTask(e, pos[0])
	}
	want := stage.Stage(*stageFlag)
	if want != stage.Running && want != stage.Paused {
		return usagef(cmd, "--stage %q: use Running or Paused", *stageFlag)
	}
	path := pos[0]
	tc, subtasks, err := sm.checkTaskFile(path)
	if err != nil {
		return err
	}
	e.warnNotes(path, tc.Notes)
	if tc.RemoveMeta {
		fmt.Fprintf(e.stderr, "warning: %s: remove-meta: true (deprecated in DM): the task's checkpoints are removed now, "+
			"as with --remove-meta; restarts keep them\n", path)
		sm.removeMeta = true
	}
	st, c, err := e.cluster(ctx)
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
	if err := tasks.checkNew(ctx, st, tc.Name); err != nil {
		return err
	}
	if err := sm.prepare(ctx, e, c, tc.Name, subtasks); err != nil {
		return err
	}

	for _, sc := range subtasks {
		if _, err := st.PutSubTask(ctx, sc, ha.Stage{Expect: want, Source: sc.SourceID, Task: sc.Name}); err != nil {
			return fmt.Errorf("write subtask %s of source %s: %w", sc.Name, sc.SourceID, err)
		}
		// As in DM, a task whose validator mode is set starts with its
		// validator; `dmctl validation stop` stops it.
		if sc.Validator.Mode != config.ValidationNone {
			if err := tasks.putStage(ctx, st, validatorStage, ha.Stage{Expect: stage.Running, Source: sc.SourceID, Task: sc.Name}); err != nil {
				return err
			}
		}
	}
	for _, s := range unbound {
		e.noteUnbound(s, "its subtask")
	}
	return e.emitf(tasks.result(tc.Name, want, false, sources), "task %s created on source(s) %s with stage %s\n",
		tc.Name, strings.Join(sources, ", "), want)
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
	_, st, err := e.connect(ctx, cmd, args)
	if err != nil {
		return err
	}
	ix, err := tasks.index(ctx, st)
	if err != nil {
		return err
	}
	views := make([]taskView, 0, len(ix))
	err = eachSnapshot(ctx, st, ix, readSubTasks, func(task, s string, snap ha.SubTaskSnapshot) {
		if len(views) == 0 || views[len(views)-1].Task != task {
			views = append(views, taskView{Task: task})
		}
		sv := taskSourceView{Source: s}
		if it := snap.Items[task]; it != nil {
			sv = subTaskSourceView(s, it)
		}
		v := &views[len(views)-1]
		v.Sources = append(v.Sources, sv)
	})
	if err != nil {
		return err
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
