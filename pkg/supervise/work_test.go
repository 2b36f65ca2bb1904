package supervise

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// One run at a time: a Stop that times out keeps the run's done, so Start
// refuses (ErrRunning) until the run returns, then starts the next.
func TestWorkOneRunAtATime(t *testing.T) {
	release := make(chan struct{})
	w := NewWork(nil)
	if err := w.Start(t.Context(), func(context.Context) { <-release }); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := w.Stop(short, "stuck"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop of a run ignoring its ctx: %v, want the deadline", err)
	}
	short2, cancel2 := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel2()
	if err := w.Start(short2, func(context.Context) {}); !errors.Is(err, ErrRunning) {
		t.Fatalf("Start while the old run is inside: %v, want ErrRunning", err)
	}
	close(release)
	ran := make(chan struct{})
	if err := w.Start(t.Context(), func(context.Context) { close(ran) }); err != nil {
		t.Fatal(err)
	}
	<-ran
	if err := w.Wait(t.Context()); err != nil {
		t.Fatalf("Wait after the run returned: %v", err)
	}
}

// A run ends when the owner's life does, whatever context started it.
func TestWorkEndsWithLife(t *testing.T) {
	life, end := context.WithCancel(context.Background())
	w := NewWork(life)
	if err := w.Start(context.Background(), func(ctx context.Context) { <-ctx.Done() }); err != nil {
		t.Fatal(err)
	}
	end()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := w.Wait(ctx); err != nil {
		t.Fatalf("the run outlived its owner's life: %v", err)
	}
}
