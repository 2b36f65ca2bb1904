package shardschema

import (
	"errors"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

func TestJoin(t *testing.T) {
	id := func() sqlschema.Column { return col(t, "id", "int(11)", "not null") }
	base := func(extra ...sqlschema.Column) []sqlschema.Column {
		return append([]sqlschema.Column{id(), col(t, "b", "int(11)")}, extra...)
	}
	cases := []struct {
		name    string
		tables  []*sqlschema.Table
		columns string // joined columns, or the conflict's expected substrings
		indexes string
		// conflict: substrings of the *Conflict's message.
		conflict []string
	}{
		{name: "equal", tables: []*sqlschema.Table{table(base(), pk("id")), table(base(), pk("id"))},
			columns: "id int(11) NOT NULL, b int(11) NULL DEFAULT NULL", indexes: "PRIMARY"},
		{name: "a nullable column on one", tables: []*sqlschema.Table{table(base()), table(base(col(t, "c", "varchar(5)", "charset utf8mb4")))},
			columns: "id int(11) NOT NULL, b int(11) NULL DEFAULT NULL, c varchar(5) CHARACTER SET utf8mb4 NULL DEFAULT NULL"},
		{name: "column goes after its predecessor", tables: []*sqlschema.Table{
			table([]sqlschema.Column{id(), col(t, "z", "int(11)")}),
			table([]sqlschema.Column{id(), col(t, "m", "int(11)"), col(t, "z", "int(11)")})},
			columns: "id int(11) NOT NULL, m int(11) NULL DEFAULT NULL, z int(11) NULL DEFAULT NULL"},
		{name: "a first column on one", tables: []*sqlschema.Table{
			table([]sqlschema.Column{id()}), table([]sqlschema.Column{col(t, "a0", "int(11)"), id()})},
			columns: "a0 int(11) NULL DEFAULT NULL, id int(11) NOT NULL"},
		{name: "NOT NULL with default on one", tables: []*sqlschema.Table{table(base()), table(base(col(t, "c", "int(11)", "not null", "default 0")))},
			columns: "id int(11) NOT NULL, b int(11) NULL DEFAULT NULL, c int(11) NOT NULL DEFAULT 0"},
		{name: "NOT NULL without default on one", tables: []*sqlschema.Table{table(base()), table(base(col(t, "c", "int(11)", "not null")))},
			conflict: []string{"column `c` of t2 and t1", "NOT NULL without a default and t1 has no such column"}},
		{name: "generated column on one", tables: []*sqlschema.Table{table(base()), table(base(col(t, "g", "int(11)", "not null", "generated")))},
			columns: "id int(11) NOT NULL, b int(11) NULL DEFAULT NULL, g int(11) NOT NULL"},
		{name: "INT and BIGINT", tables: []*sqlschema.Table{table(base()), table([]sqlschema.Column{id(), col(t, "b", "bigint(20)")})},
			columns: "id int(11) NOT NULL, b bigint(20) NULL DEFAULT NULL"},
		{name: "BIGINT first, INT second", tables: []*sqlschema.Table{table([]sqlschema.Column{id(), col(t, "b", "bigint(20)")}), table(base())},
			columns: "id int(11) NOT NULL, b bigint(20) NULL DEFAULT NULL"},
		{name: "VARCHAR(10) and VARCHAR(20)", tables: []*sqlschema.Table{
			table([]sqlschema.Column{col(t, "v", "varchar(10)", "charset utf8mb4")}), table([]sqlschema.Column{col(t, "v", "varchar(20)", "charset utf8mb4")})},
			columns: "v varchar(20) CHARACTER SET utf8mb4 NULL DEFAULT NULL"},
		{name: "INT and VARCHAR", tables: []*sqlschema.Table{table(base()), table([]sqlschema.Column{id(), col(t, "b", "varchar(10)", "charset utf8mb4")})},
			conflict: []string{"column `b` of t1 and t2", "int(11) and varchar(10) are on no common widening ladder"}},
		{name: "signedness", tables: []*sqlschema.Table{table(base()), table([]sqlschema.Column{id(), col(t, "b", "int(10) unsigned")})},
			conflict: []string{"column `b`", "differ in signedness"}},
		{name: "DECIMAL widened", tables: []*sqlschema.Table{table([]sqlschema.Column{col(t, "d", "decimal(10,2)")}), table([]sqlschema.Column{col(t, "d", "decimal(12,2)")})},
			columns: "d decimal(12,2) NULL DEFAULT NULL"},
		{name: "DECIMAL neither wider", tables: []*sqlschema.Table{table([]sqlschema.Column{col(t, "d", "decimal(10,2)")}), table([]sqlschema.Column{col(t, "d", "decimal(10,3)")})},
			conflict: []string{"neither of decimal(10,2) and decimal(10,3) holds every value of the other"}},
		{name: "ENUM extended", tables: []*sqlschema.Table{table([]sqlschema.Column{col(t, "e", "enum('a','b')")}), table([]sqlschema.Column{col(t, "e", "enum('a','b','c')")})},
			columns: "e enum('a','b','c') NULL DEFAULT NULL"},
		{name: "ENUM reordered", tables: []*sqlschema.Table{table([]sqlschema.Column{col(t, "e", "enum('a','b')")}), table([]sqlschema.Column{col(t, "e", "enum('b','a')")})},
			conflict: []string{"neither member list extends the other"}},
		{name: "TEXT and MEDIUMTEXT, DATETIME and DATETIME(6)", tables: []*sqlschema.Table{
			table([]sqlschema.Column{col(t, "x", "text"), col(t, "d", "datetime")}),
			table([]sqlschema.Column{col(t, "x", "mediumtext"), col(t, "d", "datetime(6)")})},
			columns: "x mediumtext NULL DEFAULT NULL, d datetime(6) NULL DEFAULT NULL"},
		{name: "NULL and NOT NULL", tables: []*sqlschema.Table{table([]sqlschema.Column{col(t, "n", "int(11)", "not null")}), table([]sqlschema.Column{col(t, "n", "int(11)")})},
			columns: "n int(11) NULL DEFAULT NULL"},
		{name: "widened type, other one nullable", tables: []*sqlschema.Table{table([]sqlschema.Column{col(t, "n", "int(11)")}), table([]sqlschema.Column{col(t, "n", "bigint(20)", "not null")})},
			columns: "n bigint(20) NULL DEFAULT NULL"},
		{name: "different defaults", tables: []*sqlschema.Table{table([]sqlschema.Column{col(t, "n", "int(11)", "default 1")}), table([]sqlschema.Column{col(t, "n", "int(11)", "default 2")})},
			conflict: []string{"default 1 differs from 2"}},
		{name: "different character sets", tables: []*sqlschema.Table{
			table([]sqlschema.Column{col(t, "v", "varchar(10)", "charset latin1")}), table([]sqlschema.Column{col(t, "v", "varchar(10)", "charset utf8mb4")})},
			conflict: []string{"character set latin1 differs from utf8mb4"}},
		{name: "a non-unique index on one", tables: []*sqlschema.Table{table(base(), pk("id")), table(base(), pk("id"), idx("ib", "b"))},
			columns: "id int(11) NOT NULL, b int(11) NULL DEFAULT NULL", indexes: "PRIMARY,ib"},
		{name: "a unique index on one only", tables: []*sqlschema.Table{table(base(), pk("id")), table(base(), pk("id"), uniq("ub", "b"))},
			indexes: "PRIMARY"},
		{name: "a unique index on all", tables: []*sqlschema.Table{table(base(), uniq("ub", "b")), table(base(), uniq("ub", "b"))},
			indexes: "ub"},
		{name: "one index name, two definitions", tables: []*sqlschema.Table{table(base(), idx("i", "b")), table(base(), idx("i", "id", "b"))},
			conflict: []string{"index `i` of t1 and t2", "INDEX `i` (`b`) differs from INDEX `i` (`id`, `b`)"}},
		{name: "a primary key on some", tables: []*sqlschema.Table{table(base(), pk("id")), table(base())},
			conflict: []string{"primary key of t1 and t2", "only some of the tables have a primary key"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j, err := Join(nil, members(c.tables...))
			if c.conflict != nil {
				var conflict *Conflict
				if !errors.As(err, &conflict) || !errors.Is(err, ErrIncompatible) {
					t.Fatalf("Join = %v, %v; want a *Conflict", j, err)
				}
				for _, s := range c.conflict {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("conflict %q does not say %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Join: %v", err)
			}
			if c.columns != "" && colNames(j) != c.columns {
				t.Errorf("joined columns\n got %s\nwant %s", colNames(j), c.columns)
			}
			if c.indexes != "" && indexNames(j) != c.indexes {
				t.Errorf("joined indexes %q, want %q", indexNames(j), c.indexes)
			}
			for i, col := range j.Columns {
				if col.Ordinal != i+1 {
					t.Errorf("column %s ordinal %d, want %d", col.Name, col.Ordinal, i+1)
				}
			}
		})
	}
}

// TestJoinKeepsOrder: the old joined schema's order wins over the members'.
func TestJoinKeepsOrder(t *testing.T) {
	order := table([]sqlschema.Column{col(t, "b", "int(11)"), col(t, "a", "int(11)")}, idx("y", "a"), idx("x", "b"))
	m := table([]sqlschema.Column{col(t, "a", "int(11)"), col(t, "b", "int(11)"), col(t, "c", "int(11)")}, idx("x", "b"), idx("y", "a"), idx("z", "c"))
	j, err := Join(order, members(m))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range j.Columns {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "b,c,a" { // c after b, its predecessor in the member
		t.Errorf("columns %s, want b,c,a", got)
	}
	if got := indexNames(j); got != "y,x,z" {
		t.Errorf("indexes %s, want y,x,z", got)
	}
	if j.Schema != "s" || j.Name != "t" {
		t.Errorf("joined named %s, want order's s.t", j)
	}
	if _, err := Join(nil, nil); err == nil {
		t.Error("Join of no member succeeded")
	}
}

func TestEqual(t *testing.T) {
	a := table([]sqlschema.Column{col(t, "a", "int(11)"), col(t, "b", "int(11)")}, idx("i", "a"))
	b := table([]sqlschema.Column{col(t, "B", "int(10)"), col(t, "a", "int(11)")}, idx("I", "A"))
	if !Equal(a, b) {
		t.Error("same columns in another order, names in another case, display widths differing: not Equal")
	}
	for name, other := range map[string]*sqlschema.Table{
		"nullability": table([]sqlschema.Column{col(t, "a", "int(11)", "not null"), col(t, "b", "int(11)")}, idx("i", "a")),
		"type":        table([]sqlschema.Column{col(t, "a", "bigint(20)"), col(t, "b", "int(11)")}, idx("i", "a")),
		"index":       table([]sqlschema.Column{col(t, "a", "int(11)"), col(t, "b", "int(11)")}, idx("i", "b")),
		"no index":    table([]sqlschema.Column{col(t, "a", "int(11)"), col(t, "b", "int(11)")}),
		"column":      table([]sqlschema.Column{col(t, "a", "int(11)")}, idx("i", "a")),
	} {
		if Equal(a, other) {
			t.Errorf("Equal despite a different %s", name)
		}
	}
	if Equal(a, nil) || !Equal(nil, nil) {
		t.Error("Equal with nil")
	}
}
