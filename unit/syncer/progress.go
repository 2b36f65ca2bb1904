package syncer

import (
	"context"
	"time"

	"github.com/dmworker/dm-worker/pkg/binlog"
)

// The read loop's progress bookkeeping: marks, the applied location the
// validator waits for, checkpoint saves, and what status shows.

// idle runs when no event came for idleTick: mark the last boundary so
// the checkpoint catches up, and report no lag once everything is applied.
func (r *reader) idle(ctx context.Context) error {
	if !r.tr.InTxn {
		if err := r.shard.poll(ctx); err != nil {
			return err
		}
		if err := r.maybeMark(ctx, false); err != nil {
			return err
		}
	}
	if err := r.maybeSave(ctx); err != nil {
		return err
	}
	r.flushPublish()
	if len(r.marks) == 0 && r.disp.queueDepth() == 0 && r.tr.EndIs(r.marked) {
		r.s.mu.Lock()
		r.s.prog.eventTime = time.Time{}
		r.s.mu.Unlock()
		r.s.metrics.setLag(0)
	}
	r.disp.catchingUp.Store(false)
	return nil
}

// saveCheckEvery is how many events inside one transaction the read loop
// handles between checks for a checkpoint to save.
const saveCheckEvery = 256

// afterEvent sends a mark and saves the checkpoint when due. Both name
// transaction boundaries, so they are checked at each boundary; inside a
// long transaction only every saveCheckEvery events, so that an applied
// mark from before it is still saved on time.
func (r *reader) afterEvent(ctx context.Context) error {
	r.sinceCheck++
	if r.tr.InTxn && r.sinceCheck < saveCheckEvery {
		return nil
	}
	r.sinceCheck = 0
	if !r.tr.InTxn {
		if err := r.shard.poll(ctx); err != nil {
			return err
		}
		if err := r.maybeMark(ctx, false); err != nil {
			return err
		}
	}
	return r.maybeSave(ctx)
}

// maybeMark sends a mark for the last transaction boundary when markGap
// has passed (or force is set) and there is something new.
func (r *reader) maybeMark(ctx context.Context, force bool) error {
	if r.tr.EndIs(r.marked) {
		return nil
	}
	if !force && time.Since(r.markedAt) < r.markGap {
		return nil
	}
	seq, err := r.disp.mark(ctx)
	if err != nil {
		return err
	}
	end := r.tr.End()
	r.marks = append(r.marks, pendingMark{seq: seq, loc: end})
	r.marked, r.markedAt = end, time.Now()
	return nil
}

// newestApplied pops every fully applied mark and returns the newest
// location all of whose changes are on the target, publishing it for
// SyncProgress when it moved.
func (r *reader) newestApplied() binlog.Location {
	applied := r.disp.applied()
	moved := false
	for len(r.marks) > 0 && r.marks[0].seq <= applied {
		r.applied, moved = r.marks[0].loc, true
		r.marks = r.marks[1:]
	}
	// Held shard tables' changes after their DDL are not on the target:
	// nothing past the earliest held DDL counts as applied.
	if first, ok := r.shard.capAt(); ok && r.applied.Compare(first) > 0 {
		r.applied, moved = first, true
	}
	if moved {
		r.s.publishApplied(r.applied)
	}
	return r.applied
}

// maybeSave saves the newest fully applied mark as the checkpoint once the
// flush interval has passed since the last save.
func (r *reader) maybeSave(ctx context.Context) error {
	loc := r.newestApplied()
	if loc.Compare(r.saved) <= 0 && loc.GTID == r.saved.GTID || time.Since(r.savedAt) < r.interval {
		return nil
	}
	return r.save(ctx, savedCheckpoint{loc: loc})
}

func (r *reader) save(ctx context.Context, cp savedCheckpoint) error {
	if err := r.s.saveCheckpoint(ctx, cp); err != nil {
		return err
	}
	r.saved, r.savedAt = cp.loc, time.Now()
	if cp.loc.Compare(r.applied) > 0 {
		r.applied = cp.loc
		r.s.publishApplied(cp.loc)
	}
	return nil
}

// flushPublish publishes what publish skipped, if anything.
func (r *reader) flushPublish() {
	if r.unpublished {
		r.publish(0, true)
	}
}

// publish shows the read location, event time and lag in status, at most
// every publishEvery unless forced.
func (r *reader) publish(ts uint32, force bool) {
	if ts > 0 {
		r.lastTS = ts
	}
	now := time.Now()
	if !force && now.Sub(r.publishedAt) < publishEvery {
		r.unpublished = true
		return
	}
	r.publishedAt, r.unpublished = now, false
	r.s.mu.Lock()
	r.s.prog.binlog, r.s.prog.gtid = r.tr.Cur.String(), r.tr.GTIDSet().String()
	r.s.prog.read = r.tr.Cur
	if r.lastTS > 0 {
		r.s.prog.eventTime = time.Unix(int64(r.lastTS), 0)
	}
	r.s.prog.safeMode = r.cfg.Syncer.SafeMode || !r.safeUntil.IsZero()
	r.s.mu.Unlock()
	if r.lastTS > 0 {
		lag := now.Sub(time.Unix(int64(r.lastTS), 0))
		r.s.metrics.setLag(max(0, lag.Seconds()))
		r.disp.catchingUp.Store(lag >= catchUpLag)
	}
}
