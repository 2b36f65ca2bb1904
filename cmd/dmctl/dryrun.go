package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dmworker/dm-worker/config"
)

// Reading task and source files, shared by task start, source create and
// source update and by their --dry-run, so that a dry run checks exactly
// what a real run would write.

// checkTaskFile reads a task file, decodes it (Strict), validates it and
// splits it into one subtask per source; the error lists every problem.
func checkTaskFile(path string) (*config.TaskConfig, []*config.SubTaskConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read task file: %w", err)
	}
	return checkTaskData(path, data)
}

// checkTaskData is checkTaskFile of data read from path.
func checkTaskData(path string, data []byte) (*config.TaskConfig, []*config.SubTaskConfig, error) {
	tc, subs, err := config.CheckTaskConfig(data)
	switch {
	case err != nil && tc == nil:
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	case err != nil:
		return tc, nil, fmt.Errorf("task file %s is invalid; fix these fields:\n%w", path, err)
	}
	return tc, subs, nil
}

// checkSourceFile reads, decodes (Strict) and validates a source file; the
// error lists every problem.
func checkSourceFile(path string) (*config.SourceConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read source file: %w", err)
	}
	cfg, err := config.CheckSourceConfig(data)
	switch {
	case err != nil && cfg == nil:
		return nil, fmt.Errorf("%s: %w", path, err)
	case err != nil:
		return cfg, fmt.Errorf("source config %s is invalid; fix these fields:\n%w", path, err)
	}
	return cfg, nil
}

// warnNotes prints, on stderr, the DM fields of path that were accepted
// without effect and the old names that were read as current ones.
func (e *env) warnNotes(path string, n config.DecodeNotes) {
	if w := n.Warning(); w != "" {
		fmt.Fprintf(e.stderr, "warning: %s: %s\n", path, w)
	}
	if w := n.RenamedWarning(); w != "" {
		fmt.Fprintf(e.stderr, "note: %s: %s\n", path, w)
	}
}

// dryRunTaskJSON is the --output json document of task start --dry-run.
type dryRunTaskJSON struct {
	Task     string                  `json:"task"`
	Ignored  []string                `json:"ignored"`
	Renamed  []string                `json:"renamed"`
	Subtasks []*config.SubTaskConfig `json:"subtasks"`
}

// dryRunTask checks a task file without connecting to etcd and prints the
// subtask configs task start would write (passwords masked): YAML documents
// on stdout, or one JSON document with --output json. Warnings go to stderr.
func dryRunTask(e *env, path string) error {
	tc, subs, err := checkTaskFile(path)
	if tc != nil {
		e.warnNotes(path, tc.Notes)
	}
	if err != nil {
		return err
	}
	if resume := withoutMeta(subs); len(resume) > 0 {
		fmt.Fprintf(e.stderr, "note: %s: source(s) %s have no meta: they resume from the task's checkpoints in the target "+
			"(`task start` checks that there are some, e.g. left by a full task of the same name)\n", path, strings.Join(sourcesOf(resume), ", "))
	}
	if tc.RemoveMeta {
		fmt.Fprintf(e.stderr, "note: %s: remove-meta: true (deprecated in DM): `task start` would remove the task's checkpoints in the target first\n", path)
	}
	masked := make([]*config.SubTaskConfig, len(subs))
	for i, sc := range subs {
		masked[i] = sc.Redacted()
	}
	doc := dryRunTaskJSON{Task: tc.Name, Ignored: nonNil(tc.Notes.Ignored), Renamed: nonNil(tc.Notes.Renamed), Subtasks: masked}
	return e.emit(doc, func(w io.Writer) error {
		fmt.Fprintf(w, "# task file %s is valid: task %s on %d source(s); nothing was written\n", path, tc.Name, len(masked))
		for _, sc := range masked {
			y, err := sc.YAML()
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "---\n# subtask of source %s (key task/config/%s/%s; passwords masked)\n%s", sc.SourceID, sc.SourceID, sc.Name, y)
		}
		return nil
	})
}

// dryRunSourceJSON is the --output json document of source create --dry-run.
type dryRunSourceJSON struct {
	Source  string               `json:"source"`
	Ignored []string             `json:"ignored"`
	Renamed []string             `json:"renamed"`
	Config  *config.SourceConfig `json:"config"`
}

// dryRunSource checks a source file without connecting to etcd and prints
// the config source create would write (password masked).
func dryRunSource(e *env, path string) error {
	cfg, err := checkSourceFile(path)
	if cfg != nil {
		e.warnNotes(path, cfg.Notes)
	}
	if err != nil {
		return err
	}
	masked := cfg.Redacted()
	doc := dryRunSourceJSON{Source: cfg.SourceID, Ignored: nonNil(cfg.Notes.Ignored), Renamed: nonNil(cfg.Notes.Renamed), Config: masked}
	return e.emit(doc, func(w io.Writer) error {
		y, err := masked.YAML()
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "# source file %s is valid: source %s; nothing was written (password masked)\n%s", path, cfg.SourceID, y)
		return err
	})
}

// nonNil makes an absent list encode as [] in JSON output.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
