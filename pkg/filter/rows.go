package filter

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/exprfilter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// RowFilter holds DM's expression filters (config.ExpressionFilter) by
// source table: which rows of the binlog a subtask or stream does not
// replicate. It only knows the rules; Bind compiles a table's rules
// against the table's model. Immutable and safe for concurrent use; a nil
// *RowFilter has no rules.
type RowFilter struct {
	caseSensitive bool
	rules         map[TableName][]config.ExpressionFilter
}

// NewRowFilter indexes rules by table; names compare case-sensitively when
// caseSensitive is set. It returns nil when there are no rules.
func NewRowFilter(rules []config.ExpressionFilter, caseSensitive bool) *RowFilter {
	if len(rules) == 0 {
		return nil
	}
	f := &RowFilter{caseSensitive: caseSensitive, rules: map[TableName][]config.ExpressionFilter{}}
	for _, r := range rules {
		k := f.key(r.Schema, r.Table)
		f.rules[k] = append(f.rules[k], r)
	}
	return f
}

func (f *RowFilter) key(schema, table string) TableName {
	if !f.caseSensitive {
		schema, table = strings.ToLower(schema), strings.ToLower(table)
	}
	return TableName{Schema: schema, Table: table}
}

// Rules are the rules of schema.table, nil when it has none.
func (f *RowFilter) Rules(schema, table string) []config.ExpressionFilter {
	if f == nil {
		return nil
	}
	return f.rules[f.key(schema, table)]
}

// BoundRows are one table's expression filters compiled against one
// model of the table: they decide, row by row, whether a change is
// skipped. Not safe for concurrent use (a projection buffer is reused); the
// read loop that bound them owns them. A nil *BoundRows skips nothing.
type BoundRows struct {
	table  TableName
	insert []boundExpr
	delete []boundExpr
	update []boundUpdate
	// pick, when set, projects a row of the binlog onto the model's
	// columns (the binlog has columns the model lacks); buf is the
	// projection's scratch row.
	pick []int
	buf  []any
	// warnings say which rules filter nothing because an expression names
	// a column the table does not have.
	warnings []string
}

// boundExpr is one compiled expression of a rule; e is nil when the rule
// can never match (an unknown column).
type boundExpr struct {
	rule, field, expr string
	e                 *exprfilter.Expr
}

// boundUpdate is a rule on updates: old and new are nil where the rule
// has no such expression (TRUE); never is set when an expression names an
// unknown column.
type boundUpdate struct {
	rule     string
	old, new boundExpr
	never    bool
}

// Bind compiles the rules of schema.table against model t of the source
// table. names are the rows' column names in binlog order; nil means the
// rows have t's columns in t's order. A column of the rows that t lacks
// (dropped on the source since the rows were written) is invisible to the
// expressions.
//
// As in DM, an expression naming a column the table does not have (after
// a DDL) makes its rule filter nothing; Warnings says so. Any other
// compile error is returned, naming the rule, the table and the
// expression. Bind returns nil, nil when the table has no rules.
func (f *RowFilter) Bind(schema, table string, t *sqlschema.Table, names []string) (*BoundRows, error) {
	rules := f.Rules(schema, table)
	if len(rules) == 0 {
		return nil, nil
	}
	b := &BoundRows{table: TableName{Schema: schema, Table: table}}
	model := t
	if names != nil {
		model, b.pick = projectModel(t, names)
		if b.pick != nil {
			b.buf = make([]any, len(b.pick))
		}
	}
	compile := func(r config.ExpressionFilter, field, expr string) (boundExpr, bool, error) {
		be := boundExpr{rule: r.Name, field: field, expr: expr}
		if strings.TrimSpace(expr) == "" {
			return be, true, nil
		}
		if missing, err := unknownColumn(expr, model); err != nil || missing != "" {
			if err != nil {
				return be, false, fmt.Errorf("expression filter %q: %s %q of table %s: %w", r.Name, field, expr, b.table, err)
			}
			b.warnings = append(b.warnings, fmt.Sprintf("expression filter %q: %s %q names column %q, which table %s "+
				"does not have: the rule filters nothing until the column exists (as in DM)", r.Name, field, expr, missing, b.table))
			return be, false, nil
		}
		e, err := exprfilter.Compile(expr, model)
		if err != nil {
			return be, false, fmt.Errorf("expression filter %q, %s: %w; fix the rule or the table and resume", r.Name, field, err)
		}
		be.e = e
		return be, true, nil
	}
	for _, r := range rules {
		if r.InsertValueExpr != "" {
			be, _, err := compile(r, "insert-value-expr", r.InsertValueExpr)
			if err != nil {
				return nil, err
			}
			b.insert = append(b.insert, be)
		}
		if r.DeleteValueExpr != "" {
			be, _, err := compile(r, "delete-value-expr", r.DeleteValueExpr)
			if err != nil {
				return nil, err
			}
			b.delete = append(b.delete, be)
		}
		if r.UpdateOldValueExpr != "" || r.UpdateNewValueExpr != "" {
			old, okOld, err := compile(r, "update-old-value-expr", r.UpdateOldValueExpr)
			if err != nil {
				return nil, err
			}
			nw, okNew, err := compile(r, "update-new-value-expr", r.UpdateNewValueExpr)
			if err != nil {
				return nil, err
			}
			b.update = append(b.update, boundUpdate{rule: r.Name, old: old, new: nw, never: !okOld || !okNew})
		}
	}
	return b, nil
}

// unknownColumn returns the first column expr names that t does not have
// (names compare case-insensitively, as MySQL's column names do), "" when
// it has them all.
func unknownColumn(expr string, t *sqlschema.Table) (string, error) {
	nodes, _, err := parser.New().Parse("SELECT "+expr, "", "")
	if err != nil {
		return "", fmt.Errorf("parse: %w", err)
	}
	if len(nodes) != 1 {
		return "", errors.New("not one expression")
	}
	v := &columnNames{}
	nodes[0].Accept(v)
	for _, name := range v.names {
		if t.ColumnIndex(name) < 0 {
			return name, nil
		}
	}
	return "", nil
}

// columnNames collects the column names an expression refers to.
type columnNames struct{ names []string }

func (v *columnNames) Enter(n ast.Node) (ast.Node, bool) {
	if c, ok := n.(*ast.ColumnNameExpr); ok {
		v.names = append(v.names, c.Name.Name.O)
	}
	return n, false
}

func (v *columnNames) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// ModelFor is the model of rows whose columns are names (binlog order):
// each column from the first of models that has it (names compare
// case-insensitively; nil models are skipped), left out when none has it.
// The sync unit passes the source's table as it is now, then the target's
// table as of the rows (DDL reaches the target in binlog order), so a
// column the source dropped since the rows were written is still
// described.
func ModelFor(names []string, models ...*sqlschema.Table) *sqlschema.Table {
	var out *sqlschema.Table
	for _, m := range models {
		if m != nil {
			out = &sqlschema.Table{Schema: m.Schema, Name: m.Name}
			break
		}
	}
	if out == nil {
		return &sqlschema.Table{}
	}
	for _, n := range names {
		for _, m := range models {
			if m == nil {
				continue
			}
			if i := m.ColumnIndex(n); i >= 0 {
				out.Columns = append(out.Columns, m.Columns[i])
				break
			}
		}
	}
	return out
}

// projectModel is t's columns in the order of names (case-insensitive),
// leaving out names t lacks; pick maps the model's columns to positions in
// names, nil when the model is names' columns in order.
func projectModel(t *sqlschema.Table, names []string) (*sqlschema.Table, []int) {
	byName := make(map[string]int, len(t.Columns))
	for i, c := range t.Columns {
		byName[strings.ToLower(c.Name)] = i
	}
	out := &sqlschema.Table{Schema: t.Schema, Name: t.Name}
	var pick []int
	identity := len(names) == len(t.Columns)
	for j, n := range names {
		i, ok := byName[strings.ToLower(n)]
		if !ok {
			identity = false
			continue
		}
		if i != j {
			identity = false
		}
		out.Columns = append(out.Columns, t.Columns[i])
		pick = append(pick, j)
	}
	if identity {
		return t, nil
	}
	return out, pick
}

// Warnings say which rules filter nothing because they name a column the
// table does not have.
func (b *BoundRows) Warnings() []string {
	if b == nil {
		return nil
	}
	return b.warnings
}

// Empty reports whether no rule of the table filters changes of kind
// (EvInsert, EvUpdate, EvDelete).
func (b *BoundRows) Empty(kind string) bool {
	if b == nil {
		return true
	}
	switch kind {
	case EvInsert:
		return len(b.insert) == 0
	case EvUpdate:
		return len(b.update) == 0
	case EvDelete:
		return len(b.delete) == 0
	}
	return true
}

// row projects a binlog row onto the model's columns.
func (b *BoundRows) row(r []any) []any {
	if b.pick == nil {
		return r
	}
	for i, j := range b.pick {
		if j < len(r) {
			b.buf[i] = r[j]
		} else {
			b.buf[i] = nil
		}
	}
	return b.buf
}

// eval reports whether e is TRUE on row; a nil e (no expression) is TRUE.
func (b *BoundRows) eval(be boundExpr, row []any) (bool, error) {
	if be.e == nil {
		return true, nil
	}
	ok, err := be.e.Eval(b.row(row))
	if err != nil {
		return false, fmt.Errorf("expression filter %q, %s, on a row: %w; fix the rule and resume", be.rule, be.field, err)
	}
	return ok, nil
}

// SkipInsert reports whether an insert of row (binlog values) is skipped.
func (b *BoundRows) SkipInsert(row []any) (bool, error) {
	if b == nil {
		return false, nil
	}
	return b.skipAny(b.insert, row)
}

// SkipDelete reports whether a delete of row (binlog values) is skipped.
func (b *BoundRows) SkipDelete(row []any) (bool, error) {
	if b == nil {
		return false, nil
	}
	return b.skipAny(b.delete, row)
}

func (b *BoundRows) skipAny(exprs []boundExpr, row []any) (bool, error) {
	for _, be := range exprs {
		if be.e == nil {
			continue // names an unknown column: filters nothing
		}
		skip, err := b.eval(be, row)
		if err != nil || skip {
			return skip, err
		}
	}
	return false, nil
}

// SkipUpdate reports whether an update from before to after (binlog
// values) is skipped: some rule's old expression is TRUE on before and its
// new expression TRUE on after (a missing one counts as TRUE), as in DM.
func (b *BoundRows) SkipUpdate(before, after []any) (bool, error) {
	if b == nil {
		return false, nil
	}
	for _, u := range b.update {
		if u.never {
			continue
		}
		ok, err := b.eval(u.old, before)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		if ok, err = b.eval(u.new, after); err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// Skip reports whether a change of kind (EvInsert, EvUpdate, EvDelete) is
// skipped; before is nil for an insert, after nil for a delete.
func (b *BoundRows) Skip(kind string, before, after []any) (bool, error) {
	switch kind {
	case EvInsert:
		return b.SkipInsert(after)
	case EvUpdate:
		return b.SkipUpdate(before, after)
	case EvDelete:
		return b.SkipDelete(before)
	}
	return false, nil
}
