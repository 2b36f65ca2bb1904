package syncer

import (
	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/filter"
)

// tableName is a schema-qualified table name.
type tableName struct {
	Schema string `json:"schema"`
	Table  string `json:"table"`
}

// String is the quoted form `schema`.`table`.
func (t tableName) String() string { return quoteName(t.Schema) + "." + quoteName(t.Table) }

// router maps source tables to target tables. Table-level rules (with a
// table pattern) win over schema-level ones; the first matching rule of a
// level wins; unmatched tables keep their names. A rule with an empty
// target-table keeps the table name and renames only the schema, so many
// source tables merge into one when target-table is set.
type router struct {
	m     filter.Matcher
	rules []config.RouteRule
}

func newRouter(rules []config.RouteRule, caseSensitive bool) *router {
	return &router{m: filter.Matcher{CaseSensitive: caseSensitive}, rules: rules}
}

// route returns the target of schema.table.
func (r *router) route(schema, table string) tableName {
	for _, rule := range r.rules {
		if rule.TablePattern != "" && r.m.Match(rule.SchemaPattern, schema) && r.m.Match(rule.TablePattern, table) {
			out := tableName{Schema: rule.TargetSchema, Table: rule.TargetTable}
			if out.Table == "" {
				out.Table = table
			}
			return out
		}
	}
	return tableName{Schema: r.routeSchema(schema), Table: table}
}

// routeSchema returns the target schema of a schema-level object (database
// DDL): the first schema-level rule's target, else the name itself.
func (r *router) routeSchema(schema string) string {
	for _, rule := range r.rules {
		if rule.TablePattern == "" && r.m.Match(rule.SchemaPattern, schema) {
			return rule.TargetSchema
		}
	}
	return schema
}
