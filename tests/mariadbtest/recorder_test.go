package mariadbtest

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// endRecorder is a testing.TB whose Fatal and Skip record the message and end only the
// goroutine started by run, so a test can check how a helper ends the test it is given.
// Everything else (Cleanup, Logf, Context, ...) goes to the real test.
type endRecorder struct {
	testing.TB

	mu    sync.Mutex
	fatal string // guarded by mu
	skip  string // guarded by mu
}

func (r *endRecorder) Helper() {}

func (r *endRecorder) Fatal(args ...any) { r.end(&r.fatal, fmt.Sprint(args...)) }

func (r *endRecorder) Fatalf(format string, args ...any) {
	r.end(&r.fatal, fmt.Sprintf(format, args...))
}

func (r *endRecorder) Skipf(format string, args ...any) { r.end(&r.skip, fmt.Sprintf(format, args...)) }

func (r *endRecorder) end(field *string, msg string) {
	r.mu.Lock()
	*field = msg
	r.mu.Unlock()
	runtime.Goexit()
}

// run calls f on a goroutine of its own and waits for it to return or to end the "test".
func (r *endRecorder) run(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

// messages returns the recorded fatal and skip messages.
func (r *endRecorder) messages() (fatal, skip string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal, r.skip
}
