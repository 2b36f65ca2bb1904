package worker

import (
	"context"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/stage"
)

// stagedWork is local work an expected stage in etcd drives: a subtask or
// a stream task.
type stagedWork interface {
	Stage() stage.Stage
	ExplicitlyPaused() bool
	Resume(ctx context.Context) error
	Pause(ctx context.Context) error
}

// driveStage moves w toward the expected stage want (DESIGN.md §5) and
// reports whether want is a new command. A stage value with a revision
// other than lastRev is an operator's command and is always carried out
// (Running resumes even work an error paused); under an unchanged revision
// only drift is corrected, so that work paused by an error is left to the
// auto-resume checker. begin starts New work; beforeResume, when set, is
// told whether a resume about to happen is a new command.
func driveStage(ctx context.Context, w stagedWork, want *ha.Stage, lastRev int64,
	begin func(context.Context) error, beforeResume func(newCommand bool), log *zap.Logger) bool {
	newCommand := want.Revision != lastRev
	cur := w.Stage()
	switch want.Expect {
	case stage.Running:
		switch {
		case cur == stage.New:
			if err := begin(ctx); err != nil {
				log.Warn("start failed", zap.Error(err))
			}
		case cur == stage.Paused && (newCommand || w.ExplicitlyPaused()):
			if beforeResume != nil {
				beforeResume(newCommand)
			}
			if err := w.Resume(ctx); err != nil {
				log.Warn("resume failed", zap.Error(err))
			}
		}
	case stage.Paused, stage.Stopped:
		// Work paused by an error is paused again explicitly, so the
		// auto-resume checker leaves it alone as the master wants.
		if cur == stage.Running || cur == stage.New || cur == stage.Resuming ||
			(cur == stage.Paused && !w.ExplicitlyPaused()) {
			if err := w.Pause(ctx); err != nil {
				log.Warn("pause failed", zap.Error(err))
			}
		}
	}
	return newCommand
}
