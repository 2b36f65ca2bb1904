package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// workerStatus is the part of a worker's status document (DESIGN.md §6,
// the value of P/status/{worker}) that dmctl reads. Subtask and error
// objects stay raw so that they are printed as the worker wrote them.
type workerStatus struct {
	Worker   string            `json:"worker"`
	Source   string            `json:"source"`
	SubTasks []json.RawMessage `json:"subtasks"`
	Errors   []json.RawMessage `json:"errors"`
}

// subTaskStatus is the part of a subtask object the text output shows.
type subTaskStatus struct {
	Name     string          `json:"name"`
	Stage    string          `json:"stage"`
	Unit     string          `json:"unit"`
	Errors   []statusError   `json:"errors"`
	Progress json.RawMessage `json:"progress"`
}

// statusError is an error entry of a status document.
type statusError struct {
	Task      string `json:"task,omitempty"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	Resumable bool   `json:"resumable"`
}

// taskStatusJSON is the --output json document of "task status".
type taskStatusJSON struct {
	Task    string             `json:"task"`
	Sources []sourceTaskStatus `json:"sources"`
}

// sourceTaskStatus is a task's status on one source.
type sourceTaskStatus struct {
	Source string `json:"source"`
	// Worker is the worker bound to the source ("" when none).
	Worker string `json:"worker"`
	// Expect is the expected stage in etcd ("" when the stage key is
	// missing).
	Expect string `json:"expect"`
	// Subtask is the worker's subtask object, null when the worker does
	// not report the task (not bound, not alive, not started yet).
	Subtask json.RawMessage `json:"subtask"`
	// Errors are the worker's top-level errors about this task.
	Errors []json.RawMessage `json:"errors"`
}

// statusUnreadable is the code of the error dmctl reports in place of a
// status value it cannot decode.
const statusUnreadable = "status-unreadable"

func taskStatus(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, st, err := e.connect(ctx, cmd, args, "task")
	if err != nil {
		return err
	}
	task := pos[0]
	sources, err := tasks.sources(ctx, st, task)
	if err != nil {
		return err
	}
	c, err := readCluster(ctx, st)
	if err != nil {
		return err
	}
	raw, _, err := st.GetStatuses(ctx)
	if err != nil {
		return fmt.Errorf("read worker statuses: %w", err)
	}
	statuses := make(map[string]*workerStatus, len(raw))
	bad := make(map[string]error)
	for w, v := range raw {
		var ws workerStatus
		if err := json.Unmarshal(v, &ws); err != nil {
			bad[w] = err
			continue
		}
		statuses[w] = &ws
	}

	doc := taskStatusJSON{Task: task, Sources: make([]sourceTaskStatus, 0, len(sources))}
	for _, s := range sources {
		item, _, err := st.GetSubTask(ctx, s, task)
		if err != nil {
			return fmt.Errorf("read task %s of source %s: %w", task, s, err)
		}
		sts := sourceTaskStatus{Source: s, Errors: []json.RawMessage{}}
		if item != nil && item.Stage != nil {
			sts.Expect = string(item.Stage.Expect)
		}
		sts.Worker = statusWorker(c.boundWorkers(s), s, statuses)
		if live, err := e.liveStatus(ctx, c.infos[sts.Worker].Addr); err == nil {
			statuses[sts.Worker] = live
			delete(bad, sts.Worker)
		}
		if err := bad[sts.Worker]; err != nil {
			entry, merr := json.Marshal(statusError{Task: task, Code: statusUnreadable,
				Message: fmt.Sprintf("status of worker %s is not valid JSON: %v", sts.Worker, err)})
			if merr != nil {
				return fmt.Errorf("encode status error: %w", merr)
			}
			sts.Errors = append(sts.Errors, entry)
		}
		if ws := statuses[sts.Worker]; ws != nil {
			if err := pickTask(ws, task, &sts); err != nil {
				return fmt.Errorf("status of worker %s: %w", sts.Worker, err)
			}
		}
		doc.Sources = append(doc.Sources, sts)
	}
	return e.emit(doc, func(out io.Writer) error { return printTaskStatus(out, &doc) })
}

// liveStatus asks a worker for its status over HTTP (GET /api/v1/status),
// which is fresher than the copy it publishes in etcd every few seconds.
// Any failure (no address, worker down) returns an error and the caller
// keeps the etcd copy.
func (e *env) liveStatus(ctx context.Context, addr string) (*workerStatus, error) {
	if addr == "" {
		return nil, errors.New("worker has no status address")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	client, scheme := e.workerHTTP()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+"/api/v1/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	var ws workerStatus
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&ws); err != nil {
		return nil, err
	}
	return &ws, nil
}

// statusWorker picks the worker whose status describes source: the bound
// worker, or, when the source is unbound, a worker still reporting it.
func statusWorker(bound []string, source string, statuses map[string]*workerStatus) string {
	if len(bound) > 0 {
		return bound[0]
	}
	for _, w := range slices.Sorted(maps.Keys(statuses)) {
		if statuses[w].Source == source {
			return w
		}
	}
	return ""
}

// pickTask copies task's subtask object and top-level errors from ws into
// sts.
func pickTask(ws *workerStatus, task string, sts *sourceTaskStatus) error {
	for _, raw := range ws.SubTasks {
		var s struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("decode subtask entry: %w", err)
		}
		if s.Name == task {
			sts.Subtask = raw
			break
		}
	}
	for _, raw := range ws.Errors {
		var e statusError
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("decode error entry: %w", err)
		}
		if e.Task == task {
			sts.Errors = append(sts.Errors, raw)
		}
	}
	return nil
}

// printTaskStatus writes the text form of a task status.
func printTaskStatus(w io.Writer, doc *taskStatusJSON) error {
	var b strings.Builder
	fmt.Fprintf(&b, "task %s\n", doc.Task)
	for _, s := range doc.Sources {
		fmt.Fprintf(&b, "source %s  worker %s  expect %s", s.Source, dash(s.Worker), dash(s.Expect))
		var errs []statusError
		if s.Subtask == nil {
			if s.Worker == "" {
				b.WriteString("  (source not bound to a worker)\n")
			} else {
				fmt.Fprintf(&b, "  (worker %s reports no subtask %s)\n", s.Worker, doc.Task)
			}
		} else {
			var sub subTaskStatus
			if err := json.Unmarshal(s.Subtask, &sub); err != nil {
				return fmt.Errorf("decode subtask status of source %s: %w", s.Source, err)
			}
			fmt.Fprintf(&b, "  stage %s  unit %s\n", dash(sub.Stage), dash(sub.Unit))
			if len(sub.Progress) > 0 && string(sub.Progress) != "null" {
				fmt.Fprintf(&b, "  progress: %s\n", compactJSON(sub.Progress))
			}
			errs = append(errs, sub.Errors...)
		}
		for _, raw := range s.Errors {
			var e statusError
			if err := json.Unmarshal(raw, &e); err != nil {
				return fmt.Errorf("decode error entry of source %s: %w", s.Source, err)
			}
			errs = append(errs, e)
		}
		for _, e := range errs {
			resumable := ""
			if e.Resumable {
				resumable = " (resumable)"
			}
			fmt.Fprintf(&b, "  error [%s] %s%s\n", e.Code, e.Message, resumable)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// compactJSON returns raw on one line.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// dash returns s, or "-" when s is empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
