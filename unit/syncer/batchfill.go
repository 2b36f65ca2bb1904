package syncer

import (
	"github.com/dmworker/dm-worker/pkg/rowimage"
)

// batchFill measures a batch being collected in rows the target will write,
// which is what worker batches are sized by: compaction (compact.go) writes
// each key of a compactable table once, however often the batch changes it,
// so a change of a key already in the batch adds nothing; any other change
// is one row write. A batch still takes at most maxBatchChanges(batch)
// changes, so one hot key cannot make it grow without bound.
type batchFill struct {
	keys map[string]struct{} // target table + key encoding of compactable rows
	buf  []byte
	rows int // row writes so far
	n    int // changes so far
	size int // estimated size of the changes so far (change.size)
}

// maxBatchChanges bounds the changes of one batch of size batch.
func maxBatchChanges(batch int) int { return 4 * batch }

// add counts c and returns the batch's row writes, changes and estimated
// size so far. An insert of a bulk job counts as a row write without a
// look-up: it writes a new key (at worst a later change of it in the batch
// counts again, which only ends the batch sooner).
func (f *batchFill) add(c *change, bulk bool) (rows, changes, size int) {
	f.n++
	f.size += c.size
	ti := c.table
	if !ti.compact || (bulk && c.kind == kindInsert) {
		f.rows++
		return f.rows, f.n, f.size
	}
	if f.keys == nil {
		f.keys = map[string]struct{}{}
	}
	for _, row := range [2][]any{c.before, c.after} {
		if row == nil {
			continue
		}
		f.buf = append(f.buf[:0], ti.Target.Schema...)
		f.buf = append(f.buf, 0)
		f.buf = append(f.buf, ti.Target.Table...)
		f.buf = append(f.buf, 0)
		f.buf = rowimage.AppendValues(f.buf, row, ti.Key, false)
		if _, seen := f.keys[string(f.buf)]; !seen {
			f.keys[string(f.buf)] = struct{}{}
			f.rows++
		}
	}
	return f.rows, f.n, f.size
}

// reset empties f for the next batch, keeping its memory.
func (f *batchFill) reset() {
	clear(f.keys)
	f.rows, f.n, f.size = 0, 0, 0
}

// workerQueue is the capacity of an apply worker's queue: two of its
// largest batches, so that the reader, which feeds every worker, does not
// stall on one worker's full queue while that worker commits a batch.
func workerQueue(batch int) int { return 2 * maxBatchChanges(batch) }
