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
	"strconv"
	"strings"
	"time"

	"github.com/dmworker/dm-worker/ha"
)

// workerStatus is the part of a worker's status document (DESIGN.md §6,
// the value of P/status/{worker}) that dmctl reads. Subtask and error
// objects stay raw so that they are printed as the worker wrote them.
type workerStatus struct {
	Worker   string            `json:"worker"`
	Source   string            `json:"source"`
	SubTasks []json.RawMessage `json:"subtasks"`
	// Streams is nil when the status has no "streams" (a release without
	// stream tasks).
	Streams []json.RawMessage `json:"streams"`
	Errors  []json.RawMessage `json:"errors"`
}

// subTaskStatus is the part of a subtask object the text output shows.
type subTaskStatus struct {
	Name     string          `json:"name"`
	Stage    string          `json:"stage"`
	Unit     string          `json:"unit"`
	Errors   []statusError   `json:"errors"`
	Progress json.RawMessage `json:"progress"`
	ShardDDL *shardDDLStatus `json:"shard-ddl,omitempty"`
}

// shardDDLStatus is the "shard-ddl" object of a subtask of a sharding task.
type shardDDLStatus struct {
	Lock       string   `json:"lock"`
	State      string   `json:"state"`
	DDLs       []string `json:"ddls"`
	WaitingFor []struct {
		Source string `json:"source"`
		Table  string `json:"table"`
	} `json:"waiting-for"`
	Conflict string `json:"conflict"`
}

// line is the one-line summary of the lock in task status.
func (s *shardDDLStatus) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "shard-ddl: lock %s %s", s.Lock, s.State)
	if len(s.DDLs) > 0 {
		fmt.Fprintf(&b, "  ddls %s", strings.Join(s.DDLs, "; "))
	}
	if len(s.WaitingFor) > 0 {
		ms := make([]string, len(s.WaitingFor))
		for i, m := range s.WaitingFor {
			ms[i] = m.Source + " " + m.Table
		}
		fmt.Fprintf(&b, "  waiting for %s", strings.Join(ms, ", "))
	}
	if s.Conflict != "" {
		fmt.Fprintf(&b, "  conflict: %s", s.Conflict)
	}
	return b.String()
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
	var doc taskStatusJSON
	err := e.eachTaskSource(ctx, cmd, args, func(task string, ts taskSource) error {
		doc.Task = task
		sts := sourceTaskStatus{Source: ts.source, Worker: ts.worker, Errors: ts.errors}
		if ts.item != nil && ts.item.Stage != nil {
			sts.Expect = string(ts.item.Stage.Expect)
		}
		if ts.ws != nil {
			if err := pickTask(ts.ws, task, &sts); err != nil {
				return fmt.Errorf("status of worker %s: %w", sts.Worker, err)
			}
		}
		doc.Sources = append(doc.Sources, sts)
		return nil
	})
	if err != nil {
		return err
	}
	return e.emit(doc, func(out io.Writer) error { return printTaskStatus(out, &doc) })
}

// taskSource is what the status commands of a task read for one of its
// sources: the subtask's keys, the worker bound to the source and its
// published status (nil when none) with its top-level errors about the
// task.
type taskSource struct {
	source string
	item   *ha.SubTaskItem
	worker string
	ws     *workerStatus
	errors []json.RawMessage
}

// eachTaskSource reads the task named by args, its sources and every
// worker's status once, and calls fn for each source in order.
func (e *env) eachTaskSource(ctx context.Context, cmd *command, args []string, fn func(task string, ts taskSource) error) error {
	pos, st, err := e.connect(ctx, cmd, args, "task")
	if err != nil {
		return err
	}
	task := pos[0]
	sources, err := tasks.sources(ctx, st, task)
	if err != nil {
		return err
	}
	snap, err := readStatusSnapshot(ctx, st)
	if err != nil {
		return err
	}
	for _, s := range sources {
		ts := taskSource{source: s}
		if ts.item, _, err = st.GetSubTask(ctx, s, task); err != nil {
			return fmt.Errorf("read task %s of source %s: %w", task, s, err)
		}
		if ts.worker, ts.ws, ts.errors, err = snap.forSource(ctx, e, s, task); err != nil {
			return err
		}
		if err := fn(task, ts); err != nil {
			return err
		}
	}
	return nil
}

// statusSnapshot is one read of the cluster and of every worker's
// published status (P/status/{worker}), from which "task status" and
// "stream status" pick what they show for each source.
type statusSnapshot struct {
	c        *cluster
	statuses map[string]*workerStatus // decoded statuses, by worker
	bad      map[string]error         // why a worker's status does not decode, by worker
}

// readStatusSnapshot reads the cluster and every worker's status.
func readStatusSnapshot(ctx context.Context, st *ha.Store) (*statusSnapshot, error) {
	c, err := readCluster(ctx, st)
	if err != nil {
		return nil, err
	}
	raw, _, err := st.GetStatuses(ctx)
	if err != nil {
		return nil, fmt.Errorf("read worker statuses: %w", err)
	}
	snap := &statusSnapshot{c: c, statuses: make(map[string]*workerStatus, len(raw)), bad: make(map[string]error)}
	for w, v := range raw {
		var ws workerStatus
		if err := json.Unmarshal(v, &ws); err != nil {
			snap.bad[w] = err
			continue
		}
		snap.statuses[w] = &ws
	}
	return snap, nil
}

// forSource returns the worker whose status describes source ("" when
// none) and that status (nil when there is none), preferring the fresher
// one the worker serves over HTTP. errs holds a statusUnreadable entry
// naming name when the worker's published status does not decode; it is
// never nil.
func (s *statusSnapshot) forSource(ctx context.Context, e *env, source, name string) (worker string, ws *workerStatus, errs []json.RawMessage, err error) {
	errs = []json.RawMessage{}
	worker = statusWorker(s.c.boundWorkers(source), source, s.statuses)
	if live, err := e.liveStatus(ctx, s.c.infos[worker].Addr); err == nil {
		s.statuses[worker] = live
		delete(s.bad, worker)
	}
	if bad := s.bad[worker]; bad != nil {
		entry, err := json.Marshal(statusError{Task: name, Code: statusUnreadable,
			Message: fmt.Sprintf("status of worker %s is not valid JSON: %v", worker, bad)})
		if err != nil {
			return "", nil, nil, fmt.Errorf("encode status error: %w", err)
		}
		errs = append(errs, entry)
	}
	return worker, s.statuses[worker], errs, nil
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
	sub, err := findNamed(ws.SubTasks, task)
	if err != nil {
		return fmt.Errorf("decode subtask entry: %w", err)
	}
	sts.Subtask = sub
	errs, err := namedErrors(ws, task)
	if err != nil {
		return err
	}
	sts.Errors = append(sts.Errors, errs...)
	return nil
}

// findNamed returns the object of list whose "name" is name, or nil.
func findNamed(list []json.RawMessage, name string) (json.RawMessage, error) {
	for _, raw := range list {
		var o struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, err
		}
		if o.Name == name {
			return raw, nil
		}
	}
	return nil, nil
}

// namedErrors returns the top-level error entries of ws about the task or
// stream name.
func namedErrors(ws *workerStatus, name string) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for _, raw := range ws.Errors {
		var e statusError
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("decode error entry: %w", err)
		}
		if e.Task == name {
			out = append(out, raw)
		}
	}
	return out, nil
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
			if line := chunkProgress(sub.Progress); line != "" {
				fmt.Fprintf(&b, "  %s\n", line)
			}
			if sub.ShardDDL != nil {
				fmt.Fprintf(&b, "  %s\n", sub.ShardDDL.line())
			}
			if len(sub.Progress) > 0 && string(sub.Progress) != "null" {
				fmt.Fprintf(&b, "  progress: %s\n", compactJSON(sub.Progress))
			}
			errs = append(errs, sub.Errors...)
		}
		top, err := decodeErrors(s.Errors)
		if err != nil {
			return fmt.Errorf("source %s: %w", s.Source, err)
		}
		writeErrors(&b, append(errs, top...))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// decodeErrors decodes error entries of a status document.
func decodeErrors(raw []json.RawMessage) ([]statusError, error) {
	out := make([]statusError, 0, len(raw))
	for _, r := range raw {
		var e statusError
		if err := json.Unmarshal(r, &e); err != nil {
			return nil, fmt.Errorf("decode error entry: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

// writeErrors writes one indented line per error entry.
func writeErrors(b *strings.Builder, errs []statusError) {
	for _, e := range errs {
		resumable := ""
		if e.Resumable {
			resumable = " (resumable)"
		}
		fmt.Fprintf(b, "  error [%s] %s%s\n", e.Code, e.Message, resumable)
	}
}

// compactJSON returns raw on one line.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// chunkProgress is a one-line summary of a dump or load unit's progress
// ("chunks 16/21  rows 155000/205000  82554 rows/s  eta 1s"); "" for other
// progress objects.
func chunkProgress(raw json.RawMessage) string {
	var p struct {
		ChunksTotal *int     `json:"chunks-total"`
		ChunksDone  int      `json:"chunks-done"`
		Rows        int64    `json:"rows"`
		RowsTotal   int64    `json:"rows-total"`
		Rate        float64  `json:"rows-per-second"`
		ETA         *float64 `json:"eta-seconds"`
	}
	if json.Unmarshal(raw, &p) != nil || p.ChunksTotal == nil {
		return ""
	}
	total := "?"
	if *p.ChunksTotal > 0 {
		total = strconv.Itoa(*p.ChunksTotal)
	}
	line := fmt.Sprintf("chunks %d/%s  rows %d", p.ChunksDone, total, p.Rows)
	if p.RowsTotal > 0 {
		line += fmt.Sprintf("/%d", p.RowsTotal)
	}
	line += fmt.Sprintf("  %.0f rows/s", p.Rate)
	if p.ETA != nil {
		line += "  eta " + (time.Duration(*p.ETA) * time.Second).String()
	}
	return line
}

// dash returns s, or "-" when s is empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
