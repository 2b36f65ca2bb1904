package worker

import "github.com/dmworker/dm-worker/unit"

// NewUnitFactory is the factory of the real data-plane units of this build.
// Task modes whose units are not in it are rejected with a clear error when
// a task is started (dmctl) or reconciled (worker).
func NewUnitFactory() *unit.Registry {
	return unit.NewRegistry(map[unit.Type]unit.Constructor{}, nil)
}
