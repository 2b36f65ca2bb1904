package stream

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// fillHistory runs the fill-history snapshot of the selected tables from
// the progress in cp and returns the checkpoint streaming starts from.
//
// Where streaming starts: a first fill-history (no cp.Location) saves the
// source's current position L0 before the snapshot begins, so that a crash
// finds a start no later than any row read. When that snapshot completes
// in one run, streaming starts exactly at its location P (every row was
// read at P: nothing missed, nothing doubled). After a crash the remaining
// rows are read at a new point, and streaming starts at the saved L0:
// changes since then are replayed (at-least-once; applying them converges).
//
// Event identity of a snapshot row: <source>:<file>:<pos>:r:<db>.<table>:<key>
// where file:pos is the stream's saved start (the same on every resume)
// and key is the event key (the JSON of the row's key columns), so a row
// read again after a crash has the identity it had (brokers drop the
// replay) and two rows never share one. A table without a primary or NOT
// NULL unique key has no row identity: its rows get
// ...:r:<db>.<table>:#<n>@<run> (n counts the rows of this read, run is the
// start of this run in Unix ns), unique but not stable across runs.
func (t *Task) fillHistory(ctx context.Context, cp Checkpoint) (Checkpoint, error) {
	first := noLocation(cp.Location)
	if first {
		if s := t.cfg.Stream.Start; s.BinlogName != "" || s.BinlogGTID != "" {
			t.logger.Info("stream start is ignored: with snapshot: true streaming starts where the snapshot was taken")
		}
		loc, err := CurrentLocation(ctx, t.cfg.DB)
		if err != nil {
			return cp, errs.Wrap(err, CodeFillHistory, "stream %q: fill-history: read the source's position", t.name)
		}
		cp.Location, cp.Txn = loc, nil
		cp.Snapshot = map[string]TableProgress{}
		if err := t.save(ctx, cp); err != nil {
			return cp, err
		}
	}
	tables, err := ListTables(ctx, t.cfg.DB, t.allowedTable)
	if err != nil {
		return cp, errs.Wrap(err, CodeFillHistory, "stream %q", t.name)
	}
	f := &filler{t: t, cp: cp, tables: len(tables), run: time.Now().UnixNano(), schemas: map[TableName]*sqlschema.Table{}}
	f.cp.Snapshot = maps.Clone(cp.Snapshot)
	if f.cp.Snapshot == nil {
		f.cp.Snapshot = map[string]TableProgress{}
	}
	keys := map[TableName][]string{}
	for _, tn := range tables {
		s, err := t.schemas.Table(ctx, tn.DB, tn.Table)
		if err != nil {
			return cp, errs.Wrap(err, CodeSchema, "stream %q: fill-history", t.name)
		}
		f.schemas[tn] = s
		if s.RowKeyIndex != "" {
			keys[tn] = s.KeyColumns()
			continue
		}
		// Read again from its start: its rows so far do not count.
		if p := f.cp.Snapshot[tn.String()]; !p.Done {
			delete(f.cp.Snapshot, tn.String())
		}
	}
	f.publish()
	emit := func(rows []SnapshotRow, done TableName) error { return f.emit(ctx, rows, done) }
	loc, err := Snapshot(ctx, t.cfg.DB, tables, keys, maps.Clone(f.cp.Snapshot), t.cfg.SnapshotChunk, emit, WithSnapshotLogger(t.logger))
	if err != nil {
		return cp, t.fillError(err)
	}
	out := f.cp
	if first {
		out.Location, out.Txn = loc, nil
	}
	out.SnapshotDone, out.Snapshot = true, nil
	if err := t.save(ctx, out); err != nil {
		return cp, err
	}
	t.logger.Info("fill-history done; streaming starts", zap.Stringer("at", out.Location), zap.String("gtid", out.Location.GTID),
		zap.Stringer("snapshot", loc), zap.Int("tables", len(tables)))
	return out, nil
}

// fillError classifies a failed snapshot: coded errors (the sink's, the
// checkpoint's) stay as they are; a table altered during the snapshot is
// resumable (a new snapshot reads it anew); the rest as errs.Wrap says.
func (t *Task) fillError(err error) error {
	var c *errs.Coded
	if errors.As(err, &c) {
		return err
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == erTableDefChanged {
		return errs.New(CodeFillHistory, true, "stream %q: %w", t.name, err)
	}
	return errs.Wrap(err, CodeFillHistory, "stream %q", t.name)
}

// filler turns the snapshot's chunks into events, writes them and saves
// the progress; Snapshot calls its emit from the goroutine of Run.
type filler struct {
	t       *Task
	cp      Checkpoint
	tables  int
	run     int64 // this run's start, for identities of rows without a key
	schemas map[TableName]*sqlschema.Table
	row     int       // running index of the rows read in this run
	current TableName // the table of the last chunk
	unkeyed int64     // rows of the current table so far
}

// emit writes one chunk and, once the sink acknowledged it, saves the
// table's progress.
func (f *filler) emit(ctx context.Context, rows []SnapshotRow, done TableName) error {
	if len(rows) > 0 {
		if err := f.write(ctx, rows); err != nil {
			return err
		}
		tn := rows[0].Table
		p := f.cp.Snapshot[tn.String()]
		p.Rows += int64(len(rows))
		p.Cursor = rows[len(rows)-1].Cursor
		f.cp.Snapshot[tn.String()] = p
	}
	if !done.IsZero() {
		p := f.cp.Snapshot[done.String()]
		p.Done = true
		f.cp.Snapshot[done.String()] = p
	}
	cp := f.cp
	cp.Snapshot = maps.Clone(f.cp.Snapshot)
	if err := f.t.save(ctx, cp); err != nil {
		return err
	}
	f.publish()
	return nil
}

// write encodes the rows of one chunk (all of one table) as op "r" events
// and writes them in batches of at most maxBatch.
func (f *filler) write(ctx context.Context, rows []SnapshotRow) error {
	tn := rows[0].Table
	if tn != f.current {
		f.current, f.unkeyed = tn, 0
	}
	s := f.schemas[tn]
	keyed := s.RowKeyIndex != ""
	ts := time.Now().UnixMilli()
	events := make([]Event, 0, min(len(rows), maxBatch))
	for _, row := range rows {
		pos := Position{File: f.cp.Location.Name, Pos: f.cp.Location.Pos, Row: f.row, TsMs: ts, Snapshot: true}
		ev, err := f.t.enc.Row(s, "r", nil, row.Values, pos)
		if err != nil {
			f.t.schemas.Invalidate(tn.DB, tn.Table)
			return errs.New(CodeEncode, false, "stream %q: fill-history: row %v of %s: %w", f.t.name, row.Cursor, tn, err)
		}
		ev.ID = f.snapshotID(tn, ev.Key, keyed)
		f.row++
		f.unkeyed++
		events = append(events, ev)
		if len(events) == maxBatch {
			if err := f.t.writeEvents(ctx, events); err != nil {
				return err
			}
			events = make([]Event, 0, min(len(rows), maxBatch))
		}
	}
	return f.t.writeEvents(ctx, events)
}

// publish shows the progress in status.
func (f *filler) publish() {
	fs := &FillStatus{Tables: f.tables}
	for _, p := range f.cp.Snapshot {
		if p.Done {
			fs.TablesDone++
		}
		fs.Rows += p.Rows
	}
	f.t.update(func(st *TaskStatus) { st.FillHistory = fs })
}

// snapshotID is the identity of a snapshot row (see fillHistory).
func (f *filler) snapshotID(tn TableName, key []byte, keyed bool) string {
	b := make([]byte, 0, 64+len(key))
	b = append(b, f.t.cfg.Source.SourceID...)
	b = append(b, ':')
	b = append(b, f.cp.Location.Name...)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(f.cp.Location.Pos), 10)
	b = append(b, ":r:"...)
	b = append(b, tn.String()...)
	b = append(b, ':')
	if keyed {
		return string(append(b, key...))
	}
	b = append(b, '#')
	b = strconv.AppendInt(b, f.unkeyed, 10)
	b = append(b, '@')
	return string(strconv.AppendInt(b, f.run, 10))
}
