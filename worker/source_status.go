package worker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
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
	Streams  []StreamStatus  `json:"streams"`
	Errors   []TaskError     `json:"errors"`
}

// Status is a snapshot of the source worker; subtasks sorted by name.
func (w *SourceWorker) Status() SourceStatus {
	tasks := w.subTasks.list()
	taskErrs, taskWarns := w.subTasks.recorded()
	relayEnabled := w.enabled(&w.relayWatches)
	relay, relayErr, relayWarn := w.relay.recorded()

	out := SourceStatus{Source: w.source, SubTasks: make([]SubTaskStatus, 0, len(tasks)), Streams: []StreamStatus{}, Errors: []TaskError{}}
	for _, st := range tasks {
		s := st.Status()
		if e, ok := taskErrs[s.Name]; ok {
			s.Errors = append(s.Errors, e)
		}
		out.SubTasks = append(out.SubTasks, s)
	}
	slices.SortFunc(out.SubTasks, func(a, b SubTaskStatus) int { return strings.Compare(a.Name, b.Name) })
	for _, m := range []map[string]errs.Error{taskErrs, taskWarns} {
		for name, e := range m {
			out.Errors = append(out.Errors, TaskError{Task: name, Error: e})
		}
	}
	if relayEnabled && relayWarn != nil {
		out.Errors = append(out.Errors, TaskError{Error: *relayWarn})
	}
	out.Errors = append(out.Errors, badKeyErrors(w.subTasks.bad, "task", CodeSubTaskNameInvalid)...)
	if w.streams != nil {
		streams, streamErrs := w.streams.status()
		out.Streams = streams
		out.Errors = append(out.Errors, streamErrs...)
	}
	slices.SortFunc(out.Errors, func(a, b TaskError) int { return strings.Compare(a.Task, b.Task) })
	out.Relay = relayStatus(relayEnabled, relay, relayErr)
	return out
}

// relayStatus is the relay object of the status: only "enabled" when relay
// is off, Stopped while no holder exists (being created, or creation
// failed), and the holder's status otherwise; plus the control-plane error.
func relayStatus(enabled bool, h RelayHolder, ctlErr *errs.Error) RelayStatus {
	var st RelayStatus
	switch {
	case !enabled:
		st = RelayStatus{Enabled: false}
	case h != nil:
		st = h.Status()
		st.Enabled = true
	default:
		st = RelayStatus{Enabled: true, Stage: stage.Stopped, Errors: []errs.Error{}}
	}
	if ctlErr != nil {
		st.Errors = append(st.Errors, *ctlErr)
	}
	return st
}

// badKeyErrors are the status entries of the watched keys whose names are
// not valid names of kind ("task", "stream").
func badKeyErrors(bad *badKeys, kind, code string) []TaskError {
	keys, seen := bad.list()
	out := make([]TaskError, 0, len(keys))
	for _, key := range keys {
		name := key[strings.LastIndexByte(key, '/')+1:]
		out = append(out, TaskError{Task: name, Error: errs.Error{
			Code: code, Resumable: false, Time: seen[key],
			Message: fmt.Sprintf("etcd key %s: %v; delete the key and use a valid %s name", key, config.ValidateName(kind, name), kind),
		}})
	}
	return out
}
