package filter

import (
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// rowsTable is app.t (id INT, v INT, note VARCHAR(20)) as a model.
func rowsTable(t *testing.T, cols ...string) *sqlschema.Table {
	t.Helper()
	tb := &sqlschema.Table{Schema: "app", Name: "t"}
	for _, name := range cols {
		dt, ct, cs := "int", "int(11)", ""
		if name == "note" {
			dt, ct, cs = "varchar", "varchar(20)", "utf8mb4"
		}
		c, err := sqlschema.NewColumn(name, dt, ct, cs, true)
		if err != nil {
			t.Fatal(err)
		}
		tb.Columns = append(tb.Columns, c)
	}
	return tb
}

func mustSkip(t *testing.T, what string, want bool, got bool, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got != want {
		t.Errorf("%s: skip = %v, want %v", what, got, want)
	}
}

func TestRowFilterSemantics(t *testing.T) {
	f := NewRowFilter([]config.ExpressionFilter{
		{Name: "even", Schema: "app", Table: "t", InsertValueExpr: "v % 2 = 0"},
		{Name: "big", Schema: "App", Table: "T", InsertValueExpr: "v > 100"},
		{Name: "neg-to-big", Schema: "app", Table: "t", UpdateOldValueExpr: "v < 0", UpdateNewValueExpr: "v > 100"},
		{Name: "to-secret", Schema: "app", Table: "t", UpdateNewValueExpr: "note = 'secret'"},
		{Name: "seven", Schema: "app", Table: "t", DeleteValueExpr: "v = 7"},
		{Name: "other", Schema: "app", Table: "u", DeleteValueExpr: "v = 7"},
	}, false)
	b, err := f.Bind("APP", "t", rowsTable(t, "id", "v", "note"), nil)
	if err != nil {
		t.Fatal(err)
	}
	row := func(id, v any, note any) []any { return []any{id, v, note} }
	ins := func(v any) (bool, error) { return b.SkipInsert(row(int32(1), v, "n")) }
	s, err := ins(int32(4))
	mustSkip(t, "insert v=4", true, s, err)
	s, err = ins(int32(5))
	mustSkip(t, "insert v=5", false, s, err)
	s, err = ins(int32(101)) // the second rule (names compare case-insensitively)
	mustSkip(t, "insert v=101", true, s, err)
	s, err = ins(nil) // NULL is not TRUE
	mustSkip(t, "insert v=NULL", false, s, err)

	upd := func(oldV, newV any, note string) (bool, error) {
		return b.SkipUpdate(row(int32(1), oldV, "n"), row(int32(1), newV, note))
	}
	s, err = upd(int32(-1), int32(101), "n")
	mustSkip(t, "update -1 -> 101", true, s, err)
	s, err = upd(int32(1), int32(101), "n") // old side false: AND
	mustSkip(t, "update 1 -> 101", false, s, err)
	s, err = upd(int32(-1), int32(50), "n") // new side false
	mustSkip(t, "update -1 -> 50", false, s, err)
	s, err = upd(int32(1), int32(2), "secret") // only a new side: the old one is TRUE
	mustSkip(t, "update to secret", true, s, err)

	s, err = b.SkipDelete(row(int32(3), int32(7), "n"))
	mustSkip(t, "delete v=7", true, s, err)
	s, err = b.SkipDelete(row(int32(3), int32(8), "n"))
	mustSkip(t, "delete v=8", false, s, err)
	s, err = b.Skip(EvInsert, nil, row(int32(9), int32(8), "n"))
	mustSkip(t, "Skip insert v=8", true, s, err)
	if b.Empty(EvInsert) || b.Empty(EvUpdate) || b.Empty(EvDelete) {
		t.Error("Empty reports a kind with rules as empty")
	}

	// Case-sensitive names: App.T is another table.
	cs := NewRowFilter([]config.ExpressionFilter{{Name: "big", Schema: "App", Table: "T", InsertValueExpr: "v > 100"}}, true)
	if cs.Rules("app", "t") != nil || cs.Rules("App", "T") == nil {
		t.Error("case-sensitive rules match the wrong names")
	}
	// No rules: nil, which skips nothing.
	nb, err := f.Bind("app", "none", rowsTable(t, "id"), nil)
	if nb != nil || err != nil {
		t.Fatalf("Bind of a table without rules = %v, %v", nb, err)
	}
	s, err = nb.SkipInsert([]any{int32(1)})
	mustSkip(t, "nil BoundRows", false, s, err)
	if !nb.Empty(EvInsert) || NewRowFilter(nil, false) != nil {
		t.Error("nil filters are not empty")
	}
}

// TestRowFilterShapes: the rows' columns by name, a column the model lacks
// projected away, and a rule naming a column the table does not have
// filtering nothing, with a warning naming rule, table and column.
func TestRowFilterShapes(t *testing.T) {
	f := NewRowFilter([]config.ExpressionFilter{
		{Name: "even", Schema: "app", Table: "t", InsertValueExpr: "v % 2 = 0"},
		{Name: "by-c", Schema: "app", Table: "t", InsertValueExpr: "c = 1"},
	}, false)
	// The binlog's rows are (v, gone, id); the table now is (id, v, note).
	b, err := f.Bind("app", "t", rowsTable(t, "id", "v", "note"), []string{"v", "gone", "id"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.SkipInsert([]any{int32(2), "x", int32(1)})
	mustSkip(t, "projected v=2", true, s, err)
	s, err = b.SkipInsert([]any{int32(3), "x", int32(1)})
	mustSkip(t, "projected v=3", false, s, err)
	w := strings.Join(b.Warnings(), "\n")
	for _, want := range []string{`"by-c"`, "`app`.`t`", `"c"`} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings %q do not name %s", w, want)
		}
	}
	// The names in the table's order: no projection.
	b, err = f.Bind("app", "t", rowsTable(t, "id", "v", "c"), []string{"ID", "V", "C"})
	if err != nil || b.pick != nil || len(b.Warnings()) != 0 {
		t.Fatalf("Bind = pick %v, warnings %v, %v; want no projection, no warning", b.pick, b.Warnings(), err)
	}
	s, err = b.SkipInsert([]any{int32(1), int32(3), int32(1)})
	mustSkip(t, "c=1", true, s, err)
}

// TestModelFor: each column from the first model that has it, the rest
// left out.
func TestModelFor(t *testing.T) {
	src := rowsTable(t, "id", "note")
	tgt := rowsTable(t, "id", "v", "note")
	tgt.Columns[0].ColumnType = "bigint(20)" // the source's wins
	m := ModelFor([]string{"ID", "v", "gone", "note"}, nil, src, tgt)
	var got []string
	for _, c := range m.Columns {
		got = append(got, c.Name+" "+c.ColumnType)
	}
	if strings.Join(got, ", ") != "id int(11), v int(11), note varchar(20)" || m.Schema != "app" || m.Name != "t" {
		t.Errorf("ModelFor = %s.%s %v", m.Schema, m.Name, got)
	}
}
