// Package exprfilter evaluates DM expression filters: SQL boolean
// expressions over the columns of one table (insert-value-expr,
// update-old-value-expr, update-new-value-expr, delete-value-expr) on the
// row images the binlog decoder hands to the sync unit and stream tasks,
// with MariaDB's semantics: NULL and three-valued logic, integer, decimal
// and double arithmetic, string comparison under the column's collation,
// temporal values. The supported SQL is listed in docs/operations.md
// ("Expression filters: supported SQL"); anything else is refused by Check
// and Compile, naming the construct.
package exprfilter

import (
	"fmt"
	"strings"
	"time"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions for the parser

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Expr is a compiled expression bound to one table's columns. It holds no
// per-evaluation state: one Expr may be evaluated from many goroutines.
type Expr struct {
	text  string
	table string
	root  node
	loc   *time.Location
	ncols int
}

// Options change how an expression is compiled.
type Options struct {
	// Location is the session time zone: NOW() and CURRENT_TIMESTAMP read
	// the clock in it, TIMESTAMP columns (which the binlog decoder
	// delivers in UTC) are shown in it, and UNIX_TIMESTAMP of a DATETIME
	// reads the value in it. nil: UTC, the time zone of this worker's
	// sessions.
	Location *time.Location
	// Now replaces time.Now for NOW() (tests).
	Now func() time.Time
}

// Check parses expr and refuses anything outside the supported set, with
// an error naming the function or construct and listing what is
// supported. It needs no table (config validation).
func Check(expr string) error {
	_, err := parseExpr(expr)
	return err
}

// Compile binds expr to the columns of the source table t (columns in
// binlog order). An unknown column is an error naming it and the table.
func Compile(expr string, t *sqlschema.Table) (*Expr, error) {
	return CompileWith(expr, t, Options{})
}

// CompileWith is Compile with options.
func CompileWith(expr string, t *sqlschema.Table, opts Options) (*Expr, error) {
	if t == nil {
		return nil, fmt.Errorf("expression filter %q: no table to bind it to", expr)
	}
	n, err := parseExpr(expr)
	if err != nil {
		return nil, err
	}
	loc := opts.Location
	if loc == nil {
		loc = time.UTC
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	c := &compiler{table: t, loc: loc, now: func() time.Time { return now().In(loc) }, src: selectPrefix + expr}
	root, err := c.compile(n)
	if err != nil {
		return nil, fmt.Errorf("expression filter %q on table %s: %w", expr, t, err)
	}
	return &Expr{text: expr, table: t.String(), root: root, loc: loc, ncols: len(t.Columns)}, nil
}

// String returns the expression as written.
func (e *Expr) String() string { return e.text }

// Eval evaluates the expression on one row image (the binlog decoder's
// values, one per column of the table in order; the converted forms of
// pkg/rowimage are accepted too). It returns true only when the
// expression is TRUE: NULL and FALSE are false. An error means the
// expression cannot be evaluated on this row (a value out of range in an
// integer operation, as MariaDB reports it, or a row that does not match
// the table).
func (e *Expr) Eval(row []any) (bool, error) {
	if len(row) < e.ncols {
		return false, fmt.Errorf("expression filter %q on table %s: row image has %d of %d columns (the source needs binlog_row_image=FULL)",
			e.text, e.table, len(row), e.ncols)
	}
	v, err := e.root.f(row)
	if err != nil {
		return false, fmt.Errorf("expression filter %q on table %s: %w", e.text, e.table, err)
	}
	t, known := v.truthy()
	return t && known, nil
}

// selectPrefix makes an expression a statement the parser reads.
const selectPrefix = "SELECT "

// parseExpr parses "SELECT <expr>" and returns the field expression, after
// checking that every construct in it is supported.
func parseExpr(expr string) (ast.ExprNode, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("expression filter is empty")
	}
	stmts, _, err := parser.New().Parse(selectPrefix+expr, "", "")
	if err != nil {
		return nil, fmt.Errorf("expression filter %q does not parse: %v", expr, err)
	}
	if len(stmts) != 1 {
		return nil, fmt.Errorf("expression filter %q: one expression expected", expr)
	}
	sel, ok := stmts[0].(*ast.SelectStmt)
	if !ok || sel.Fields == nil || len(sel.Fields.Fields) != 1 || sel.From != nil || sel.Where != nil ||
		sel.GroupBy != nil || sel.Having != nil || sel.OrderBy != nil || sel.Limit != nil || sel.Fields.Fields[0].Expr == nil {
		return nil, fmt.Errorf("expression filter %q: one expression expected, without FROM, WHERE or other clauses", expr)
	}
	n := sel.Fields.Fields[0].Expr
	if err := checkNode(n); err != nil {
		return nil, fmt.Errorf("expression filter %q: %w", expr, err)
	}
	return n, nil
}
