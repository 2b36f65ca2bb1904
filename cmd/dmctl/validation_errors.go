package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/unit/validate/validmeta"
)

// validationError is one validation error as a worker lists it (DESIGN.md
// §6).
type validationError = validmeta.ErrorRecord

// validationErrorsJSON is the --output json document of "validation
// errors".
type validationErrorsJSON struct {
	Task    string                   `json:"task"`
	State   string                   `json:"state"`
	Sources []sourceValidationErrors `json:"sources"`
}

// sourceValidationErrors is what one source's worker listed, or why not.
type sourceValidationErrors struct {
	Source string            `json:"source"`
	Worker string            `json:"worker"`
	Errors []validationError `json:"errors"`
	Error  *outcomeError     `json:"error,omitempty"`
}

func validationErrors(ctx context.Context, e *env, cmd *command, args []string) error {
	fs := newFlags(cmd)
	state := fs.String("state", "new", "which errors: new, ignored, resolved or all")
	only := sourceFlag(fs, "list the errors of this source only")
	pos, err := positionalFlags(cmd, fs, args, "task")
	if err != nil {
		return err
	}
	switch *state {
	case "new", "ignored", "resolved", "all":
	default:
		return usagef(cmd, "--state %q: use new, ignored, resolved or all", *state)
	}
	task := pos[0]
	c, sources, err := e.validationSources(ctx, task, *only)
	if err != nil {
		return err
	}
	doc := validationErrorsJSON{Task: task, State: *state, Sources: make([]sourceValidationErrors, 0, len(sources))}
	var failed []string
	for _, s := range sources {
		out := sourceValidationErrors{Source: s, Errors: []validationError{}}
		err := e.listValidationErrors(ctx, c, task, *state, &out)
		if err != nil {
			failed = append(failed, s)
			out.Error = newOutcomeError(err)
		}
		doc.Sources = append(doc.Sources, out)
	}
	if err := e.emit(doc, func(w io.Writer) error { return printValidationErrors(w, &doc) }); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("could not list the validation errors of task %s on source(s) %s (see above)", task, strings.Join(failed, ", "))
	}
	return nil
}

// sourceFlag registers --source and its short form -s on fs.
func sourceFlag(fs *flag.FlagSet, usage string) *string {
	var s string
	fs.StringVar(&s, "source", "", usage)
	fs.StringVar(&s, "s", "", "short for --source")
	return &s
}

// validationSources reads the cluster and returns the sources of task to
// act on: only (which must hold the task) or every source with the task's
// config.
func (e *env) validationSources(ctx context.Context, task, only string) (*cluster, []string, error) {
	if only != "" {
		if err := config.ValidateName("source", only); err != nil {
			return nil, nil, err
		}
	}
	st, c, err := e.cluster(ctx)
	if err != nil {
		return nil, nil, err
	}
	sources, err := tasks.configSources(ctx, st, task)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case only == "":
		return c, sources, nil
	case slices.Contains(sources, only):
		return c, []string{only}, nil
	}
	return nil, nil, fmt.Errorf("task %s has no subtask on source %s (its sources: %s)", task, only, strings.Join(sources, ", "))
}

// listValidationErrors asks the worker bound to out.Source for the task's
// errors in state.
func (e *env) listValidationErrors(ctx context.Context, c *cluster, task, state string, out *sourceValidationErrors) error {
	worker, addr, err := c.sourceWorker(out.Source)
	out.Worker = worker
	if err != nil {
		return err
	}
	var body struct {
		Errors []validationError `json:"errors"`
	}
	path := "/api/v1/subtasks/" + url.PathEscape(task) + "/validation/errors?state=" + url.QueryEscape(state)
	if err := e.callWorker(ctx, http.MethodGet, worker, addr, path, nil, &body); err != nil {
		return err
	}
	if body.Errors != nil {
		out.Errors = body.Errors
	}
	return nil
}

// newOutcomeError is the outcomeError of err: the worker's code, or
// "dmctl" for a failure before or around the request.
func newOutcomeError(err error) *outcomeError {
	o := &outcomeError{Code: apiCode(err), Message: err.Error()}
	if o.Code == "" {
		o.Code = "dmctl"
	}
	return o
}

// printValidationErrors writes one table of every source's errors, then a
// line per source that failed.
func printValidationErrors(w io.Writer, doc *validationErrorsJSON) error {
	var rows [][]string
	for _, s := range doc.Sources {
		for _, v := range s.Errors {
			rows = append(rows, []string{strconv.FormatInt(v.ID, 10), s.Source, v.Table, v.Kind, v.State,
				v.Time.Local().Format(time.DateTime), compactJSON(v.Key)})
		}
	}
	if err := table(w, []string{"ID", "SOURCE", "TABLE", "KIND", "STATE", "TIME", "KEY"}, rows); err != nil {
		return err
	}
	for _, s := range doc.Sources {
		if s.Error != nil {
			fmt.Fprintf(w, "source %s: %s\n", s.Source, s.Error.Message)
		}
	}
	return nil
}

// validationErrorsRequest is the body of POST
// /api/v1/subtasks/{task}/validation/errors (DESIGN.md §6): an op with
// either an error id or all.
type validationErrorsRequest struct {
	Op  string `json:"op"`
	ID  *int64 `json:"id,omitempty"`
	All bool   `json:"all,omitempty"`
}

// validationOperateJSON is the --output json document of "validation
// ignore|resolve|clear".
type validationOperateJSON struct {
	Task    string             `json:"task"`
	Op      string             `json:"op"`
	ID      *int64             `json:"id,omitempty"`
	All     bool               `json:"all,omitempty"`
	Sources []validationOpDone `json:"sources"`
}

// validationOpDone is what happened on one source.
type validationOpDone struct {
	Source string `json:"source"`
	Worker string `json:"worker"`
	// Changed is how many errors changed, when the worker tells.
	Changed *int64        `json:"changed,omitempty"`
	Error   *outcomeError `json:"error,omitempty"`
}

// validationOperate returns the command that applies op to one
// validation error (ID; with several sources, --source names the one the
// ID belongs to) or to all of them (--all: on every source, or --source).
func validationOperate(op string) func(context.Context, *env, *command, []string) error {
	return func(ctx context.Context, e *env, cmd *command, args []string) error {
		fs := newFlags(cmd)
		all := fs.Bool("all", false, "every validation error of the task (of --source only when given)")
		only := sourceFlag(fs, "the source whose error ID is meant, or the only source for --all")
		pos, err := parseArgs(cmd, fs, args, "TASK", "ID")
		if err != nil && *all {
			pos, err = parseArgs(cmd, fs, args, "TASK")
		}
		if err != nil {
			return err
		}
		task := pos[0]
		if err := config.ValidateName("task", task); err != nil {
			return err
		}
		req := validationErrorsRequest{Op: op, All: *all}
		if !*all {
			id, err := strconv.ParseInt(pos[1], 10, 64)
			if err != nil || id <= 0 {
				return usagef(cmd, "error ID %q: give the positive ID shown by `dmctl validation errors %s`, or --all", pos[1], task)
			}
			req.ID = &id
		} else if len(pos) > 1 {
			return usagef(cmd, "give an error ID or --all, not both")
		}
		c, sources, err := e.validationSources(ctx, task, *only)
		if err != nil {
			return err
		}
		if req.ID != nil && len(sources) > 1 {
			return fmt.Errorf("task %s runs on sources %s and error IDs are per source: add --source S (the SOURCE column of `dmctl validation errors %s`)",
				task, strings.Join(sources, ", "), task)
		}
		return e.operateValidationErrors(ctx, c, task, sources, req)
	}
}

// operateValidationErrors posts req to the worker of each source, prints
// the outcome and fails when any source failed.
func (e *env) operateValidationErrors(ctx context.Context, c *cluster, task string, sources []string, req validationErrorsRequest) error {
	doc := validationOperateJSON{Task: task, Op: req.Op, ID: req.ID, All: req.All, Sources: make([]validationOpDone, 0, len(sources))}
	var failed []string
	for _, s := range sources {
		out := validationOpDone{Source: s}
		worker, addr, err := c.sourceWorker(s)
		out.Worker = worker
		if err == nil {
			var answer struct {
				Changed *int64 `json:"changed"`
			}
			err = e.postWorker(ctx, worker, addr, "/api/v1/subtasks/"+url.PathEscape(task)+"/validation/errors", req, &answer)
			out.Changed = answer.Changed
		}
		if err != nil {
			failed = append(failed, s)
			out.Error = newOutcomeError(err)
		}
		doc.Sources = append(doc.Sources, out)
	}
	if err := e.emit(doc, func(w io.Writer) error { return printValidationOperate(w, &doc) }); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("validation %s of task %s failed on source(s) %s (see above)", req.Op, task, strings.Join(failed, ", "))
	}
	return nil
}

// printValidationOperate writes one line per source.
func printValidationOperate(w io.Writer, doc *validationOperateJSON) error {
	what := "all validation errors"
	if doc.ID != nil {
		what = fmt.Sprintf("validation error %d", *doc.ID)
	}
	var b strings.Builder
	for _, s := range doc.Sources {
		switch {
		case s.Error != nil:
			fmt.Fprintf(&b, "task %s source %s: %s %s failed: %s\n", doc.Task, s.Source, doc.Op, what, s.Error.Message)
		case s.Changed != nil:
			fmt.Fprintf(&b, "task %s source %s (worker %s): %s %s: %d changed\n", doc.Task, s.Source, s.Worker, doc.Op, what, *s.Changed)
		default:
			fmt.Fprintf(&b, "task %s source %s (worker %s): %s %s: done\n", doc.Task, s.Source, s.Worker, doc.Op, what)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
