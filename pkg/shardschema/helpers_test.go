package shardschema

import (
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// col builds a column as the reader would: nullable with default NULL
// unless opts say "not null"; opts "default X", "charset X", "generated",
// "invisible".
func col(t *testing.T, name, columnType string, opts ...string) sqlschema.Column {
	t.Helper()
	dataType := columnType
	if i := strings.IndexAny(dataType, "( "); i >= 0 {
		dataType = dataType[:i]
	}
	charset := ""
	nullable := true
	def, hasDef := "NULL", true
	var generated, invisible, explicitDef bool
	for _, o := range opts {
		switch {
		case o == "not null":
			nullable = false
		case strings.HasPrefix(o, "default "):
			def, hasDef, explicitDef = strings.TrimPrefix(o, "default "), true, true
		case strings.HasPrefix(o, "charset "):
			charset = strings.TrimPrefix(o, "charset ")
		case o == "generated":
			generated = true
		case o == "invisible":
			invisible = true
		default:
			t.Fatalf("col %s: unknown option %q", name, o)
		}
	}
	if !nullable && !explicitDef {
		def, hasDef = "", false
	}
	c, err := sqlschema.NewColumn(name, dataType, columnType, charset, nullable)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDefault(def, hasDef)
	c.Generated, c.Invisible = generated, invisible
	return c
}

func idx(name string, cols ...string) sqlschema.Index {
	return sqlschema.Index{Name: name, Columns: cols, Type: "BTREE"}
}

func uniq(name string, cols ...string) sqlschema.Index {
	ix := idx(name, cols...)
	ix.Unique = true
	return ix
}

func pk(cols ...string) sqlschema.Index {
	ix := idx("PRIMARY", cols...)
	ix.Primary, ix.Unique = true, true
	return ix
}

func table(cols []sqlschema.Column, ixs ...sqlschema.Index) *sqlschema.Table {
	for i := range cols {
		cols[i].Ordinal = i + 1
	}
	return &sqlschema.Table{Schema: "s", Name: "t", Columns: cols, Indexes: ixs}
}

func members(ts ...*sqlschema.Table) []Member {
	out := make([]Member, len(ts))
	for i, t := range ts {
		out[i] = Member{Name: "t" + string(rune('1'+i)), Table: t}
	}
	return out
}

func colNames(t *sqlschema.Table) string {
	var parts []string
	for _, c := range t.Columns {
		parts = append(parts, c.Name+" "+definitionTail(&c))
	}
	return strings.Join(parts, ", ")
}

// definitionTail is the definition without the quoted name.
func definitionTail(c *sqlschema.Column) string {
	return strings.TrimPrefix(definition(c), sqlschema.QuoteName(c.Name)+" ")
}

func indexNames(t *sqlschema.Table) string {
	var parts []string
	for _, ix := range t.Indexes {
		parts = append(parts, ix.Name)
	}
	return strings.Join(parts, ",")
}
