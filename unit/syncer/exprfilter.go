package syncer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// CodeExprFilter: an expression filter cannot be bound to its table or
// evaluated on a row (not resumable: the rule or the table must change).
const CodeExprFilter = "sync-expression-filter"

// exprFilters binds a run's expression filters (filter.RowFilter) to the
// source tables' models, one table at a time as its rows arrive. A
// binding lasts as long as the table's tableInfo: a DDL or a changed
// table map builds a new one, and the next rows bind again against the
// source's table as it is then. It belongs to the run's read loop.
type exprFilters struct {
	s     *Syncer
	rules *filter.RowFilter
	// src is the run's connection to the source, opened with the first
	// binding; close releases it.
	src   *sql.DB
	bound map[tableName]boundTable
}

// boundTable is the binding made for one tableInfo.
type boundTable struct {
	ti   *tableInfo
	rows *filter.BoundRows
}

func (s *Syncer) newExprFilters() *exprFilters {
	return &exprFilters{s: s, rules: s.rows, bound: map[tableName]boundTable{}}
}

// get returns the bound expression filters of ti's table, nil when the
// table has none.
func (x *exprFilters) get(ctx context.Context, ti *tableInfo) (*filter.BoundRows, error) {
	if x == nil || x.rules.Rules(ti.Source.Schema, ti.Source.Table) == nil {
		return nil, nil
	}
	if b, ok := x.bound[ti.Source]; ok && b.ti == ti {
		return b.rows, nil
	}
	src, err := x.sourceModel(ctx, ti)
	if err != nil {
		return nil, err
	}
	// The rows hold the binlog's columns; the extend columns follow them.
	// A column the source's table no longer has is described by the
	// target's, which has the rows' shape (DDL is applied in order).
	names := ti.Columns[:len(ti.Columns)-len(ti.Extend)]
	model := filter.ModelFor(names, src, ti.Model)
	rows, err := x.rules.Bind(ti.Source.Schema, ti.Source.Table, model, names)
	if err != nil {
		return nil, errs.New(CodeExprFilter, false, "sync: %w", err)
	}
	for _, w := range rows.Warnings() {
		x.s.warnOnce(w)
	}
	x.bound[ti.Source] = boundTable{ti: ti, rows: rows}
	return rows, nil
}

// sourceModel reads ti's table from the source. A table the source no
// longer has (dropped since these rows were written) is described by the
// target's table alone (nil here), with a warning.
func (x *exprFilters) sourceModel(ctx context.Context, ti *tableInfo) (*sqlschema.Table, error) {
	if x.src == nil {
		db, err := x.s.sources.Open(x.s.source, x.s.source.DriverConfig(), x.s.cfg.Name, 1)
		if err != nil {
			return nil, errs.Wrap(err, CodeReadBinlog, "sync: connect to source %s to read the tables of expression filters", x.s.cfg.SourceID)
		}
		x.src = db
	}
	model, err := sqlschema.ReadTable(ctx, x.src, ti.Source.Schema, ti.Source.Table)
	switch {
	case errors.Is(err, sqlschema.ErrTableNotFound) && ti.Model != nil:
		x.s.warnOnce(fmt.Sprintf("expression filters of table %s: the source no longer has the table; "+
			"its rows are filtered by the columns of target table %s", ti.Source, ti.Target))
		return nil, nil
	case err != nil:
		return nil, errs.Wrap(err, CodeReadBinlog, "sync: read table %s of an expression filter from source %s", ti.Source, x.s.cfg.SourceID)
	}
	return model, nil
}

// close releases the source connection.
func (x *exprFilters) close() {
	if x == nil || x.src == nil {
		return
	}
	if err := x.src.Close(); err != nil {
		x.s.logger.Warn("close the source pool of expression filters", zap.Error(err))
	}
	x.src = nil
}

// warnOnce adds msg to the status warnings and the log, once.
func (s *Syncer) warnOnce(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prog.exprWarned == nil {
		s.prog.exprWarned = map[string]bool{}
	}
	if s.prog.exprWarned[msg] {
		return
	}
	s.prog.exprWarned[msg] = true
	s.prog.warnings = append(s.prog.warnings, msg)
	s.logger.Warn(msg)
}
