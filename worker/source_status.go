package worker

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
)

// TaskError is a control-plane error about a task whose etcd keys cannot be
// acted on (a stage without config, a malformed value, an invalid config).
// Errors of a subtask that exists locally are also listed in its own
// "errors"; these entries additionally cover tasks that do not run.
type TaskError struct {
	Task string `json:"task"`
	errs.Error
}

// SourceStatus is the source worker's part of the worker status
// (DESIGN.md §6): relay, subtasks, and task errors.
type SourceStatus struct {
	Source   string          `json:"source"`
	Relay    RelayStatus     `json:"relay"`
	SubTasks []SubTaskStatus `json:"subtasks"`
	Errors   []TaskError     `json:"errors"`
}

// Status is a snapshot of the source worker; subtasks sorted by name.
func (w *SourceWorker) Status() SourceStatus {
	w.mu.Lock()
	tasks := make([]*SubTask, 0, len(w.subTasks))
	for _, ts := range w.subTasks {
		tasks = append(tasks, ts.st)
	}
	taskErrs := make(map[string]errs.Error, len(w.taskErrs))
	for k, v := range w.taskErrs {
		taskErrs[k] = v
	}
	taskWarns := maps.Clone(w.taskWarns)
	relayEnabled, relay, relayErr, relayWarn := w.relayWatches != nil, w.relay, w.relayErr, w.relayWarn
	w.mu.Unlock()

	out := SourceStatus{Source: w.source, SubTasks: make([]SubTaskStatus, 0, len(tasks)), Errors: []TaskError{}}
	for _, st := range tasks {
		s := st.Status()
		if e, ok := taskErrs[s.Name]; ok {
			s.Errors = append(s.Errors, e)
		}
		out.SubTasks = append(out.SubTasks, s)
	}
	slices.SortFunc(out.SubTasks, func(a, b SubTaskStatus) int { return strings.Compare(a.Name, b.Name) })
	for name, e := range taskErrs {
		out.Errors = append(out.Errors, TaskError{Task: name, Error: e})
	}
	for name, e := range taskWarns {
		out.Errors = append(out.Errors, TaskError{Task: name, Error: e})
	}
	if relayEnabled && relayWarn != nil {
		out.Errors = append(out.Errors, TaskError{Error: *relayWarn})
	}
	badKeys, seen := w.badKeys.list()
	for _, key := range badKeys {
		name := key[strings.LastIndexByte(key, '/')+1:]
		out.Errors = append(out.Errors, TaskError{Task: name, Error: errs.Error{
			Code: CodeInvalidTaskName, Resumable: false, Time: seen[key],
			Message: fmt.Sprintf("etcd key %s: %v; delete the key and use a valid task name", key, config.ValidateName("task", name)),
		}})
	}
	slices.SortFunc(out.Errors, func(a, b TaskError) int { return strings.Compare(a.Task, b.Task) })

	switch {
	case !relayEnabled:
		out.Relay = RelayStatus{Enabled: false}
	case relay != nil:
		out.Relay = relay.Status()
		out.Relay.Enabled = true
	default:
		out.Relay = RelayStatus{Enabled: true, Stage: "Stopped", Errors: []errs.Error{}}
	}
	if relayErr != nil {
		out.Relay.Errors = append(out.Relay.Errors, *relayErr)
	}
	return out
}
