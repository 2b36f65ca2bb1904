package validate

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/rowimage"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// boundTable is the binding of a table's expression filters made for one
// row model (a DDL builds a new model, and the next rows bind again).
type boundTable struct {
	t    *rowimage.Table
	rows *filter.BoundRows
	err  error // the binding failed: the table's rows are not checked
}

// exprRows returns the rows of a rows event that the subtask's
// expression filters let through: the sync unit does not write the others,
// so they are not expected on the target. A table whose filters cannot be
// bound or evaluated (the sync unit pauses on it) is not checked: nil.
func (rd *reader) exprRows(ctx context.Context, t *rowimage.Table, kind binlog.RowsKind, rows [][]any) [][]any {
	rules := rd.sel.Rows
	if rules.Rules(t.Source.Schema, t.Source.Table) == nil {
		return rows
	}
	if rd.exprs == nil {
		rd.exprs = map[filter.TableName]boundTable{}
	}
	b, ok := rd.exprs[t.Source]
	if !ok || b.t != t {
		b = boundTable{t: t}
		// As the sync unit: the source's table, and the target's for a
		// column the source dropped since.
		src, err := sqlschema.ReadTable(ctx, rd.srcDB, t.Source.Schema, t.Source.Table)
		if errors.Is(err, sqlschema.ErrTableNotFound) && t.Model != nil {
			src, err = nil, nil
		}
		if err == nil {
			names := t.Columns[:len(t.Columns)-len(t.Extend)]
			b.rows, err = rules.Bind(t.Source.Schema, t.Source.Table, filter.ModelFor(names, src, t.Model), names)
		}
		b.err = err
		rd.exprs[t.Source] = b
	}
	if b.err != nil {
		rd.exprSkipped(t, b.err)
		return nil
	}
	ev := eventName(kind)
	if b.rows.Empty(ev) {
		return rows
	}
	step := 1
	if kind == binlog.RowsUpdate {
		step = 2
	}
	out := make([][]any, 0, len(rows))
	for i := 0; i+step <= len(rows); i += step {
		var skip bool
		var err error
		if step == 2 {
			skip, err = b.rows.SkipUpdate(rows[i], rows[i+1])
		} else {
			skip, err = b.rows.Skip(ev, rows[i], rows[i])
		}
		if err != nil {
			rd.exprSkipped(t, err)
			continue
		}
		if !skip {
			out = append(out, rows[i:i+step]...)
		}
	}
	return out
}

// exprSkipped logs, once per table, that its rows are not checked because
// its expression filters fail, and lists it in status.
func (rd *reader) exprSkipped(t *rowimage.Table, err error) {
	name := t.Source.String()
	if rd.skip == nil {
		rd.skip = map[string]bool{}
	}
	if rd.skip["expr "+name] {
		return
	}
	rd.skip["expr "+name] = true
	rd.v.logger.Warn("validator does not check rows its expression filters cannot judge", zap.String("table", name), zap.Error(err))
	rd.listSkipped(name + " (expression filter error: see the sync unit)")
}
