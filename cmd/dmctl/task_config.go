package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/dmworker/dm-worker/config"
)

// taskConfigJSON is the --output json document of "task config".
type taskConfigJSON struct {
	Task    string             `json:"task"`
	Sources []taskSourceConfig `json:"sources"`
}

// taskSourceConfig is the subtask config etcd holds for one source, with
// passwords masked.
type taskSourceConfig struct {
	Source string                `json:"source"`
	Config *config.SubTaskConfig `json:"config"`
}

func taskConfig(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, st, err := e.connect(ctx, cmd, args, "task")
	if err != nil {
		return err
	}
	task := pos[0]
	sources, err := tasks.configSources(ctx, st, task)
	if err != nil {
		return err
	}
	doc := taskConfigJSON{Task: task, Sources: make([]taskSourceConfig, 0, len(sources))}
	for _, s := range sources {
		item, _, err := st.GetSubTask(ctx, s, task)
		if err != nil {
			return fmt.Errorf("read task %s of source %s: %w", task, s, err)
		}
		if item == nil || item.Config == nil {
			msg := "config key missing"
			if item != nil && item.Err != nil {
				msg = item.Err.Error()
			}
			return fmt.Errorf("task %s on source %s: the subtask config in etcd cannot be read (%s); restart the task with `dmctl task stop %s` and `dmctl task start FILE`",
				task, s, msg, task)
		}
		doc.Sources = append(doc.Sources, taskSourceConfig{Source: s, Config: item.Config.Redacted()})
	}
	return e.emit(doc, func(w io.Writer) error { return printTaskConfig(w, &doc) })
}

// printTaskConfig writes each source's subtask config as one YAML
// document.
func printTaskConfig(w io.Writer, doc *taskConfigJSON) error {
	var b strings.Builder
	for i, s := range doc.Sources {
		if i > 0 {
			b.WriteString("---\n")
		}
		y, err := yaml.Marshal(s.Config)
		if err != nil {
			return fmt.Errorf("encode subtask config of source %s as YAML: %w", s.Source, err)
		}
		fmt.Fprintf(&b, "# task %s, source %s\n", doc.Task, s.Source)
		b.Write(y)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
