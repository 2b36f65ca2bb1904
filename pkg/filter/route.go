package filter

import (
	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// TableName is a schema-qualified table name.
type TableName struct {
	Schema string `json:"schema"`
	Table  string `json:"table"`
}

// String is the quoted form `schema`.`table`.
func (t TableName) String() string { return sqlschema.QuoteTable(t.Schema, t.Table) }

// Router maps source tables to target tables. Table-level rules (with a
// table pattern) win over schema-level ones; the first matching rule of a
// level wins; unmatched tables keep their names. A rule with an empty
// target-table keeps the table name and renames only the schema, so many
// source tables merge into one when target-table is set.
type Router struct {
	m     Matcher
	rules []config.RouteRule
}

// NewRouter returns the router of rules.
func NewRouter(rules []config.RouteRule, caseSensitive bool) *Router {
	return &Router{m: Matcher{CaseSensitive: caseSensitive}, rules: rules}
}

// Route returns the target of schema.table.
func (r *Router) Route(schema, table string) TableName {
	for _, rule := range r.rules {
		if rule.TablePattern != "" && r.m.Match(rule.SchemaPattern, schema) && r.m.Match(rule.TablePattern, table) {
			out := TableName{Schema: rule.TargetSchema, Table: rule.TargetTable}
			if out.Table == "" {
				out.Table = table
			}
			return out
		}
	}
	return TableName{Schema: r.RouteSchema(schema), Table: table}
}

// RouteSchema returns the target schema of a schema-level object (database
// DDL): the first schema-level rule's target, else the name itself.
func (r *Router) RouteSchema(schema string) string {
	for _, rule := range r.rules {
		if rule.TablePattern == "" && r.m.Match(rule.SchemaPattern, schema) {
			return rule.TargetSchema
		}
	}
	return schema
}
