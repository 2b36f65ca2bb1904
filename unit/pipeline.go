package unit

import (
	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
)

// CodeTaskModeInvalid is the error code of a task mode that is not full,
// all or incremental.
const CodeTaskModeInvalid = "task-mode-invalid"

// modes lists the task modes in the order they are suggested to operators.
var modes = []string{config.ModeFull, config.ModeAll, config.ModeIncremental}

// Pipeline returns the unit types a task mode runs, in order: full = Dump,
// Load; all = Dump, Load, Sync; incremental = Sync. An unknown mode is a
// non-resumable error with code CodeTaskModeInvalid.
func Pipeline(mode string) ([]Type, error) {
	switch mode {
	case config.ModeFull:
		return []Type{TypeDump, TypeLoad}, nil
	case config.ModeAll:
		return []Type{TypeDump, TypeLoad, TypeSync}, nil
	case config.ModeIncremental:
		return []Type{TypeSync}, nil
	default:
		return nil, errs.New(CodeTaskModeInvalid, false,
			"unit: task-mode %q is unknown; use full, all or incremental", mode)
	}
}
