package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/stage"
)

// handleErrorRequest is the body of POST
// /api/v1/subtasks/{task}/handle-error (DESIGN.md §6).
type handleErrorRequest struct {
	Op        string   `json:"op"`
	BinlogPos string   `json:"binlog-pos,omitempty"`
	SQLs      []string `json:"sqls,omitempty"`
}

// handleErrorResult is the --output json document of "task handle-error".
type handleErrorResult struct {
	Task    string               `json:"task"`
	Op      string               `json:"op"`
	Sources []handleErrorOutcome `json:"sources"`
}

// handleErrorOutcome is what happened on one source.
type handleErrorOutcome struct {
	Source string `json:"source"`
	Worker string `json:"worker"`
	// Resumed is true when dmctl rewrote the expected stage Running so
	// that the worker resumes the subtask past the event.
	Resumed bool `json:"resumed"`
	// Error is the worker's answer when it refused.
	Error *outcomeError `json:"error,omitempty"`
}

type outcomeError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, "; ") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func taskHandleError(ctx context.Context, e *env, cmd *command, args []string) error {
	fs := newFlags(cmd)
	pos := fs.String("binlog-pos", "", "the event to handle, as FILE:POS (start or end position); default: the event the subtask is stuck on")
	var sqls stringList
	fs.Var(&sqls, "sql", "a statement to run instead of the event (replace; repeat for several)")
	var only string
	fs.StringVar(&only, "source", "", "handle the error on this source only")
	fs.StringVar(&only, "s", "", "short for --source")
	words, err := parseArgs(cmd, fs, args, "TASK", "skip|replace")
	if err != nil {
		return err
	}
	task, op := words[0], words[1]
	if err := config.ValidateName("task", task); err != nil {
		return err
	}
	switch op {
	case "skip":
		if len(sqls) > 0 {
			return usagef(cmd, "skip takes no --sql; use replace to run statements instead of the event")
		}
	case "replace":
		if len(sqls) == 0 {
			return usagef(cmd, "replace needs at least one --sql \"STATEMENT\" to run instead of the event")
		}
	default:
		return usagef(cmd, "operation %q: use skip or replace", op)
	}
	if *pos != "" {
		if _, err := binlog.ParseLocation(*pos); err != nil {
			return usagef(cmd, "--binlog-pos %q: %v", *pos, err)
		}
	}
	if only != "" {
		if err := config.ValidateName("source", only); err != nil {
			return err
		}
	}

	st, c, err := e.cluster(ctx)
	if err != nil {
		return err
	}
	sources, err := tasks.configSources(ctx, st, task)
	if err != nil {
		return err
	}
	targets, err := e.handleErrorTargets(ctx, st, c, task, sources, only, *pos != "")
	if err != nil {
		return err
	}

	req := handleErrorRequest{Op: op, BinlogPos: *pos, SQLs: sqls}
	res := handleErrorResult{Task: task, Op: op, Sources: make([]handleErrorOutcome, 0, len(targets))}
	var failed []string
	for _, s := range targets {
		out := handleErrorOutcome{Source: s}
		if err := e.handleErrorOn(ctx, st, c, task, s, req, &out); err != nil {
			failed = append(failed, s)
			out.Error = &outcomeError{Code: apiCode(err), Message: err.Error()}
			if out.Error.Code == "" {
				out.Error.Code = "dmctl"
			}
		}
		res.Sources = append(res.Sources, out)
	}
	if err := e.emit(res, func(w io.Writer) error { return printHandleError(w, &res) }); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("handle-error %s of task %s failed on source(s) %s (see above)", op, task, strings.Join(failed, ", "))
	}
	return nil
}

// handleErrorTargets chooses the sources to act on: --source when given
// (it must hold the task); the only source of a one-source task; else, as
// in DM, every source whose subtask is paused with an error. A binlog
// position belongs to one source, so with several sources it needs
// --source.
func (e *env) handleErrorTargets(ctx context.Context, st *ha.Store, c *cluster, task string, sources []string, only string, withPos bool) ([]string, error) {
	if only != "" {
		if !slices.Contains(sources, only) {
			return nil, fmt.Errorf("task %s has no subtask on source %s (its sources: %s)", task, only, strings.Join(sources, ", "))
		}
		return []string{only}, nil
	}
	if len(sources) == 1 {
		return sources, nil
	}
	if withPos {
		return nil, fmt.Errorf("task %s runs on sources %s; a --binlog-pos belongs to one of them: add --source S",
			task, strings.Join(sources, ", "))
	}
	var stuck []string
	for _, s := range sources {
		ok, err := e.pausedWithError(ctx, st, c, task, s)
		if err != nil {
			return nil, err
		}
		if ok {
			stuck = append(stuck, s)
		}
	}
	if len(stuck) == 0 {
		return nil, fmt.Errorf("no subtask of task %s is paused with an error on sources %s (see `dmctl task status %s`); name one with --source S",
			task, strings.Join(sources, ", "), task)
	}
	return stuck, nil
}

// pausedWithError reports whether the worker bound to source reports the
// subtask of task as Paused with errors (live status first, else the copy
// in P/status).
func (e *env) pausedWithError(ctx context.Context, st *ha.Store, c *cluster, task, source string) (bool, error) {
	ws := c.boundWorkers(source)
	if len(ws) == 0 {
		return false, nil
	}
	status, err := e.liveStatus(ctx, c.infos[ws[0]].Addr)
	if err != nil {
		raw, found, err := getStatus(ctx, st, ws[0])
		if err != nil || !found {
			return false, err
		}
		var s workerStatus
		if json.Unmarshal(raw, &s) != nil {
			return false, nil
		}
		status = &s
	}
	var sts sourceTaskStatus
	if err := pickTask(status, task, &sts); err != nil || sts.Subtask == nil {
		return false, nil
	}
	var sub subTaskStatus
	if json.Unmarshal(sts.Subtask, &sub) != nil {
		return false, nil
	}
	return sub.Stage == string(stage.Paused) && len(sub.Errors) > 0, nil
}

// getStatus reads P/status/{worker}.
func getStatus(ctx context.Context, st *ha.Store, worker string) ([]byte, bool, error) {
	all, _, err := st.GetStatuses(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("read worker statuses: %w", err)
	}
	v, ok := all[worker]
	return v, ok, nil
}

// handleErrorOn posts req to the worker bound to source and, when the
// expected stage is Running, writes it again: a new stage revision is a
// resume command for the worker, so the subtask continues past the event.
func (e *env) handleErrorOn(ctx context.Context, st *ha.Store, c *cluster, task, source string, req handleErrorRequest, out *handleErrorOutcome) error {
	worker, addr, err := c.sourceWorker(source)
	out.Worker = worker
	if err != nil {
		return err
	}
	if err := e.postWorker(ctx, worker, addr, "/api/v1/subtasks/"+task+"/handle-error", req, nil); err != nil {
		return err
	}
	item, _, err := st.GetSubTask(ctx, source, task)
	if err != nil {
		return fmt.Errorf("read the stage of task %s on source %s: %w", task, source, err)
	}
	if item == nil || item.Stage == nil || item.Stage.Expect != stage.Running {
		return nil
	}
	if err := tasks.putStage(ctx, st, subTaskStage, ha.Stage{Expect: stage.Running, Source: source, Task: task}); err != nil {
		return err
	}
	out.Resumed = true
	return nil
}

func printHandleError(w io.Writer, res *handleErrorResult) error {
	var b strings.Builder
	for _, s := range res.Sources {
		switch {
		case s.Error != nil:
			fmt.Fprintf(&b, "task %s source %s: handle-error %s failed: %s\n", res.Task, s.Source, res.Op, s.Error.Message)
		case s.Resumed:
			fmt.Fprintf(&b, "task %s source %s (worker %s): %s recorded; subtask resumed\n", res.Task, s.Source, s.Worker, res.Op)
		default:
			fmt.Fprintf(&b, "task %s source %s (worker %s): %s recorded; the subtask applies it when resumed (`dmctl task resume %s`)\n",
				res.Task, s.Source, s.Worker, res.Op, res.Task)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
