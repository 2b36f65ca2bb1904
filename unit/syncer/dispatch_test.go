package syncer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/pkg/rowimage"
)

// TestDispatcherKeyGenerations dispatches many more distinct keys than a
// generation holds, revisiting keys of earlier generations, to workers of
// which one is slow: the key map never holds more than two generations,
// and a change never goes to another worker than an earlier change of its
// key while that one is not applied yet.
func TestDispatcherKeyGenerations(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ti := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "t"}, Columns: []string{"id"}, Key: []int{0}, Uniques: [][]int{{0}}}}
	d := newDispatcher(make(chan struct{}, 1))
	// Small generations, so that the run rotates hundreds of times.
	const keysPerGen = 64
	d.maxKeys = keysPerGen
	const workers = 4
	var (
		mu sync.Mutex
		// sent is, per key, the worker and number of its newest change;
		// done, per key, the number of its newest applied change.
		sent       = map[int64]sentChange{}
		done       = map[int64]int64{}
		violations int
		wg         sync.WaitGroup
	)
	for i := range workers {
		d.workers = append(d.workers, &applyWorker{id: i})
	}
	d.launch = func(w *applyWorker) {
		w.in = make(chan job, 64)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var j job
				select {
				case j = <-w.in:
				case <-ctx.Done():
					return
				}
				if j.mark != 0 {
					w.marked.Store(j.mark)
					select {
					case d.progress <- struct{}{}:
					default:
					}
					continue
				}
				if w.id == 0 {
					time.Sleep(20 * time.Microsecond) // worker 0 lags behind
				}
				mu.Lock()
				for _, c := range j.changes {
					for _, k := range touched(c) {
						done[k] = int64(c.row)
					}
				}
				mu.Unlock()
			}
		}()
	}
	n := int64(200 * keysPerGen)
	for i := range n {
		// Sixteen rows at a time, interleaved: each is inserted, moved to
		// a new key (which then maps to the worker of the old key, not of
		// its own hash), and changed four times under that key.
		const slots, steps = 16, 6
		group := (i/(slots*steps))*slots + i%slots
		a, b := 2*group, 2*group+1
		c := &change{kind: kindInsert, table: ti, after: []any{a}, row: int(i) + 1}
		switch step := i / slots % steps; step {
		case 0:
		case 1:
			c.kind, c.before, c.after = kindUpdate, []any{a}, []any{b}
		default:
			c.kind, c.before, c.after = kindUpdate, []any{b}, []any{b}
		}
		keys, _ := causalityKeys(nil, c, d.seed, nil)
		if err := d.dispatch(ctx, c); err != nil {
			t.Fatal(err)
		}
		target := d.keys[keys[0]] // where the dispatcher sent it
		mu.Lock()
		for _, k := range touched(c) {
			if prev, ok := sent[k]; ok && prev.worker != target && done[k] < prev.n {
				violations++
			}
			sent[k] = sentChange{worker: target, n: i + 1}
		}
		mu.Unlock()
		if size := len(d.keys) + len(d.old); size > 2*keysPerGen+2 {
			t.Fatalf("after %d changes the key map holds %d keys, more than two generations of %d", i+1, size, keysPerGen)
		}
	}
	if violations > 0 {
		t.Errorf("%d changes went to another worker while an earlier change of their key was not applied", violations)
	}
	cancel()
	wg.Wait()
}

// sentChange is the worker and number of a key's newest dispatched change.
type sentChange struct {
	worker int
	n      int64
}

// touched is the keys of the rows c changes.
func touched(c *change) []int64 {
	var out []int64
	for _, row := range [][]any{c.before, c.after} {
		if row != nil {
			out = append(out, row[0].(int64))
		}
	}
	return out
}
