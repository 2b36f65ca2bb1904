package shardschema

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// ErrIncompatible is matched (errors.Is) by every *Conflict.
var ErrIncompatible = errors.New("shardschema: incompatible schemas")

// Conflict says why schemas cannot be joined or a change is not
// compatible: the object (a column, an index, the primary key), the
// member tables whose definitions disagree (one or two names, as given in
// Member.Name), and the reason.
type Conflict struct {
	Object string
	Tables []string
	Reason string
}

func (c *Conflict) Error() string {
	if len(c.Tables) == 0 {
		return fmt.Sprintf("%s: %s", c.Object, c.Reason)
	}
	return fmt.Sprintf("%s of %s: %s", c.Object, strings.Join(c.Tables, " and "), c.Reason)
}

// Is makes errors.Is(c, ErrIncompatible) true.
func (c *Conflict) Is(target error) bool { return target == ErrIncompatible }

// Member is one member table's schema in a join, named for messages.
type Member struct {
	Name  string
	Table *sqlschema.Table
}

func columnObject(name string) string { return "column " + sqlschema.QuoteName(name) }

func indexObject(ix *sqlschema.Index) string {
	if ix.Primary {
		return "primary key"
	}
	return "index " + sqlschema.QuoteName(ix.Name)
}

// Join returns the joined schema of members (see the package doc) or a
// *Conflict. Columns keep the order of order (the target's current joined
// schema; nil for none) and a column order lacks goes after the column
// that precedes it in the first member that has it. Indexes: the primary
// key first, then in order's order, then in the members' order. The
// result's Schema and Name are order's (empty without it); RowKey is not
// set: the joined schema describes a target, not a source.
func Join(order *sqlschema.Table, members []Member) (*sqlschema.Table, error) {
	if len(members) == 0 {
		return nil, errors.New("shardschema: join of no member table")
	}
	type colAcc struct {
		col   sqlschema.Column
		first string // the member that defined it first
		n     int    // members that have it
	}
	cols := map[string]*colAcc{}
	var names []string // lower-case names, joined order
	has := func(n string) bool { return cols[n] != nil }
	for _, m := range members {
		for i := range m.Table.Columns {
			c := &m.Table.Columns[i]
			key := strings.ToLower(c.Name)
			acc := cols[key]
			if acc == nil {
				cols[key] = &colAcc{col: *c, first: m.Name, n: 1}
				continue
			}
			joined, why := joinColumn(&acc.col, c)
			if why != "" {
				return nil, &Conflict{Object: columnObject(c.Name), Tables: []string{acc.first, m.Name}, Reason: why}
			}
			acc.col, acc.n = joined, acc.n+1
		}
	}
	if order != nil {
		for _, c := range order.Columns {
			if key := strings.ToLower(c.Name); has(key) && !slices.Contains(names, key) {
				names = append(names, key)
			}
		}
	}
	for _, m := range members {
		for i, c := range m.Table.Columns {
			key := strings.ToLower(c.Name)
			if slices.Contains(names, key) {
				continue
			}
			at := 0
			for j := i - 1; j >= 0; j-- {
				if k := slices.Index(names, strings.ToLower(m.Table.Columns[j].Name)); k >= 0 {
					at = k + 1
					break
				}
			}
			names = slices.Insert(names, at, key)
		}
	}
	out := &sqlschema.Table{}
	if order != nil {
		out.Schema, out.Name = order.Schema, order.Name
	}
	for i, key := range names {
		acc := cols[key]
		if acc.n < len(members) && !acc.col.Nullable && !acc.col.HasDefault && !acc.col.Generated {
			lacking := ""
			for _, m := range members {
				if m.Table.ColumnIndex(acc.col.Name) < 0 {
					lacking = m.Name
					break
				}
			}
			return nil, &Conflict{Object: columnObject(acc.col.Name), Tables: []string{acc.first, lacking},
				Reason: fmt.Sprintf("%s is NOT NULL without a default and %s has no such column: the target could not take its rows",
					definition(&acc.col), lacking)}
		}
		c := acc.col
		c.Ordinal = i + 1
		out.Columns = append(out.Columns, c)
	}
	ixs, err := joinIndexes(order, members)
	if err != nil {
		return nil, err
	}
	out.Indexes = ixs
	return out, nil
}

// joinColumn is the join of two definitions of one column, or why there
// is none.
func joinColumn(a, b *sqlschema.Column) (sqlschema.Column, string) {
	o, why := typeOrder(a, b)
	if o == orderNone {
		return sqlschema.Column{}, why
	}
	switch {
	case a.Charset != b.Charset:
		return sqlschema.Column{}, fmt.Sprintf("character set %s differs from %s", charsetName(a), charsetName(b))
	case a.HasDefault != b.HasDefault || a.Default != b.Default:
		if a.Nullable != b.Nullable && nullDefault(a) && nullDefault(b) {
			break // NULL and NOT NULL without default: NULL joins them
		}
		return sqlschema.Column{}, fmt.Sprintf("default %s differs from %s", defaultText(a), defaultText(b))
	case a.Generated != b.Generated:
		return sqlschema.Column{}, "one is a generated column, the other is not"
	case a.Invisible != b.Invisible:
		return sqlschema.Column{}, "one is INVISIBLE, the other is not"
	}
	out := *a
	if o == orderWider {
		out = *b
		out.Name = a.Name
	}
	if a.Nullable || b.Nullable {
		out.Nullable = true
		if nullDefault(a) && nullDefault(b) {
			out.HasDefault, out.Default = true, "NULL"
		}
	}
	return out, ""
}

// nullDefault: the column's default is NULL or, NOT NULL, it has none (a
// NOT NULL column without default that becomes nullable defaults to NULL).
func nullDefault(c *sqlschema.Column) bool {
	return (c.HasDefault && strings.EqualFold(c.Default, "NULL")) || (!c.HasDefault && !c.Nullable)
}

// joinIndexes joins the members' indexes by name.
func joinIndexes(order *sqlschema.Table, members []Member) ([]sqlschema.Index, error) {
	type ixAcc struct {
		ix    sqlschema.Index
		first string
		n     int
	}
	acc := map[string]*ixAcc{}
	var names []string
	for _, m := range members {
		for i := range m.Table.Indexes {
			ix := &m.Table.Indexes[i]
			key := strings.ToLower(ix.Name)
			a := acc[key]
			if a == nil {
				acc[key] = &ixAcc{ix: *ix, first: m.Name, n: 1}
				names = append(names, key)
				continue
			}
			if !indexEqual(&a.ix, ix) {
				return nil, &Conflict{Object: indexObject(ix), Tables: []string{a.first, m.Name},
					Reason: fmt.Sprintf("%s differs from %s", indexText(&a.ix), indexText(ix))}
			}
			a.n++
		}
	}
	rank := func(key string) int {
		if order != nil {
			for i, ix := range order.Indexes {
				if strings.EqualFold(ix.Name, key) {
					return i
				}
			}
		}
		return len(names) + slices.Index(names, key)
	}
	slices.SortStableFunc(names, func(a, b string) int {
		pa, pb := acc[a].ix.Primary, acc[b].ix.Primary
		if pa != pb {
			if pa {
				return -1
			}
			return 1
		}
		return rank(a) - rank(b)
	})
	var out []sqlschema.Index
	for _, key := range names {
		a := acc[key]
		if a.n < len(members) {
			if a.ix.Primary {
				return nil, &Conflict{Object: "primary key", Tables: []string{a.first, lacksIndex(members, key)},
					Reason: "only some of the tables have a primary key (" + indexText(&a.ix) + ")"}
			}
			if a.ix.Unique {
				continue // constrains every member's rows only once every member has it
			}
		}
		ix := a.ix
		ix.Columns = slices.Clone(ix.Columns)
		out = append(out, ix)
	}
	return out, nil
}

func lacksIndex(members []Member, key string) string {
	for _, m := range members {
		if !slices.ContainsFunc(m.Table.Indexes, func(ix sqlschema.Index) bool { return strings.EqualFold(ix.Name, key) }) {
			return m.Name
		}
	}
	return ""
}

// indexEqual compares two index definitions (not the derived Nullable).
func indexEqual(a, b *sqlschema.Index) bool {
	return strings.EqualFold(a.Name, b.Name) && a.Primary == b.Primary && a.Unique == b.Unique &&
		strings.EqualFold(a.Type, b.Type) && a.Prefix == b.Prefix &&
		slices.EqualFunc(a.Columns, b.Columns, strings.EqualFold)
}

// indexText is the index as a DDL would write it.
func indexText(ix *sqlschema.Index) string {
	cols := make([]string, len(ix.Columns))
	for i, c := range ix.Columns {
		cols[i] = sqlschema.QuoteName(c)
	}
	list := "(" + strings.Join(cols, ", ") + ")"
	switch {
	case ix.Primary:
		return "PRIMARY KEY " + list
	case ix.Unique:
		return "UNIQUE INDEX " + sqlschema.QuoteName(ix.Name) + " " + list
	case strings.EqualFold(ix.Type, "FULLTEXT"), strings.EqualFold(ix.Type, "SPATIAL"):
		return strings.ToUpper(ix.Type) + " INDEX " + sqlschema.QuoteName(ix.Name) + " " + list
	}
	return "INDEX " + sqlschema.QuoteName(ix.Name) + " " + list
}

// columnEqual compares two definitions of a column.
func columnEqual(a, b *sqlschema.Column) bool {
	o, _ := columnOrder(a, b)
	return o == orderEqual && strings.EqualFold(a.Name, b.Name)
}

// Equal reports whether a and b have the same columns (by name, in any
// order, with equal definitions) and the same indexes.
func Equal(a, b *sqlschema.Table) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.Columns) != len(b.Columns) || len(a.Indexes) != len(b.Indexes) {
		return false
	}
	for i := range a.Columns {
		j := b.ColumnIndex(a.Columns[i].Name)
		if j < 0 || !columnEqual(&a.Columns[i], &b.Columns[j]) {
			return false
		}
	}
	for i := range a.Indexes {
		ix := findIndex(b, a.Indexes[i].Name)
		if ix == nil || !indexEqual(&a.Indexes[i], ix) {
			return false
		}
	}
	return true
}

func findIndex(t *sqlschema.Table, name string) *sqlschema.Index {
	for i := range t.Indexes {
		if strings.EqualFold(t.Indexes[i].Name, name) {
			return &t.Indexes[i]
		}
	}
	return nil
}

func findColumn(t *sqlschema.Table, name string) *sqlschema.Column {
	if i := t.ColumnIndex(name); i >= 0 {
		return &t.Columns[i]
	}
	return nil
}
