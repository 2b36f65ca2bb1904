package validate

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/ddlkind"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/rowimage"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// idleTick is how long the reader waits for an event before it publishes
// its transaction boundary.
const idleTick = 200 * time.Millisecond

// reader reads the binlog into the pending set; one goroutine uses it.
type reader struct {
	*run
	tables  *rowimage.Tables
	tr      *binlog.Tracker
	silence time.Duration
	// txnSince is the boundary before the open transaction, once one of
	// its changes needed it; zero otherwise.
	txnSince    binlog.Location
	publishedAt time.Time
	skip        map[string]bool // tables reported as not checkable
	oscSeen     map[string]bool // shadow and trash tables whose rows were skipped (logged)
	// exprs are the bound expression filters by table (exprfilter.go).
	exprs map[filter.TableName]boundTable
}

// loop reads until ctx ends or an event cannot be handled.
func (rd *reader) loop(ctx context.Context, stream binlog.Streamer) error {
	return binlog.ReadLoop(ctx, stream, idleTick, rd.silence, func(ev *replication.BinlogEvent) error {
		if err := rd.yield.wait(ctx, rd.v.setYielding); err != nil {
			return err
		}
		if err := rd.handle(ctx, ev); err != nil {
			return err
		}
		rd.publish(false)
		return nil
	}, func() error {
		rd.publish(true)
		return nil
	}, readError)
}

// handle processes one event.
func (rd *reader) handle(ctx context.Context, ev *replication.BinlogEvent) error {
	kind, err := rd.tr.Track(ev)
	if err != nil {
		return errs.New(CodeRead, false, "validate: %w", err)
	}
	switch kind {
	case binlog.EventCommit:
		return rd.commit()
	case binlog.EventQuery:
		e := ev.Event.(*replication.QueryEvent)
		// Statements never replicated (triggers, views...) change no
		// table; the sync unit logs and counts them.
		if _, skipped := ddlkind.Skipped(string(e.Query)); !skipped {
			rd.ddl(e)
		}
		if rd.tr.InTxn {
			return nil // SAVEPOINT: inside the transaction, not its end
		}
		return rd.commit()
	case binlog.EventRows:
		return rd.rows(ctx, ev, ev.Event.(*replication.RowsEvent))
	}
	return nil
}

func (rd *reader) commit() error {
	if err := rd.tr.Commit(); err != nil {
		return errs.New(CodeRead, false, "validate: %w", err)
	}
	rd.txnSince = binlog.Location{}
	return nil
}

// publish makes the read location visible to the judge (after every
// event, so every change before it is in the pending set) and, between
// transactions, the boundary at most every idleTick or when forced.
func (rd *reader) publish(force bool) {
	var boundary binlog.Location
	withBoundary := !rd.tr.InTxn && (force || time.Since(rd.publishedAt) >= idleTick)
	if withBoundary {
		boundary, rd.publishedAt = rd.tr.End(), time.Now()
	}
	rd.mu.Lock()
	rd.readLoc = rd.tr.Cur
	if withBoundary {
		rd.boundary = boundary
	}
	rd.mu.Unlock()
}

// ddl forgets table structures (the comparer's too) and the pending rows
// of tables whose rows the statement removed or moved. The cut-over of an
// online schema change (`RENAME TABLE t TO _t_del, _t_gho TO t`) is thus a
// schema change of t: its next rows are resolved anew, and, with
// online-ddl on, its pending rows stay (rowsRemovedBy).
func (rd *reader) ddl(e *replication.QueryEvent) {
	rd.tables.Invalidate()
	rd.cmp.invalidate()
	tables, dbs := rowsRemovedBy(string(e.Schema), string(e.Query), rd.osc)
	if len(tables) == 0 && len(dbs) == 0 {
		return
	}
	tset, dset := map[string]bool{}, map[string]bool{}
	for _, t := range tables {
		tset[t.String()] = true
	}
	for _, d := range dbs {
		dset[d] = true
	}
	if n := rd.pend.dropTables(tset, dset); n > 0 {
		rd.v.logger.Info("validator forgets rows a DDL removed", zap.Int("rows", n),
			zap.String("ddl", clip(string(e.Query))))
	}
}

// rows adds the changes of one rows event of a selected table.
func (rd *reader) rows(ctx context.Context, ev *replication.BinlogEvent, e *replication.RowsEvent) error {
	kind, ok := binlog.RowsEventKind(ev.Header.EventType)
	if !ok || e.Table == nil {
		return nil
	}
	schema, table := string(e.Table.Schema), string(e.Table.Table)
	if !rd.sel.Tables.TableAllowed(schema, table) {
		return nil
	}
	// With online-ddl on, the sync unit drops the rows of gh-ost's and
	// pt-osc's shadow and trash tables: they are not on the target.
	if rd.osc.Online(table) {
		rd.onlineSkipped(schema, table)
		return nil
	}
	// Changes the sync unit's filter rules skip are not on the target by
	// design; an Error rule stops the sync unit, not the validator.
	if skip, err := rd.sel.Events.Skip(schema, table, eventName(kind), ""); skip || err != nil {
		return nil
	}
	t, err := rd.table(ctx, ev, e)
	if t == nil || err != nil {
		return err
	}
	if len(t.Key) == 0 {
		rd.noKey(t)
		return nil
	}
	rows := rd.exprRows(ctx, t, kind, e.Rows)
	if len(rows) == 0 {
		return nil
	}
	if rd.txnSince.IsZero() {
		rd.txnSince = rd.tr.End()
	}
	cs, err := rd.changes(t, kind, rows, binlog.Location{Name: rd.tr.Cur.Name, Pos: ev.Header.LogPos},
		time.Unix(int64(ev.Header.Timestamp), 0))
	if err != nil {
		return err
	}
	if !rd.pend.add(cs) {
		return context.Cause(ctx)
	}
	return nil
}

// table resolves the table of a rows event. Without column names in the
// binlog (binlog_row_metadata MINIMAL) the sync unit's resolution takes
// them from the target table, which may not have this event's structure
// yet: the reader then waits for the sync unit to apply everything before
// the event (the DDL included) and looks again. A table still not
// resolvable is not checked (nil, nil; logged and listed in status).
func (rd *reader) table(ctx context.Context, ev *replication.BinlogEvent, e *replication.RowsEvent) (*rowimage.Table, error) {
	t, err := rd.tables.Get(ctx, e.Table)
	if errs.Code(err) != rowimage.CodeTableInfo {
		return t, err
	}
	start := binlog.Location{Name: rd.tr.Cur.Name, Pos: ev.Header.LogPos - ev.Header.EventSize}
	if err := rd.waitApplied(ctx, start); err != nil {
		return nil, err
	}
	rd.tables.Invalidate()
	t, err = rd.tables.Get(ctx, e.Table)
	if errs.Code(err) != rowimage.CodeTableInfo {
		return t, err
	}
	name := filter.TableName{Schema: string(e.Table.Schema), Table: string(e.Table.Table)}.String()
	rd.v.logger.Warn("validator cannot resolve the columns of a row change and skips it", zap.String("table", name),
		zap.Stringer("binlog", start), zap.Error(err))
	rd.listSkipped(name + " (columns unknown: set binlog_row_metadata=FULL on the source)")
	return nil, nil
}

// waitApplied waits until the sync unit has applied every change before
// loc.
func (rd *reader) waitApplied(ctx context.Context, loc binlog.Location) error {
	for {
		if applied, _, ok := rd.v.sync.SyncProgress(); ok && applied.Compare(loc) >= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(judgeTick):
		}
	}
}

// changes turns the rows of one event into changes: the newest image of
// each key, or its absence. An update that changes the key deletes the
// old key.
func (rd *reader) changes(t *rowimage.Table, kind binlog.RowsKind, rows [][]any, loc binlog.Location,
	at time.Time) ([]change, error) {
	step := 1
	if kind == binlog.RowsUpdate {
		step = 2
	}
	cs := make([]change, 0, len(rows)/step+1)
	add := func(image []any, id string, present bool) {
		c := change{id: id, table: t, key: keyOf(t, image), loc: loc, since: rd.txnSince, time: at}
		if present {
			c.want = image
		}
		cs = append(cs, c)
	}
	for i := 0; i+step <= len(rows); i += step {
		first, err := t.ConvertRow(rows[i])
		if err != nil {
			return nil, err
		}
		id := rowID(t, first)
		switch kind {
		case binlog.RowsInsert:
			add(first, id, true)
		case binlog.RowsDelete:
			add(first, id, false)
		default:
			after, err := t.ConvertRow(rows[i+1])
			if err != nil {
				return nil, err
			}
			if afterID := rowID(t, after); afterID != id {
				add(first, id, false)
				id = afterID
			}
			add(after, id, true)
		}
	}
	return cs, nil
}

// onlineSkipped logs, once per table and run, that the rows of a shadow or
// trash table of an online schema change are not validated.
func (rd *reader) onlineSkipped(schema, table string) {
	name := filter.TableName{Schema: schema, Table: table}.String()
	if rd.oscSeen[name] {
		return
	}
	if rd.oscSeen == nil {
		rd.oscSeen = map[string]bool{}
	}
	rd.oscSeen[name] = true
	kind, real := rd.osc.Classify(table)
	rd.v.logger.Info(fmt.Sprintf("validator skips the rows of gh-ost/pt-osc table %s (%s of %s): the sync unit does not replicate them",
		name, kind, sqlschema.QuoteName(real)), zap.String("table", name))
}

// noKey records, once per table, that rows of a table without a primary or
// NOT NULL unique key cannot be checked.
func (rd *reader) noKey(t *rowimage.Table) {
	name := t.Source.String()
	if rd.skip == nil {
		rd.skip = map[string]bool{}
	}
	if rd.skip[name] {
		return
	}
	rd.skip[name] = true
	rd.v.logger.Warn("validator skips a table without a primary key or NOT NULL unique key", zap.String("table", name))
	rd.listSkipped(name)
}

// listSkipped adds an entry, once, to the skipped tables of status.
func (rd *reader) listSkipped(entry string) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if !slices.Contains(rd.skipped, entry) {
		rd.skipped = append(rd.skipped, entry)
	}
}

// eventName is the filter event of a rows kind.
func eventName(k binlog.RowsKind) string {
	switch k {
	case binlog.RowsInsert:
		return filter.EvInsert
	case binlog.RowsUpdate:
		return filter.EvUpdate
	default:
		return filter.EvDelete
	}
}

// keyOf returns the key values of a converted row image.
func keyOf(t *rowimage.Table, image []any) []any {
	key := make([]any, len(t.Key))
	for i, c := range t.Key {
		key[i] = image[c]
	}
	return key
}

// rowID names a row of a converted row image: its source table and an
// exact encoding of its key.
func rowID(t *rowimage.Table, image []any) string {
	var buf [128]byte
	b := append(buf[:0], t.Source.Schema...)
	b = append(b, 0)
	b = append(b, t.Source.Table...)
	b = append(b, 0)
	return string(t.AppendKey(b, image))
}

// clip shortens a statement for a log line.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
