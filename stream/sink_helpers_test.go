package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// sinkTestEvents returns n row events of table shop.orders, IDs from first.
func sinkTestEvents(first, n int) []Event {
	out := make([]Event, n)
	for i := range out {
		id := first + i
		out[i] = Event{
			ID:    fmt.Sprintf("s1:mariadb-bin.000001:%d:0", 1000+id),
			Key:   fmt.Appendf(nil, `{"id":%d}`, id),
			Value: fmt.Appendf(nil, `{"before":null,"after":{"id":%d,"note":"row %d"},"op":"c"}`, id, id),
			DB:    "shop", Table: "orders", Op: "c",
		}
	}
	return out
}

// sinkRecord is one {"key","value"} object as a sink carries it.
type sinkRecord struct {
	Key   json.RawMessage `json:"key"`
	Value json.RawMessage `json:"value"`
}

// checkSinkLeaks makes t fail when goroutines started during the test
// outlive it (its Cleanup runs last: call it first).
func checkSinkLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		testutil.Eventually(t, 5*time.Second, "no goroutine of the test outlives it", func() error { return goleak.Find(ignore) })
	})
}

// pendingWrite is a sink Write running in the background while its sink
// is down.
type pendingWrite struct {
	done chan error
}

// startWrite runs s.Write(batch) in the background with a 60 s deadline
// and checks that it keeps retrying (does not return) for d: the sink is
// down.
func startWrite(t *testing.T, s Sink, batch []Event, d time.Duration) *pendingWrite {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	w := &pendingWrite{done: make(chan error, 1)}
	go func() { w.done <- s.Write(ctx, batch) }()
	testutil.Consistently(t, d, "Write keeps retrying while the sink is down", func() error {
		select {
		case err := <-w.done:
			return fmt.Errorf("Write returned %v with the sink down", err)
		default:
			return nil
		}
	})
	return w
}

// succeeds waits for the Write to return nil (the sink is back).
func (w *pendingWrite) succeeds(t *testing.T) {
	t.Helper()
	select {
	case err := <-w.done:
		if err != nil {
			t.Fatalf("Write after the sink came back: %v", err)
		}
	case <-time.After(50 * time.Second):
		t.Fatal("Write did not return within 50s of the sink's return")
	}
}
