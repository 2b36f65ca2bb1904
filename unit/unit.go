// Package unit owns the contract between a subtask and the stages of its
// pipeline (dump, load, sync) and its validator: the Unit and Validator
// interfaces, which unit types a task mode runs, and the Registry that builds
// them. The units live in the subpackages unit/dump, unit/load and
// unit/syncer, the validator in unit/validate and the prechecks in
// unit/check; the binary registers them in the Registry it builds
// (worker.NewUnitFactory). This package must not import the units.
package unit

import (
	"context"
	"errors"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
	"go.uber.org/zap"
)

// Type names a kind of unit, as shown in status ("unit" field).
type Type string

// Unit types.
const (
	TypeDump     Type = "Dump"
	TypeLoad     Type = "Load"
	TypeSync     Type = "Sync"
	TypeValidate Type = "Validate"
)

// Result of one run of Process or Resume.
type Result struct {
	// IsCanceled is set when Process returned because its ctx was cancelled
	// (pause or close).
	IsCanceled bool
	// Errors is non-empty when the unit failed.
	Errors []errs.Error
}

// Failed reports whether the run ended with errors.
func (r *Result) Failed() bool { return r != nil && len(r.Errors) > 0 }

// Resumable reports whether the run failed and every error is resumable, so
// that an automatic retry may succeed.
func (r *Result) Resumable() bool {
	if !r.Failed() {
		return false
	}
	for _, e := range r.Errors {
		if !e.Resumable {
			return false
		}
	}
	return true
}

// Clone returns a deep copy of r (nil for nil).
func (r *Result) Clone() *Result {
	if r == nil {
		return nil
	}
	c := &Result{IsCanceled: r.IsCanceled}
	if r.Errors != nil {
		c.Errors = append([]errs.Error(nil), r.Errors...)
	}
	return c
}

// Unit is one stage of a subtask's pipeline (dump, load, sync).
//
// The subtask calls Init, IsFreshTask, Process, Pause, Resume, Update, Close
// and Kill from one goroutine at a time, never two of them concurrently.
// Status may be called at any time, concurrently with all of them, also
// before Init and after Close.
type Unit interface {
	Type() Type
	// Init prepares the unit (connections, checkpoints). The subtask calls
	// it once for every unit of its pipeline, in order, before IsFreshTask
	// and the first Process; it is called again only after it returned an
	// error.
	Init(ctx context.Context) error
	// Process runs until the unit's work is done (Result with no errors,
	// not canceled), it fails (Errors set) or ctx is cancelled
	// (IsCanceled). It must return promptly after ctx is cancelled.
	Process(ctx context.Context) Result
	// Pause is called after Process (or Resume) returned because of a
	// pause; the unit releases what it held for running but keeps what it
	// needs to resume.
	Pause()
	// Resume continues after Pause or after a failed run; same contract as
	// Process.
	Resume(ctx context.Context) Result
	// Update applies a new config while paused; ErrUpdateUnsupported
	// (possibly wrapped) means the caller must recreate the subtask.
	Update(ctx context.Context, cfg *config.SubTaskConfig) error
	// Close stops gracefully (flushes checkpoints). Kill stops at once
	// without flushing. Exactly one of them is called, once, for every unit
	// a factory created, whether or not Init was called or succeeded.
	Close()
	Kill()
	// Status is a JSON-able snapshot of progress (rows, bytes, binlog
	// location, lag...).
	Status() any
	// IsFreshTask reports whether the unit has no saved progress (so a
	// pipeline resumes at the first non-fresh unit).
	IsFreshTask(ctx context.Context) (bool, error)
}

// ErrUpdateUnsupported is returned (possibly wrapped) by Update when the new
// config cannot be applied in place.
var ErrUpdateUnsupported = errors.New("unit: update not supported; recreate the subtask")

// Outcome is the Result of a run of Process or Resume that returned err:
// canceled when ctx was cancelled (a pause or close, whatever err says),
// done when err is nil, else failed with err (logged with what, e.g. "sync
// unit").
func Outcome(ctx context.Context, err error, logger *zap.Logger, what string) Result {
	if ctx.Err() != nil {
		return Result{IsCanceled: true}
	}
	if err == nil {
		return Result{}
	}
	logger.Warn(what+" stopped with an error", zap.Error(err), zap.Bool("resumable", errs.IsResumable(err)))
	return Result{Errors: []errs.Error{errs.Entry(err, time.Now())}}
}

// ShardDDLStatus is the "shard-ddl" object of a subtask's status while a
// shard DDL lock involves it (DESIGN.md §6).
type ShardDDLStatus struct {
	Lock string `json:"lock"`
	// State is waiting, executing, skipped, re-syncing or conflict.
	State      string        `json:"state"`
	DDLs       []string      `json:"ddls"`
	WaitingFor []ShardMember `json:"waiting-for"`
	// Conflict says which tables reached which differing DDLs (state
	// conflict).
	Conflict string `json:"conflict,omitempty"`
}

// ShardMember is one upstream table of a sharding group.
type ShardMember struct {
	Source string `json:"source"`
	Table  string `json:"table"`
}

// ShardDDLReporter is implemented by units that take part in shard DDL
// locks; ShardDDL returns nil while no lock involves the unit. It is safe
// to call concurrently with Process.
type ShardDDLReporter interface {
	ShardDDL() *ShardDDLStatus
}
