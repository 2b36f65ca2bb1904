package filter

import (
	"slices"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/config"
)

func TestRouterExtend(t *testing.T) {
	rules := []config.RouteRule{
		{SchemaPattern: "s*", TablePattern: "t_*", TargetSchema: "db", TargetTable: "t",
			TableExtractor:  &config.TableExtractor{TargetColumn: "c_table", TableRegexp: "t_(.*)"},
			SchemaExtractor: &config.SchemaExtractor{TargetColumn: "c_schema", SchemaRegexp: "(.*)"},
			SourceExtractor: &config.SourceExtractor{TargetColumn: "c_source", SourceRegexp: "mysql-(\\d+)-(.*)"}},
		// A schema-level rule's extractors apply to the tables it routes.
		{SchemaPattern: "s*", TargetSchema: "db",
			SchemaExtractor: &config.SchemaExtractor{TargetColumn: "c_schema", SchemaRegexp: "s(\\d+)"}},
		{SchemaPattern: "plain", TargetSchema: "p"},
	}
	r := NewRouter(rules, "mysql-01-east", false)
	tests := []struct {
		schema, table string
		target        TableName
		want          []ExtendColumn
	}{
		{"s1", "t_1", TableName{"db", "t"}, []ExtendColumn{{"c_table", "1"}, {"c_schema", "s1"}, {"c_source", "01east"}}},
		// Case-insensitive routing, case as written in the values.
		{"S2", "T_Ab", TableName{"db", "t"}, []ExtendColumn{{"c_table", ""}, {"c_schema", "S2"}, {"c_source", "01east"}}},
		{"s2", "other", TableName{"db", "other"}, []ExtendColumn{{"c_schema", "2"}}},
		{"sx", "other", TableName{"db", "other"}, []ExtendColumn{{"c_schema", ""}}},
		{"plain", "t_1", TableName{"p", "t_1"}, nil},
		{"app", "t_1", TableName{"app", "t_1"}, nil},
	}
	for _, tt := range tests {
		if got := r.Route(tt.schema, tt.table); got != tt.target {
			t.Errorf("Route(%s, %s) = %v, want %v", tt.schema, tt.table, got, tt.target)
		}
		got, err := r.Extend(tt.schema, tt.table)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Extend(%s, %s) = %v, want %v", tt.schema, tt.table, got, tt.want)
		}
	}
	if !r.HasExtend() || NewRouter(rules[2:], "s", false).HasExtend() {
		t.Error("HasExtend")
	}
	// An unvalidated bad regexp is an error naming the rule, never a silent "".
	bad := NewRouter([]config.RouteRule{{SchemaPattern: "*", TargetSchema: "x",
		TableExtractor: &config.TableExtractor{TargetColumn: "c", TableRegexp: "("}}}, "s", false)
	if _, err := bad.Extend("a", "b"); err == nil || !strings.Contains(err.Error(), "extract-table.table-regexp") {
		t.Errorf("bad regexp: %v", err)
	}
}
