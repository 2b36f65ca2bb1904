package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/unit"
)

// validationCommands are the commands of a task's validator: its stage,
// its status and its validation errors.
func validationCommands() []command {
	return []command{{
		name:  "validation start",
		args:  "TASK",
		short: "start the validator of a task on every source",
		run:   tasks.setStage(validatorStage, stage.Running),
	}, {
		name:  "validation stop",
		args:  "TASK",
		short: "stop the validator of a task on every source",
		run:   tasks.setStage(validatorStage, stage.Stopped),
	}, {
		name:  "validation status",
		args:  "TASK",
		short: "show each source's validator: stage, state, pending rows, errors by state, rows checked, lag, checkpoint",
		run:   validationStatus,
	}, {
		name:  "validation errors",
		args:  "TASK [--state new|ignored|resolved|all] [--source S]",
		short: "list a task's validation errors from each source's worker (default --state new: the unhandled ones)",
		run:   validationErrors,
	}, {
		name:  "validation ignore",
		args:  "TASK (ID --source S | --all [--source S])",
		short: "mark a validation error (or all of them) ignored; an ID belongs to one source: name it with --source when the task has several",
		run:   validationOperate("ignore"),
	}, {
		name:  "validation resolve",
		args:  "TASK (ID --source S | --all [--source S])",
		short: "mark a validation error (or all of them) resolved; an ID needs --source when the task has several sources",
		run:   validationOperate("resolve"),
	}, {
		name:  "validation clear",
		args:  "TASK (ID --source S | --all [--source S])",
		short: "delete a validation error (or all of them); an ID needs --source when the task has several sources",
		run:   validationOperate("clear"),
	}}
}

// validationStatusJSON is the --output json document of "validation
// status".
type validationStatusJSON struct {
	Task    string                  `json:"task"`
	Sources []sourceValidatorStatus `json:"sources"`
}

// sourceValidatorStatus is a task's validator on one source.
type sourceValidatorStatus struct {
	Source string `json:"source"`
	Worker string `json:"worker"`
	// Expect is the expected validator stage in etcd ("" when there is no
	// validator stage key).
	Expect string `json:"expect"`
	// Validator is the "validator" object of the worker's subtask status;
	// null when the worker does not report the subtask or no validator.
	Validator *unit.ValidatorStatus `json:"validator"`
}

func validationStatus(ctx context.Context, e *env, cmd *command, args []string) error {
	var doc validationStatusJSON
	err := e.eachTaskSource(ctx, cmd, args, func(task string, ts taskSource) error {
		doc.Task = task
		vs := sourceValidatorStatus{Source: ts.source, Worker: ts.worker}
		if ts.item != nil && ts.item.ValidatorStage != nil {
			vs.Expect = string(ts.item.ValidatorStage.Expect)
		}
		if ts.ws != nil {
			var err error
			if vs.Validator, err = pickValidator(ts.ws, task); err != nil {
				return fmt.Errorf("status of worker %s: %w", vs.Worker, err)
			}
		}
		doc.Sources = append(doc.Sources, vs)
		return nil
	})
	if err != nil {
		return err
	}
	return e.emit(doc, func(w io.Writer) error { return printValidationStatus(w, &doc) })
}

// pickValidator returns the validator object of task's subtask in ws, nil
// when there is none.
func pickValidator(ws *workerStatus, task string) (*unit.ValidatorStatus, error) {
	raw, err := findNamed(ws.SubTasks, task)
	if err != nil || raw == nil {
		return nil, err
	}
	var sub struct {
		Validator *unit.ValidatorStatus `json:"validator"`
	}
	if err := json.Unmarshal(raw, &sub); err != nil {
		return nil, fmt.Errorf("decode the validator of subtask %s: %w", task, err)
	}
	return sub.Validator, nil
}

// printValidationStatus writes one table row per source, then each
// source's skipped tables and last error.
func printValidationStatus(w io.Writer, doc *validationStatusJSON) error {
	var rows [][]string
	var notes []string
	for _, s := range doc.Sources {
		v := s.Validator
		if v == nil {
			rows = append(rows, []string{s.Source, s.Worker, s.Expect})
			continue
		}
		rows = append(rows, []string{s.Source, s.Worker, s.Expect, string(v.Stage), v.Mode, v.State,
			strconv.FormatInt(v.Pending, 10), strconv.FormatInt(v.Errors.New, 10), strconv.FormatInt(v.Errors.Ignored, 10),
			strconv.FormatInt(v.Errors.Resolved, 10), strconv.FormatInt(v.RowsChecked, 10),
			strconv.FormatFloat(v.LagSeconds, 'f', 1, 64), v.Checkpoint})
		if len(v.SkippedTables) > 0 {
			notes = append(notes, fmt.Sprintf("source %s: tables not validated (no primary or NOT NULL unique key): %s",
				s.Source, strings.Join(v.SkippedTables, ", ")))
		}
		if v.Error != nil {
			notes = append(notes, fmt.Sprintf("source %s: error [%s] %s", s.Source, v.Error.Code, v.Error.Message))
		}
	}
	fmt.Fprintf(w, "task %s\n", doc.Task)
	err := table(w, []string{"SOURCE", "WORKER", "EXPECT", "STAGE", "MODE", "STATE", "PENDING", "NEW", "IGNORED", "RESOLVED",
		"ROWS-CHECKED", "LAG-S", "CHECKPOINT"}, rows)
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	return err
}
