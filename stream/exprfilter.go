package stream

import (
	"fmt"

	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/go-mysql-org/go-mysql/replication"
)

// CodeExprFilter: an expression filter of the stream's filters cannot be
// bound to its table or evaluated on a row (not resumable: change the rule
// or the table, or resume with ignore-untreated).
const CodeExprFilter = "stream-expression-filter"

// exprBinding is a table's expression filters bound to one model of the
// table (the schema cache's, which a DDL replaces) and one row shape.
type exprBinding struct {
	model *sqlschema.Table
	cols  int
	rows  *filter.BoundRows
}

// exprRows returns the bound expression filters for the rows of a rows
// event of db.table, whose table map is tm and whose table the schema
// cache describes as cached; nil when the table has none.
func (r *reader) exprRows(db, table string, cached *sqlschema.Table, tm *replication.TableMapEvent) (*filter.BoundRows, error) {
	rules := r.t.rows
	if rules.Rules(db, table) == nil {
		return nil, nil
	}
	key := schemaTableName{db, table}
	n := int(tm.ColumnCount)
	if b, ok := r.exprs[key]; ok && b.model == cached && b.cols == n {
		return b.rows, nil
	}
	// The rows' columns as fitSchema finds them: the table's when the
	// counts agree, by name when the table map names them, else the first
	// n (columns added since).
	var names []string
	switch {
	case n == len(cached.Columns):
	case len(tm.ColumnName) == n:
		names = tm.ColumnNameString()
	default:
		for i := range min(n, len(cached.Columns)) {
			names = append(names, cached.Columns[i].Name)
		}
	}
	rows, err := rules.Bind(db, table, cached, names)
	if err != nil {
		return nil, fmt.Errorf("stream %q: %w", r.t.name, err)
	}
	for _, w := range rows.Warnings() {
		r.t.logger.Warn(w)
	}
	if r.exprs == nil {
		r.exprs = map[schemaTableName]exprBinding{}
	}
	r.exprs[key] = exprBinding{model: cached, cols: n, rows: rows}
	return rows, nil
}
