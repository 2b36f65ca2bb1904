package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/unit"
)

// Errors of the lifecycle methods of everything the worker runs through
// stages (subtasks, the relay). They are returned wrapped with the
// operation, the object's name and its stage.
var (
	ErrNotNew           = errors.New("already started")
	ErrNotRunning       = errors.New("not running")
	ErrNotPaused        = errors.New("not paused")
	ErrClosed           = errors.New("closed")
	ErrNotAutoResumable = errors.New("not auto-resumable: paused explicitly or by a non-resumable error")
)

// lifecycle is the stage machine shared by SubTask and FileRelay (DESIGN.md
// §5): the stage, the errors of the last failed run, and whether the master
// paused it explicitly (then the auto-resume checker leaves it alone).
// Every transition is a compare-and-swap under one lock, so two goroutines
// (an operator's command and the work failing by itself) cannot both move
// the stage. Its lock is a leaf: no method calls out while holding it.
//
// Stages: New → Running on start; Running/Resuming/Pausing → Pausing on an
// explicit pause, → Paused when the work has stopped (settle) or failed
// (fail); Paused → Resuming on resume → Running once the work runs again;
// Running → Finished when the work is done; anything → Stopping → Stopped
// on close.
type lifecycle struct {
	what string // the object in errors, e.g. `subtask "t1"`
	// resumeWork restarts the holder's work after a pause, under ops: the
	// holder's part of Resume and AutoResume.
	resumeWork func(ctx context.Context, auto bool) error

	// ops serialises the holder's lifecycle methods (start, pause, resume,
	// update, close); the work's own goroutines never take it.
	ops sync.Mutex

	mu sync.Mutex
	// guarded by mu:
	stage    stage.Stage
	result   *unit.Result // last failed run; nil when it has not failed since it last (re)started
	explicit bool         // paused by an explicit pause and not resumed since
}

// newLifecycle returns a New lifecycle of the object what whose work is
// restarted by resume.
func newLifecycle(what string, resume func(ctx context.Context, auto bool) error) lifecycle {
	return lifecycle{what: what, resumeWork: resume, stage: stage.New}
}

// Resume resumes paused work explicitly (the master's Running): it clears
// the explicit-pause mark and the errors, and the work continues where it
// stopped. Other stages give ErrNotPaused.
func (l *lifecycle) Resume(ctx context.Context) error {
	l.ops.Lock()
	defer l.ops.Unlock()
	return l.resumeWork(ctx, false)
}

// AutoResume is Resume for the auto-resume checker: it resumes only work
// paused by errors that are all resumable and not paused explicitly;
// otherwise it returns ErrNotAutoResumable.
func (l *lifecycle) AutoResume(ctx context.Context) error {
	l.ops.Lock()
	defer l.ops.Unlock()
	return l.resumeWork(ctx, true)
}

// Stage is the current stage.
func (l *lifecycle) Stage() stage.Stage {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stage
}

// Result returns a copy of the last failed run, or nil.
func (l *lifecycle) Result() *unit.Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.result.Clone()
}

// ExplicitlyPaused reports whether it was paused explicitly and not
// resumed since, so the auto-resume checker must leave it alone.
func (l *lifecycle) ExplicitlyPaused() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.explicit
}

// snapshot returns the stage and the errors of the last failed run ([] when
// none), for status.
func (l *lifecycle) snapshot() (stage.Stage, []errs.Error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []errs.Error{}
	if l.result != nil {
		out = append(out, l.result.Errors...)
	}
	return l.stage, out
}

// start moves New to Running.
func (l *lifecycle) start() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stage != stage.New {
		return fmt.Errorf("%w: start %s in stage %s", ErrNotNew, l.what, l.stage)
	}
	l.stage = stage.Running
	return nil
}

// pause marks an explicit pause. Work that runs (Running, Resuming,
// Pausing) becomes Pausing and stop is true: the caller stops the work,
// which then settles to Paused. New and Paused become Paused at once.
// Other stages give ErrNotRunning.
func (l *lifecycle) pause() (stop bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.stage {
	case stage.Running, stage.Resuming, stage.Pausing:
		l.stage, l.explicit = stage.Pausing, true
		return true, nil
	case stage.New, stage.Paused:
		l.stage, l.explicit = stage.Paused, true
		return false, nil
	default:
		return false, fmt.Errorf("%w: pause %s in stage %s", ErrNotRunning, l.what, l.stage)
	}
}

// beginResume moves Paused to Resuming, clearing the errors and the
// explicit mark, and returns the cleared result (for logging). With auto
// (the checker) it refuses an explicit pause or a non-resumable error with
// ErrNotAutoResumable; other stages give ErrNotPaused.
func (l *lifecycle) beginResume(auto bool) (*unit.Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stage != stage.Paused {
		return nil, fmt.Errorf("%w: resume %s in stage %s", ErrNotPaused, l.what, l.stage)
	}
	if auto && (l.explicit || !l.result.Resumable()) {
		return nil, fmt.Errorf("%w: %s", ErrNotAutoResumable, l.what)
	}
	prev := l.result
	l.stage, l.explicit, l.result = stage.Resuming, false, nil
	return prev, nil
}

// running moves Resuming to Running once the work runs again, and reports
// whether the stage is Running (false: paused or stopped before it began).
func (l *lifecycle) running() bool { return l.move(stage.Resuming, stage.Running) == stage.Running }

// move moves the stage from from to to when it is from, and returns the
// stage after.
func (l *lifecycle) move(from, to stage.Stage) stage.Stage {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stage == from {
		l.stage = to
	}
	return l.stage
}

// fail records a failed run; live work (Running, Resuming, Pausing) becomes
// Paused. Work being stopped stays Stopping: the closer finishes it. It
// returns the stages before and after, for logging.
func (l *lifecycle) fail(entries []errs.Error) (from, to stage.Stage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	from = l.stage
	l.result = &unit.Result{Errors: entries}
	if from == stage.Running || from == stage.Resuming || from == stage.Pausing {
		l.stage = stage.Paused
	}
	return from, l.stage
}

// settle ends work that stopped because it was cancelled: it becomes
// Paused unless it is being stopped (then the closer finishes it).
func (l *lifecycle) settle() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stage != stage.Stopping && l.stage != stage.Stopped {
		l.stage = stage.Paused
	}
}

// stopping reports whether the work is being stopped or has stopped.
func (l *lifecycle) stopping() bool {
	s := l.Stage()
	return s == stage.Stopping || s == stage.Stopped
}

// finish moves work that completed to Finished, unless it is being stopped;
// it reports whether it did.
func (l *lifecycle) finish() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stage == stage.Stopping || l.stage == stage.Stopped {
		return false
	}
	l.stage = stage.Finished
	return true
}

// handOver is called between two steps of the work (units of a pipeline):
// a pause asked for meanwhile takes effect (Pausing → Paused), and it
// reports whether the work goes on (still Running).
func (l *lifecycle) handOver() bool { return l.move(stage.Pausing, stage.Paused) == stage.Running }

// beginStop moves any stage but Stopped to Stopping; false when already
// Stopped.
func (l *lifecycle) beginStop() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stage == stage.Stopped {
		return false
	}
	l.stage = stage.Stopping
	return true
}

// stopped moves Stopping to Stopped.
func (l *lifecycle) stopped() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stage = stage.Stopped
}
