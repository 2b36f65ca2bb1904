// Package stage defines the lifecycle stages shared by subtasks, relay,
// validators and stream tasks, and which of them a master may ask for.
//
// It owns only the vocabulary; the state machines that move between stages
// live with the things they describe (worker/, stream/).
package stage

import "fmt"

// Stage is the lifecycle stage of a unit of work, as shown in status and
// written (for the expected subset) into etcd.
type Stage string

// Stages. Running, Paused and Stopped are the ones a master may expect; the
// others are reported by the worker.
const (
	New      Stage = "New"
	Running  Stage = "Running"
	Paused   Stage = "Paused"
	Stopped  Stage = "Stopped"
	Finished Stage = "Finished"
	Pausing  Stage = "Pausing"
	Resuming Stage = "Resuming"
	Stopping Stage = "Stopping"
)

var all = []Stage{New, Running, Paused, Stopped, Finished, Pausing, Resuming, Stopping}

// All returns every stage, in lifecycle order.
func All() []Stage { return append([]Stage(nil), all...) }

// ExpectedStages lists the stages a master may write into etcd.
var ExpectedStages = []Stage{Running, Paused, Stopped}

// Valid reports whether s is any known stage.
func (s Stage) Valid() bool {
	for _, x := range all {
		if s == x {
			return true
		}
	}
	return false
}

// IsExpectable reports whether s may be written as an expected stage.
func (s Stage) IsExpectable() bool {
	return s == Running || s == Paused || s == Stopped
}

// ParseExpected checks that s is an expected stage (Running, Paused or
// Stopped) and returns it, or an error naming what is allowed.
func ParseExpected(s string) (Stage, error) {
	st := Stage(s)
	if !st.IsExpectable() {
		return "", fmt.Errorf("stage: %q is not an expected stage; use Running, Paused or Stopped", s)
	}
	return st, nil
}
