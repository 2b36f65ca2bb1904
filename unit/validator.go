package unit

import (
	"context"

	"github.com/dmworker/dm-worker/pkg/stage"
)

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
}

// ValidationErrorCounts counts validation errors by state.
type ValidationErrorCounts struct {
	New      int64 `json:"new"`
	Ignored  int64 `json:"ignored"`
	Resolved int64 `json:"resolved"`
}
