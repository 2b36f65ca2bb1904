package ha

import (
	"slices"
	"strings"

	"github.com/dmworker/dm-worker/pkg/stage"
)

// Stage is the expected stage of a relay, subtask, validator or stream task
// as written by the master (DESIGN.md §3).
type Stage struct {
	Expect stage.Stage `json:"expect"`
	Source string      `json:"source"`
	// Task is the subtask or stream name; empty for relay.
	Task string `json:"task,omitempty"`
	// IgnoreUntreated, on a stream stage, makes a resume start from the
	// binlog position current at resume time instead of the checkpoint.
	IgnoreUntreated bool `json:"ignore-untreated,omitempty"`

	// IsDeleted is set for a delete event; Source and Task then come from
	// the key.
	IsDeleted bool `json:"-"`
	// Revision is the etcd ModRevision of the value (or of the delete).
	Revision int64 `json:"-"`
	// Unknown lists, joined by unknownSep, the paths of fields of the value
	// the worker does not know (not used; to be reported, never dropped
	// silently); "" when none. A string keeps Stage comparable; read it with
	// UnknownFields.
	Unknown string `json:"-"`
}

// unknownSep joins the paths in Stage.Unknown.
const unknownSep = ", "

// UnknownFields returns the paths of Unknown, nil when there are none.
func (s Stage) UnknownFields() []string {
	if s.Unknown == "" {
		return nil
	}
	return strings.Split(s.Unknown, unknownSep)
}

// WorkerInfo is the value of P/worker/info/{worker}.
type WorkerInfo struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
}

// KeepaliveInfo is the value of P/worker/keepalive/{worker}.
type KeepaliveInfo struct {
	Name     string `json:"name"`
	JoinTime string `json:"join-time"`
}

// Bound is the value of P/source/bound/{worker} and of
// P/source/relay/{worker}.
type Bound struct {
	Source string `json:"source"`
	Worker string `json:"worker"`

	IsDeleted bool  `json:"-"`
	Revision  int64 `json:"-"`
}

// WorkersOf returns the workers whose binding in bounds (bound or
// relay-bound keys, by worker) names source, sorted.
func WorkersOf(bounds map[string]Bound, source string) []string {
	var out []string
	for w, b := range bounds {
		if b.Source == source {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}
