package syncer

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
		want          tableName
	}{
		{"merge", false, "shard_1", "orders_7", tableName{"merged", "orders"}},
		{"schema rename keeps table", false, "shard_2", "users", tableName{"merged", "users"}},
		{"table rule with empty target table", false, "legacy", "t", tableName{"modern", "t"}},
		{"case-sensitive miss", true, "legacy", "t", tableName{"legacy", "t"}},
		{"unmatched", false, "app", "orders_1", tableName{"app", "orders_1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRouter(rules, tt.caseSensitive)
			if got := r.route(tt.schema, tt.table); got != tt.want {
				t.Fatalf("route(%q, %q) = %v, want %v", tt.schema, tt.table, got, tt.want)
			}
		})
	}
	if got := newRouter(rules, false).routeSchema("shard_3"); got != "merged" {
		t.Fatalf("routeSchema(shard_3) = %q, want merged", got)
	}
}
