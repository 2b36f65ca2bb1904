package rowimage

import (
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Extend columns (DM's extend-column, route rules with extract-table,
// extract-schema, extract-source): the target table of merged shards has
// columns holding parts of the source table's, schema's or source's name.
// A Table appends them after the binlog's columns, with the same value in
// every row of the table, and makes them part of every key, so the rows of
// two shards whose keys collide are different rows of the target (written,
// matched and compared by key plus extend columns).

// addExtend appends the extend columns to the table's columns: text, not
// binary, signed, no fixed length.
func (t *Table) addExtend(ext []filter.ExtendColumn) {
	if len(ext) == 0 {
		return
	}
	t.Extend = ext
	for _, c := range ext {
		t.Columns = append(t.Columns, c.Name)
		t.Types = append(t.Types, mysql.MYSQL_TYPE_VARCHAR)
		t.Unsigned = append(t.Unsigned, false)
		t.Binary = append(t.Binary, false)
		t.Fixed = append(t.Fixed, 0)
		t.extendValues = append(t.extendValues, []byte(c.Value))
	}
}

// withExtendKey returns key with the extend columns' positions appended
// (those it does not hold already).
func (t *Table) withExtendKey(key []int) []int {
	if len(t.Extend) == 0 {
		return key
	}
	out := slices.Clone(key)
	for i := len(t.Columns) - len(t.Extend); i < len(t.Columns); i++ {
		if !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	return out
}

// withoutExtend is tt without its extend columns: the columns the binlog
// of a source table has, when the table map lacks the names.
func withoutExtend(tt *sqlschema.Table, ext []filter.ExtendColumn) *sqlschema.Table {
	if tt == nil || len(ext) == 0 {
		return tt
	}
	c := *tt
	c.Columns = slices.DeleteFunc(slices.Clone(tt.Columns), func(col sqlschema.Column) bool {
		return slices.ContainsFunc(ext, func(e filter.ExtendColumn) bool { return strings.EqualFold(e.Name, col.Name) })
	})
	return &c
}

// checkExtendNames refuses a source table that has a column named like an
// extend column (DM's precheck refuses it too): its value and the
// extracted one would both go to one target column.
func checkExtendNames(src filter.TableName, names []string, ext []filter.ExtendColumn) error {
	for _, e := range ext {
		if slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, e.Name) }) {
			return errs.New(CodeTableInfo, false,
				"sync: table %s has a column %s, which is an extend column of its route rule; rename the rule's target-column",
				src, sqlschema.QuoteName(e.Name))
		}
	}
	return nil
}
