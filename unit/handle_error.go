package unit

import "context"

// HandleErrorRequest is the body of POST /api/v1/subtasks/{task}/handle-error:
// skip the event the unit is stuck on, or replace it with SQLs. BinlogPos
// ("file:pos"), when set, names the event; otherwise the current error's.
type HandleErrorRequest struct {
	Op        string   `json:"op"`
	BinlogPos string   `json:"binlog-pos,omitempty"`
	SQLs      []string `json:"sqls,omitempty"`
}

// Operations of HandleErrorRequest.
const (
	HandleErrorSkip    = "skip"
	HandleErrorReplace = "replace"
)

// ErrorHandler is implemented by units that can skip or replace the binlog
// event they are stuck on (the sync unit).
type ErrorHandler interface {
	HandleError(ctx context.Context, req HandleErrorRequest) error
}
