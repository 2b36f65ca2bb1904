package filter

import (
	"testing"

	"github.com/dmworker/dm-worker/config"
)

func TestRouter(t *testing.T) {
	rules := []config.RouteRule{
		{SchemaPattern: "shard_*", TablePattern: "orders_*", TargetSchema: "merged", TargetTable: "orders"},
		{SchemaPattern: "shard_*", TargetSchema: "merged"},
		{SchemaPattern: "Legacy", TablePattern: "t", TargetSchema: "modern"},
	}
	tests := []struct {
		name          string
		caseSensitive bool
		schema, table string
		want          TableName
	}{
		{"merge", false, "shard_1", "orders_7", TableName{Schema: "merged", Table: "orders"}},
		{"schema rename keeps table", false, "shard_2", "users", TableName{Schema: "merged", Table: "users"}},
		{"table rule with empty target table", false, "legacy", "t", TableName{Schema: "modern", Table: "t"}},
		{"case-sensitive miss", true, "legacy", "t", TableName{Schema: "legacy", Table: "t"}},
		{"unmatched", false, "app", "orders_1", TableName{Schema: "app", Table: "orders_1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRouter(rules, "s1", tt.caseSensitive)
			if got := r.Route(tt.schema, tt.table); got != tt.want {
				t.Fatalf("route(%q, %q) = %v, want %v", tt.schema, tt.table, got, tt.want)
			}
		})
	}
	if got := NewRouter(rules, "s1", false).RouteSchema("shard_3"); got != "merged" {
		t.Fatalf("routeSchema(shard_3) = %q, want merged", got)
	}
}
