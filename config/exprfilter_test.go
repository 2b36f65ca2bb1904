package config

import (
	"encoding/json"
	"strings"
	"testing"
)

const exprTaskBase = "name: t1\ntask-mode: all\ntarget-database: {host: h}\n"

func TestExpressionFilterSplit(t *testing.T) {
	_, subs, err := CheckTaskConfig([]byte(exprTaskBase + `
mysql-instances:
  - {source-id: s1, expression-filters: [even_c, upd]}
  - {source-id: s2}
expression-filter:
  even_c: {schema: expr_filter, table: t2, insert-value-expr: "c % 2 = 0"}
  upd: {schema: expr_filter, table: t5, update-old-value-expr: "c = 1", update-new-value-expr: "c = 2"}
  unused: {schema: expr_filter, table: t5, delete-value-expr: "c > 1"}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := subs[0].ExprFilter
	if len(got) != 2 || got[0].Name != "even_c" || got[0].InsertValueExpr != "c % 2 = 0" ||
		got[1].Name != "upd" || got[1].UpdateOldValueExpr != "c = 1" || got[1].UpdateNewValueExpr != "c = 2" || got[1].Table != "t5" {
		t.Errorf("subtask 0 expression filters = %+v", got)
	}
	if len(subs[1].ExprFilter) != 0 {
		t.Errorf("subtask 1 has expression filters it did not name: %+v", subs[1].ExprFilter)
	}
	// The subtask's JSON carries them under expression-filter and reads back.
	data, err := json.Marshal(subs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"expression-filter":[{"name":"even_c","schema":"expr_filter","table":"t2","insert-value-expr":"c % 2 = 0"}`) {
		t.Errorf("subtask JSON: %s", data)
	}
	back, err := ParseSubTaskConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(subs[0]) {
		t.Errorf("round trip changed the subtask: %+v", back.ExprFilter)
	}
	c := subs[0].Clone()
	c.ExprFilter[0].InsertValueExpr = "x"
	if subs[0].ExprFilter[0].InsertValueExpr == "x" {
		t.Error("Clone shares the expression filters")
	}
}

func TestExpressionFilterValidate(t *testing.T) {
	tests := []struct {
		name, yaml string
		fields     []string
	}{
		{"unknown name", "mysql-instances: [{source-id: s1, expression-filters: [nope]}]\n",
			[]string{"mysql-instances[0].expression-filters[0]"}},
		{"listed twice", "mysql-instances: [{source-id: s1, expression-filters: [a, a]}]\nexpression-filter: {a: {schema: d, table: t, insert-value-expr: 'c > 1'}}\n",
			[]string{"mysql-instances[0].expression-filters[1]"}},
		{"empty rule", "mysql-instances: [{source-id: s1, expression-filters: [a]}]\nexpression-filter: {a: {schema: d, table: t}}\n",
			[]string{"expression-filter.a"}},
		{"no schema and table", "mysql-instances: [{source-id: s1, expression-filters: [a]}]\nexpression-filter: {a: {insert-value-expr: 'c > 1'}}\n",
			[]string{"expression-filter.a.schema", "expression-filter.a.table"}},
		{"two kinds in one rule", "mysql-instances: [{source-id: s1, expression-filters: [a]}]\nexpression-filter: {a: {schema: d, table: t, insert-value-expr: 'c > 1', delete-value-expr: 'c > 2'}}\n",
			[]string{"expression-filter.a"}},
		{"bad expressions", "mysql-instances: [{source-id: s1, expression-filters: [a, b]}]\nexpression-filter: {a: {schema: d, table: t, insert-value-expr: 'c >'}, b: {schema: d, table: t, update-new-value-expr: 'SLEEP(c) = 0'}}\n",
			[]string{"expression-filter.a.insert-value-expr", "expression-filter.b.update-new-value-expr"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseTaskConfig([]byte(exprTaskBase + tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			requireProblems(t, c.Validate(), tt.fields...)
		})
	}
	// The refusal of an unsupported function names it.
	_, _, err := CheckTaskConfig([]byte(exprTaskBase + "mysql-instances: [{source-id: s1, expression-filters: [b]}]\n" +
		"expression-filter: {b: {schema: d, table: t, insert-value-expr: 'SLEEP(c) = 0'}}\n"))
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "sleep") {
		t.Errorf("want a refusal naming SLEEP, got %v", err)
	}
}

func TestStreamExpressionFilters(t *testing.T) {
	base := "name: s\nsource-id: m\nsink: {type: file, file: {dir: d}}\n"
	c, err := ParseStreamConfig([]byte(base + "filters:\n  odd: {schema: shop, table: orders, delete-value-expr: 'id % 2 = 1'}\n" +
		"  big: {schema: shop, table: orders, insert-value-expr: 'qty > 100'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	requireProblems(t, c.Validate())
	got := c.StreamExprFilters()
	if len(got) != 2 || got[0].Name != "big" || got[1].Name != "odd" || got[1].DeleteValueExpr != "id % 2 = 1" {
		t.Errorf("stream filters = %+v", got)
	}
	d := c.Clone()
	d.Filters["x"] = ExpressionFilter{}
	if len(c.Filters) != 2 {
		t.Error("Clone shares the filters")
	}
	c, err = ParseStreamConfig([]byte(base + "filters: {bad: {schema: shop, table: '', insert-value-expr: 'qty >'}, none: {schema: a, table: b}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	requireProblems(t, c.Validate(), "filters.bad.table", "filters.bad.insert-value-expr", "filters.none")
	// A field that is no part of the rule shape is refused by name.
	if _, err := ParseStreamConfig([]byte(base + "filters: {x: {schema: a, table: b, insert-value-exp: 'c > 1'}}\n")); err == nil ||
		!strings.Contains(err.Error(), "filters.x.insert-value-exp") {
		t.Errorf("want an unknown field error, got %v", err)
	}
}
