package shardschema

import (
	"fmt"
	"strings"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Change is one target DDL statement of a Diff.
type Change struct {
	// SQL is the statement, MariaDB syntax, the target named with
	// sqlschema.QuoteTable.
	SQL  string
	kind changeKind
	// col is the column added or modified (to its new definition), or the
	// name of the column dropped; ix the index added, or the name of the
	// index dropped with its new definition when it is redefined.
	col   sqlschema.Column
	ix    sqlschema.Index
	redef *sqlschema.Index
}

type changeKind int

const (
	dropIndex changeKind = iota + 1
	addColumn
	modifyColumn
	dropColumn
	addIndex
)

// AppliedTo reports whether the target, as actual describes it, already
// has this change: the added column or index is there (with the new
// definition), the modified column has its new definition, the dropped
// column or index is gone. A worker that stopped between running a
// decision's statements and recording it asks this of each before it runs
// the rest (Remaining).
func (c Change) AppliedTo(actual *sqlschema.Table) bool {
	switch c.kind {
	case addColumn:
		return findColumn(actual, c.col.Name) != nil
	case modifyColumn:
		got := findColumn(actual, c.col.Name)
		return got != nil && columnEqual(got, &c.col)
	case dropColumn:
		return findColumn(actual, c.col.Name) == nil
	case dropIndex:
		got := findIndex(actual, c.ix.Name)
		return got == nil || (c.redef != nil && indexEqual(got, c.redef))
	case addIndex:
		got := findIndex(actual, c.ix.Name)
		return got != nil && indexEqual(got, &c.ix)
	}
	return false
}

// Diff returns the statements that turn a target whose schema is old into
// one whose schema is new, one change per statement, in an order each can
// run in: indexes dropped or redefined first, then columns added (each
// after its predecessor in new, or FIRST), modified, dropped, then indexes
// added. schema.name is the target table. Columns and indexes the target
// has besides old's (extend columns) are not touched. A change the model
// cannot write (adding or redefining a generated column: the model has no
// expression; adding a prefix index: it has no prefix lengths) is a
// *Conflict.
func Diff(old, new *sqlschema.Table, schema, name string) ([]Change, error) {
	target := sqlschema.QuoteTable(schema, name)
	alter := "ALTER TABLE " + target + " "
	var drops, adds, mods, colDrops, ixAdds []Change
	for i := range old.Indexes {
		o := &old.Indexes[i]
		n := findIndex(new, o.Name)
		if n != nil && indexEqual(o, n) {
			continue
		}
		c := Change{kind: dropIndex, ix: *o, SQL: alter + dropIndexClause(o)}
		if n != nil {
			redef := *n
			c.redef = &redef
		}
		drops = append(drops, c)
	}
	for i := range new.Columns {
		n := &new.Columns[i]
		o := findColumn(old, n.Name)
		switch {
		case o == nil:
			if n.Generated {
				return nil, &Conflict{Object: columnObject(n.Name), Reason: "adding a generated column needs its expression, which the table model does not hold; add it to the target by hand and skip the DDL"}
			}
			pos := " FIRST"
			if i > 0 {
				pos = " AFTER " + sqlschema.QuoteName(new.Columns[i-1].Name)
			}
			adds = append(adds, Change{kind: addColumn, col: *n, SQL: alter + "ADD COLUMN " + definition(n) + pos})
		case !columnEqual(o, n):
			if n.Generated || o.Generated {
				return nil, &Conflict{Object: columnObject(n.Name), Reason: "redefining a generated column needs its expression, which the table model does not hold"}
			}
			mods = append(mods, Change{kind: modifyColumn, col: *n, SQL: alter + "MODIFY COLUMN " + definition(n)})
		}
	}
	for i := range old.Columns {
		o := &old.Columns[i]
		if findColumn(new, o.Name) == nil {
			colDrops = append(colDrops, Change{kind: dropColumn, col: *o,
				SQL: alter + "DROP COLUMN " + sqlschema.QuoteName(o.Name)})
		}
	}
	for i := range new.Indexes {
		n := &new.Indexes[i]
		if o := findIndex(old, n.Name); o != nil && indexEqual(o, n) {
			continue
		}
		if n.Prefix {
			return nil, &Conflict{Object: indexObject(n), Reason: "adding an index on column prefixes needs their lengths, which the table model does not hold; add it to the target by hand"}
		}
		ixAdds = append(ixAdds, Change{kind: addIndex, ix: *n, SQL: alter + "ADD " + indexText(n)})
	}
	var out []Change
	for _, part := range [][]Change{drops, adds, mods, colDrops, ixAdds} {
		out = append(out, part...)
	}
	return out, nil
}

// Statements are the SQL of changes.
func Statements(changes []Change) []string {
	out := make([]string, len(changes))
	for i, c := range changes {
		out[i] = c.SQL
	}
	return out
}

// Remaining returns the statements of Diff(old, new) that the target, as
// actual describes it, does not have yet: what an owner that stopped in
// the middle of a decision still has to run.
func Remaining(old, new, actual *sqlschema.Table, schema, name string) ([]string, error) {
	changes, err := Diff(old, new, schema, name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range changes {
		if !c.AppliedTo(actual) {
			out = append(out, c.SQL)
		}
	}
	return out, nil
}

func dropIndexClause(ix *sqlschema.Index) string {
	if ix.Primary {
		return "DROP PRIMARY KEY"
	}
	return "DROP INDEX " + sqlschema.QuoteName(ix.Name)
}

// definition is the column definition of an ADD or MODIFY COLUMN:
// name, COLUMN_TYPE, character set, NULL or NOT NULL, default, INVISIBLE.
// The collation is not in the model: the target takes the character
// set's default.
func definition(c *sqlschema.Column) string {
	var b strings.Builder
	b.WriteString(sqlschema.QuoteName(c.Name))
	b.WriteString(" ")
	b.WriteString(c.ColumnType)
	if c.Charset != "" && c.Charset != "binary" {
		fmt.Fprintf(&b, " CHARACTER SET %s", c.Charset)
	}
	if c.Nullable {
		b.WriteString(" NULL")
	} else {
		b.WriteString(" NOT NULL")
	}
	if c.HasDefault {
		b.WriteString(" DEFAULT ")
		b.WriteString(c.Default)
	}
	if c.Invisible {
		b.WriteString(" INVISIBLE")
	}
	return b.String()
}
