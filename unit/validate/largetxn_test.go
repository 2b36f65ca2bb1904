package validate

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestValidatorLargeTransaction: inside one source transaction of ten
// times the validator's limit in rows, the unjudged rows stay at the limit
// (the reader waits until the sync unit has applied the whole transaction,
// then the judge drains it), and every row is judged equal in the end.
func TestValidatorLargeTransaction(t *testing.T) {
	const limit, rows = 1000, 10000
	e := vStart(t, "full", 2*time.Second)
	v, err := New(e.cfg, e.srcCfg, nil, e.sync, NewMetrics(prometheus.NewRegistry()), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	v.limit = limit
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Stop)

	var most atomic.Int64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if p := v.Status().Pending; p > most.Load() {
				most.Store(p)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	mariadbtest.MustExec(t, e.srcDB, fmt.Sprintf(
		"INSERT INTO app.t SELECT seq, CONCAT('r', seq), seq + 0.25, seq + 0.5 FROM app.seq_1_to_%d", rows))
	e.waitSynced(t)
	st := waitDrained(t, v, rows)
	close(done)
	<-sampled
	t.Logf("largest pending %d (limit %d), status %+v", most.Load(), limit, st)
	// The reader adds a whole rows event once the set has room: at most
	// one event's rows past the limit (about 280 of these rows fill the
	// 8 KiB of binlog_row_event_max_size).
	if m := most.Load(); m > limit+400 {
		t.Errorf("pending reached %d rows inside one transaction, limit %d", m, limit)
	} else if m < limit/2 {
		t.Errorf("pending reached only %d rows: the transaction did not fill the set, the test shows nothing", m)
	}
	if st.Errors.New != 0 {
		t.Errorf("validation errors after a clean large transaction: %+v", st.Errors)
	}
}
