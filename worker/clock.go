package worker

import "time"

// Clock tells the time: of errors in status, of first-seen bad keys, of the
// auto-resume checker's decisions. Tests pass one they move by hand.
type Clock interface{ Now() time.Time }

// RealClock is the wall clock.
type RealClock struct{}

// Now is time.Now.
func (RealClock) Now() time.Time { return time.Now() }
