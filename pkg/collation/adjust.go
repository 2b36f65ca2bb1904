package collation

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Adjust writes the collation d gives into every place of a statement that
// names a character set without a collation, and into a CREATE DATABASE
// that names neither (d.Server), as DM's collation_compatible: strict does:
//   - CREATE DATABASE / ALTER DATABASE: a CHARACTER SET without COLLATE
//     gets the set's default; a CREATE DATABASE with neither gets Server;
//   - CREATE TABLE: the table's CHARACTER SET without COLLATE gets the
//     set's default, and so does each column's; a table with neither
//     keeps inheriting its database's default (as in DM), CREATE TABLE
//     ... LIKE copies its source table and is left alone;
//   - ALTER TABLE (beyond DM, by the same rule): CONVERT TO CHARACTER SET
//     and DEFAULT CHARACTER SET without COLLATE, and the column
//     definitions of ADD, MODIFY and CHANGE COLUMN.
//
// It returns the character sets it knew no default for (left as they
// are) and whether it changed node. Other statements are left alone.
func (d Defaults) Adjust(node ast.StmtNode) (changed bool, unknown []string) {
	a := &adjuster{d: d}
	switch n := node.(type) {
	case *ast.CreateDatabaseStmt:
		a.database(&n.Options, true)
	case *ast.AlterDatabaseStmt:
		a.database(&n.Options, false)
	case *ast.CreateTableStmt:
		if n.ReferTable != nil {
			return false, nil
		}
		a.columns(n.Cols)
		n.Options = a.table(n.Options)
	case *ast.AlterTableStmt:
		for _, spec := range n.Specs {
			switch spec.Tp {
			case ast.AlterTableOption:
				spec.Options = a.table(spec.Options)
			case ast.AlterTableAddColumns, ast.AlterTableModifyColumn, ast.AlterTableChangeColumn:
				a.columns(spec.NewColumns)
			}
		}
	}
	return a.changed, a.unknown
}

type adjuster struct {
	d       Defaults
	changed bool
	unknown []string
}

// forCharset is the default of cs, recording cs when there is none.
func (a *adjuster) forCharset(cs string) (string, bool) {
	coll, ok := a.d.ForCharset(cs)
	if !ok {
		a.unknown = append(a.unknown, cs)
	}
	return coll, ok
}

// database adjusts the options of CREATE (create) or ALTER DATABASE.
func (a *adjuster) database(opts *[]*ast.DatabaseOption, create bool) {
	charset := ""
	for _, o := range *opts {
		switch o.Tp {
		case ast.DatabaseOptionCollate:
			return
		case ast.DatabaseOptionCharset:
			charset = o.Value
		}
	}
	var coll string
	switch {
	case charset != "":
		var ok bool
		if coll, ok = a.forCharset(charset); !ok {
			return
		}
	case create && a.d.Server != "":
		coll = a.d.Server
	default:
		return
	}
	*opts = append(*opts, &ast.DatabaseOption{Tp: ast.DatabaseOptionCollate, Value: coll})
	a.changed = true
}

// table adjusts the options of CREATE TABLE or of one ALTER TABLE spec: a
// CHARACTER SET (CONVERT TO or DEFAULT) without COLLATE gets one.
func (a *adjuster) table(opts []*ast.TableOption) []*ast.TableOption {
	charset := -1
	for i, o := range opts {
		switch o.Tp {
		case ast.TableOptionCollate:
			return opts
		case ast.TableOptionCharset:
			charset = i
		}
	}
	if charset < 0 || opts[charset].Default {
		return opts
	}
	coll, ok := a.forCharset(opts[charset].StrValue)
	if !ok {
		return opts
	}
	// Right after the character set: ALTER TABLE restores CONVERT TO
	// CHARACTER SET x COLLATE y from that pair.
	out := make([]*ast.TableOption, 0, len(opts)+1)
	out = append(out, opts[:charset+1]...)
	out = append(out, &ast.TableOption{Tp: ast.TableOptionCollate, StrValue: coll})
	out = append(out, opts[charset+1:]...)
	a.changed = true
	return out
}

// columns gives each column with a character set but no collation the
// set's default.
func (a *adjuster) columns(cols []*ast.ColumnDef) {
	for _, col := range cols {
		if col.Tp == nil || col.Tp.GetCharset() == "" || col.Tp.GetCollate() != "" || hasCollate(col) {
			continue
		}
		coll, ok := a.forCharset(col.Tp.GetCharset())
		if !ok {
			continue
		}
		col.Tp.SetCollate(coll)
		a.changed = true
	}
}

func hasCollate(col *ast.ColumnDef) bool {
	for _, o := range col.Options {
		if o.Tp == ast.ColumnOptionCollate {
			return true
		}
	}
	return false
}
