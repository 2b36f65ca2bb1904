package load

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"

	"github.com/dmworker/dm-worker/pkg/extendcol"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// setExtend adds the extend columns (DM's extend-column: route rules with
// extract-table, extract-schema, extract-source) to the plan: LOAD DATA
// sets them to the table's constant values, INSERT lists them after the
// dumped columns.
func (p *tablePlan) setExtend(ext []filter.ExtendColumn) {
	if len(ext) == 0 {
		return
	}
	p.extend = ext
	sets := make([]string, len(ext))
	var values, names strings.Builder
	for i, c := range ext {
		lit := quoteString(c.Value)
		sets[i] = sqlschema.QuoteName(c.Name) + " = " + lit
		names.WriteString(", " + sqlschema.QuoteName(c.Name))
		values.WriteString("," + lit)
	}
	if strings.Contains(p.columns, " SET ") {
		p.columns += ", " + strings.Join(sets, ", ")
	} else {
		p.columns += " SET " + strings.Join(sets, ", ")
	}
	p.insertColumns = strings.TrimSuffix(p.insertColumns, ")") + names.String() + ")"
	p.insertExtend = values.String()
}

// quoteString is v as a single-quoted string literal in the session's
// character set (the values are parts of names: text).
func quoteString(v string) string {
	return "'" + string(appendEscaped(nil, []byte(v))) + "'"
}

// extendCreateTable turns a source's SHOW CREATE TABLE into CREATE TABLE
// IF NOT EXISTS of target, the merged table of shards with extend columns
// ext: the extend columns appended and every primary and unique key
// extended by them (extendcol.AddToCreate). The statement goes through the
// TiDB parser, so table options only MariaDB knows are lost; an operator
// who needs them creates the merged table first (as DM requires), and the
// load then only checks it.
func extendCreateTable(p *parser.Parser, createSQL string, target filter.TableName, ext []filter.ExtendColumn) (string, error) {
	stmt, err := p.ParseOneStmt(createSQL, "", "")
	if err != nil {
		return "", fmt.Errorf("parse the dumped CREATE TABLE to add extend columns %v: %w; create target table %s with them yourself",
			extendcol.Names(ext), err, target)
	}
	ct, ok := stmt.(*ast.CreateTableStmt)
	if !ok {
		return "", fmt.Errorf("the dumped CREATE TABLE is a %T, not CREATE TABLE", stmt)
	}
	if err := extendcol.AddToCreate(p, ct, ext); err != nil {
		return "", err
	}
	ct.Table.Schema, ct.Table.Name = ast.NewCIStr(target.Schema), ast.NewCIStr(target.Table)
	ct.IfNotExists = true
	var b strings.Builder
	if err := ct.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err != nil {
		return "", fmt.Errorf("restore the merged CREATE TABLE: %w", err)
	}
	return b.String(), nil
}
