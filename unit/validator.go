package unit

import (
	"context"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
)

// SyncSource tells a validator how far its subtask's sync unit has got.
// The subtask implements it; so does the sync unit while it runs.
type SyncSource interface {
	// SyncProgress returns the location before which every change is on
	// the target (applied) and the location the sync unit has read up to
	// (read >= applied; nothing after it can be on the target yet). ok is
	// false while no sync unit runs.
	SyncProgress() (applied, read binlog.Location, ok bool)
	// SyncBehind reports whether the sync unit is catching up (the binlog
	// it reads was written seconds ago): a validator then gives it the
	// CPU. False while no sync unit runs.
	SyncBehind() bool
}

// Validator is the continuous row comparison attached to a subtask.
type Validator interface {
	// Start starts the validator's own goroutines and returns once they
	// run. ctx bounds the start only: the goroutines run until Stop.
	Start(ctx context.Context) error
	// Stop stops the goroutines and waits for them.
	Stop()
	// Stage is Running or Stopped.
	Stage() stage.Stage
	// Status is the JSON-able summary shown in the subtask status.
	Status() ValidatorStatus
}

// ValidatorStatus is the "validator" object of a subtask's status
// (DESIGN.md §6).
type ValidatorStatus struct {
	Stage   stage.Stage           `json:"stage"`
	Pending int64                 `json:"pending"`
	Errors  ValidationErrorCounts `json:"errors"`
	// The rest is the validator's own progress; empty for a subtask that
	// never ran one.
	Mode string `json:"mode,omitempty"`
	// State is what a running validator does: "waiting-for-sync" (no sync
	// unit runs yet), "validating", "yielding" (to a sync unit that is
	// catching up), or "stopped".
	State string `json:"state,omitempty"`
	// RowsChecked counts row comparisons made on the target.
	RowsChecked int64 `json:"rows-checked"`
	// Checkpoint: every row change before it has been judged (saved in
	// the meta schema); Binlog: how far the validator has read.
	Checkpoint string `json:"checkpoint,omitempty"`
	Binlog     string `json:"binlog,omitempty"`
	// LagSeconds is how old the oldest row change still waiting to be
	// judged is (0 when nothing waits).
	LagSeconds float64 `json:"lag-seconds"`
	// SkippedTables lists tables the validator cannot check (no primary or
	// NOT NULL unique key).
	SkippedTables []string `json:"skipped-tables,omitempty"`
	// Error is the last error: a resumable one (target unreachable) while
	// the validator retries, or the one that stopped it (stage Stopped;
	// `dmctl validation stop` then `start` starts it again).
	Error *errs.Error `json:"error,omitempty"`
}

// ValidationErrorCounts counts validation errors by state.
type ValidationErrorCounts struct {
	New      int64 `json:"new"`
	Ignored  int64 `json:"ignored"`
	Resolved int64 `json:"resolved"`
}
