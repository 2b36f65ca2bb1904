//go:build race

package worker

// raceEnabled is true when the race detector is on; timing-bound tests
// (scale) then skip, and `make test-unit` runs them once more without it.
const raceEnabled = true
