package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/stage"
)

func validationCommands() []command {
	return []command{{
		name:  "validation start",
		args:  "TASK",
		short: "start the validator of a task on every source",
		run:   validationSetStage(stage.Running),
	}, {
		name:  "validation stop",
		args:  "TASK",
		short: "stop the validator of a task on every source",
		run:   validationSetStage(stage.Stopped),
	}}
}

// validationSetStage returns the command that writes the validator stage
// want for every source that has the task's config.
func validationSetStage(want stage.Stage) func(context.Context, *env, *command, []string) error {
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
			if _, err := st.PutValidatorStage(ctx, ha.Stage{Expect: want, Source: s, Task: task}); err != nil {
				return fmt.Errorf("write validator stage of task %s on source %s: %w", task, s, err)
			}
		}
		return e.emit(taskResult{Task: task, Stage: string(want), Sources: sources}, func(out io.Writer) error {
			_, err := fmt.Fprintf(out, "validator of task %s: expected stage %s on source(s) %s\n", task, want, strings.Join(sources, ", "))
			return err
		})
	}
}
