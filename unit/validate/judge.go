package validate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/rowimage"
)

// job is one row to check, as it was when it was picked: the worker must
// not read the entry, which the reader may change meanwhile.
type job struct {
	e       *entry
	version uint64
	table   *rowimage.Table
	key     []any
	want    []any
	loc     binlog.Location
}

// batch is rows of one table checked with one target query.
type batch struct {
	table *rowimage.Table
	jobs  []job
}

// judge hands the rows that are due to the workers, batched by table.
func (r *run) judge(ctx context.Context, work chan<- batch) error {
	tick := time.NewTicker(judgeTick)
	defer tick.Stop()
	for {
		if applied, _, ok := r.v.sync.SyncProgress(); ok && !r.yield.active() {
			r.v.setState(StateValidating)
			jobs := r.pend.due(applied, r.read(), time.Now(), batchRows*r.v.workers*4)
			for _, b := range group(jobs) {
				select {
				case work <- b:
				case <-ctx.Done():
					return nil
				}
			}
			if len(jobs) == batchRows*r.v.workers*4 {
				continue // more may be due at once
			}
		} else if !ok {
			r.v.setState(StateWaiting)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// group splits jobs into batches of at most batchRows rows of one table.
func group(jobs []job) []batch {
	var out []batch
	open := map[*rowimage.Table]int{} // table -> index of its open batch in out
	for _, j := range jobs {
		t := j.table
		i, ok := open[t]
		if !ok || len(out[i].jobs) >= batchRows {
			out = append(out, batch{table: t, jobs: make([]job, 0, batchRows)})
			i = len(out) - 1
			open[t] = i
		}
		out[i].jobs = append(out[i].jobs, j)
	}
	return out
}

// work checks batches until ctx ends.
func (r *run) work(ctx context.Context, in <-chan batch) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case b := <-in:
			if err := r.check(ctx, b); err != nil {
				return err
			}
		}
	}
}

// check compares one batch with the target and settles each row: equal
// rows leave the pending set, mismatches wait for a recheck and become
// validation errors once they have lasted row-error-delay.
func (r *run) check(ctx context.Context, b batch) error {
	checks := make([]rowCheck, len(b.jobs))
	for i, j := range b.jobs {
		checks[i] = rowCheck{key: j.key, want: j.want}
	}
	results, err := r.cmp.compare(ctx, b.table, checks)
	if errors.Is(err, errTableGone) {
		r.pend.forget(b.jobs)
		return nil
	}
	if err != nil {
		r.pend.release(b.jobs)
		return err
	}
	// The target may hold any change the sync unit has read; a mismatch
	// only counts when the validator has read at least as far.
	_, syncRead, ok := r.v.sync.SyncProgress()
	conclusive := ok && r.read().Compare(syncRead) >= 0
	if !conclusive {
		r.dropStale(ctx, b, checks, results)
	}
	reports := r.pend.settle(b.jobs, results, conclusive, syncRead, time.Now(), r.v.delay, r.retryEvery)
	r.checked.Add(int64(len(b.jobs)))
	r.v.metrics.addChecked(len(b.jobs))
	if len(reports) == 0 {
		return nil
	}
	return r.report(ctx, b.table, reports)
}

// dropStale settles, as superseded, the mismatched rows whose image the
// source no longer has: a newer change of the row exists, which the
// validator will read and judge, so the older image need not wait in
// memory for the reader (a validator far behind the sync unit would
// otherwise hold every key changed since). Rows the source still has as
// imaged keep their mismatch. A failing source query keeps them all.
func (r *run) dropStale(ctx context.Context, b batch, checks []rowCheck, results []rowResult) {
	var idx []int
	var sub []rowCheck
	for i, res := range results {
		if res.kind != "" {
			idx, sub = append(idx, i), append(sub, checks[i])
		}
	}
	if len(sub) == 0 {
		return
	}
	src := *b.table
	src.Target = src.Source
	now, err := r.srcCmp.compare(ctx, &src, sub)
	if err != nil {
		r.v.logger.Warn("validator cannot read current source rows; mismatches wait for the binlog reader", zap.Error(err))
		return
	}
	for n, i := range idx {
		if now[n].kind != "" {
			results[i] = rowResult{}
		}
	}
}

// report stores the errors of rows that failed for row-error-delay, then
// drops the rows from the pending set.
func (r *run) report(ctx context.Context, t *rowimage.Table, reports []settled) error {
	now := time.Now().UTC()
	recs := make([]ErrorRecord, len(reports))
	jobs := make([]job, len(reports))
	for i, s := range reports {
		src := json.RawMessage("null")
		if s.job.want != nil {
			src = displayRow(t, s.job.want)
		}
		tgt := s.target
		if tgt == nil {
			tgt = json.RawMessage("null")
		}
		recs[i] = ErrorRecord{Table: plainName(t.Source.Schema, t.Source.Table),
			TargetTable: plainName(t.Target.Schema, t.Target.Table), Kind: s.kind, Key: keyJSON(t, s.job.key),
			SourceRow: src, TargetRow: tgt, State: StateNew, Time: now, Binlog: s.job.loc.String()}
		jobs[i] = s.job
	}
	added, err := r.store.report(ctx, recs)
	if err != nil {
		r.pend.release(jobs)
		return err
	}
	r.pend.reported(jobs)
	counts, err := r.store.counts(ctx)
	if err != nil {
		return err
	}
	r.v.mu.Lock()
	r.v.st.counts = counts
	r.v.mu.Unlock()
	r.v.metrics.setCounts(counts)
	for _, rec := range recs {
		r.v.logger.Warn("validation error", zap.String("table", rec.Table), zap.String("kind", rec.Kind),
			zap.ByteString("key", rec.Key), zap.String("binlog", rec.Binlog))
	}
	r.v.logger.Info("validation errors stored", zap.Int("rows", len(recs)), zap.Int("new", added))
	return nil
}

// plainName is schema.table without quotes, as operators read it.
func plainName(schema, table string) string { return fmt.Sprintf("%s.%s", schema, table) }

// saveLoop saves the checkpoint and refreshes status every saveEvery.
func (r *run) saveLoop(ctx context.Context) error {
	tick := time.NewTicker(saveEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := r.save(ctx); err != nil {
				return err
			}
		}
	}
}

// save saves the checkpoint (the oldest unjudged change's boundary, else
// the reader's boundary) when it moved, and refreshes status.
func (r *run) save(ctx context.Context) error {
	since, oldest, pending := r.pend.oldest()
	r.mu.Lock()
	cp, readLoc := r.boundary, r.readLoc
	skipped := append([]string(nil), r.skipped...)
	r.mu.Unlock()
	if pending && since.Compare(cp) < 0 {
		cp = since
	}
	lag := 0.0
	if pending {
		lag = max(0, time.Since(oldest).Seconds())
	}
	n := r.pend.size()
	checked := r.checked.Load()
	r.v.metrics.setPending(n, lag)
	r.v.mu.Lock()
	saved := r.v.st.checkpoint
	r.v.st.pending, r.v.st.lag, r.v.st.checked = int64(n), lag, checked
	r.v.st.binlog, r.v.st.skipped = readLoc.String(), skipped
	r.v.mu.Unlock()
	if cp.IsZero() || cp.String() == saved && !pending {
		return nil
	}
	if err := r.store.saveCheckpoint(ctx, cp, checked); err != nil {
		return err
	}
	r.v.mu.Lock()
	r.v.st.checkpoint = cp.String()
	r.v.mu.Unlock()
	return nil
}
