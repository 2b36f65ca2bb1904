package stream

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// TestRetryLoopReportsAndRecovers: every failed attempt is reported through
// the ctx's reporter (so a task shows a sink being retried in status) and
// a success clears it.
func TestRetryLoopReportsAndRecovers(t *testing.T) {
	var (
		mu      sync.Mutex
		reports []error
	)
	ctx := withRetryReport(context.Background(), func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, err)
	})
	n := 0
	err := retryLoop(ctx, zaptest.NewLogger(t), "publish", func(context.Context) error {
		if n++; n < 3 {
			return errors.New("connection refused")
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil || len(reports) != 3 || reports[0] == nil || !strings.Contains(reports[0].Error(), "connection refused") || reports[2] != nil {
		t.Fatalf("err %v, reports %v; want two failures reported, then nil", err, reports)
	}
}

// TestRetryLoopGivesUp: a sink that keeps failing makes Write return after
// its giveUpAfter, so the task pauses and goes through checking.
func TestRetryLoopGivesUp(t *testing.T) {
	pacing := defaultSinkRetry
	pacing.giveUpAfter = 300 * time.Millisecond
	start := time.Now()
	err := pacing.run(context.Background(), zaptest.NewLogger(t), "publish", func(context.Context) error {
		return errors.New("no responders")
	})
	if err == nil || !strings.Contains(err.Error(), "still failing") || !strings.Contains(err.Error(), "no responders") {
		t.Fatalf("err %v; want a give-up naming the last failure", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 10*time.Second {
		t.Fatalf("gave up after %s; want about 300ms plus one backoff", d)
	}
}
