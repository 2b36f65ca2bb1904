// Package extendcol holds what the load and sync units share about DM's
// extend columns (route rules with extract-table, extract-schema,
// extract-source) on the target: the columns' definition, the edit of a
// shard's CREATE TABLE that creates the merged table with them, and the
// check of a target table made by someone else. Routing and the values
// are pkg/filter's (Router.Extend); row images are pkg/rowimage's.
package extendcol

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions for the parser

	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// ColumnType is the definition an extend column gets when this worker
// creates it: every value is a part of a schema or table name (at most 64
// characters) or of a source id (at most 128), compared byte for byte so
// that shards whose names differ only in case stay apart.
const ColumnType = "VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT ''"

// Names returns the names of cols.
func Names(cols []filter.ExtendColumn) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name
	}
	return out
}

// columnDefs parses the definitions of cols.
func columnDefs(p *parser.Parser, cols []filter.ExtendColumn) ([]*ast.ColumnDef, error) {
	defs := make([]string, len(cols))
	for i, c := range cols {
		defs[i] = sqlschema.QuoteName(c.Name) + " " + ColumnType
	}
	stmt, err := p.ParseOneStmt("CREATE TABLE t ("+strings.Join(defs, ", ")+")", "", "")
	if err != nil {
		return nil, fmt.Errorf("extend columns %v: %w", Names(cols), err)
	}
	return stmt.(*ast.CreateTableStmt).Cols, nil
}

// AddToCreate edits ct, a source table's CREATE TABLE whose rows go to a
// merged table with extend columns cols, into the CREATE TABLE of that
// merged table: the extend columns are appended (ColumnType), and every
// primary and unique key gets them appended to its columns (a column's
// inline PRIMARY KEY or UNIQUE becomes a table-level key over it and the
// extend columns), so rows of different shards whose keys collide stay
// apart: PRIMARY KEY (id) becomes PRIMARY KEY (id, c_table, c_schema,
// c_source). A source column named like an extend column is an error, as
// in DM's precheck.
func AddToCreate(p *parser.Parser, ct *ast.CreateTableStmt, cols []filter.ExtendColumn) error {
	if len(cols) == 0 {
		return nil
	}
	if ct.ReferTable != nil || ct.Select != nil {
		return fmt.Errorf("CREATE TABLE ... LIKE/SELECT of a table with extend columns %v: create the merged table on the target yourself, with the extend columns", Names(cols))
	}
	for _, def := range ct.Cols {
		for _, c := range cols {
			if strings.EqualFold(def.Name.Name.O, c.Name) {
				return fmt.Errorf("the source table has a column %s, which is an extend column of the route rule: "+
					"rename the target-column of the rule (DM refuses this too)", sqlschema.QuoteName(c.Name))
			}
		}
	}
	defs, err := columnDefs(p, cols)
	if err != nil {
		return err
	}
	extendParts := func() []*ast.IndexPartSpecification {
		parts := make([]*ast.IndexPartSpecification, len(cols))
		for i, c := range cols {
			parts[i] = &ast.IndexPartSpecification{Column: &ast.ColumnName{Name: ast.NewCIStr(c.Name)}, Length: -1}
		}
		return parts
	}
	// Inline keys first become table-level keys, in the source's column
	// order.
	var inline []*ast.Constraint
	for _, def := range ct.Cols {
		kept := def.Options[:0:0]
		for _, opt := range def.Options {
			var tp ast.ConstraintType
			switch opt.Tp {
			case ast.ColumnOptionPrimaryKey:
				tp = ast.ConstraintPrimaryKey
			case ast.ColumnOptionUniqKey:
				tp = ast.ConstraintUniqKey
			default:
				kept = append(kept, opt)
				continue
			}
			part := &ast.IndexPartSpecification{Column: &ast.ColumnName{Name: def.Name.Name}, Length: -1}
			inline = append(inline, &ast.Constraint{Tp: tp, Keys: []*ast.IndexPartSpecification{part}})
		}
		def.Options = kept
	}
	ct.Constraints = append(inline, ct.Constraints...)
	for _, cst := range ct.Constraints {
		switch cst.Tp {
		case ast.ConstraintPrimaryKey, ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex:
			cst.Keys = append(cst.Keys, extendParts()...)
		}
	}
	ct.Cols = append(ct.Cols, defs...)
	return nil
}

// CheckTarget checks a target table made by someone else (an operator, as
// DM requires, or an earlier load) against the source columns it is to
// receive: every extend column must be there, and the target must not be
// missing a source column. It returns the problems, none when it fits.
func CheckTarget(tt *sqlschema.Table, sourceColumns []string, cols []filter.ExtendColumn) []string {
	have := map[string]bool{}
	for _, c := range tt.Columns {
		have[strings.ToLower(c.Name)] = true
	}
	var out []string
	for _, c := range cols {
		if !have[strings.ToLower(c.Name)] {
			out = append(out, "extend column "+sqlschema.QuoteName(c.Name)+" is missing (add it: "+sqlschema.QuoteName(c.Name)+" "+ColumnType+")")
		}
		if slices.ContainsFunc(sourceColumns, func(s string) bool { return strings.EqualFold(s, c.Name) }) {
			out = append(out, "the source table has a column "+sqlschema.QuoteName(c.Name)+", which is an extend column of the route rule")
		}
	}
	return out
}

// IsExtend reports whether name is one of cols (case-insensitive, as
// MySQL column names).
func IsExtend(cols []filter.ExtendColumn, name string) bool {
	return slices.ContainsFunc(cols, func(c filter.ExtendColumn) bool { return strings.EqualFold(c.Name, name) })
}
