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
// source tables merge into one when target-table is set. The rule that
// routes a table also gives its extend columns (Extend).
type Router struct {
	m      Matcher
	rules  []config.RouteRule
	source string
	// extract are the compiled extractors of each rule, in DM's order.
	extract [][]extractor
}

// NewRouter returns the router of rules for the subtask of source (the
// value extract-source rules read).
func NewRouter(rules []config.RouteRule, source string, caseSensitive bool) *Router {
	r := &Router{m: Matcher{CaseSensitive: caseSensitive}, rules: rules, source: source, extract: make([][]extractor, len(rules))}
	for i := range rules {
		r.extract[i] = compileExtractors(&rules[i], i)
	}
	return r
}

// rule returns the index of the rule that routes schema.table: the first
// matching table-level rule, else the first matching schema-level one; -1
// when none matches.
func (r *Router) rule(schema, table string) int {
	for i, rule := range r.rules {
		if rule.TablePattern != "" && r.m.Match(rule.SchemaPattern, schema) && r.m.Match(rule.TablePattern, table) {
			return i
		}
	}
	return r.schemaRule(schema)
}

// schemaRule returns the index of the first schema-level rule matching
// schema, -1 when none does.
func (r *Router) schemaRule(schema string) int {
	for i, rule := range r.rules {
		if rule.TablePattern == "" && r.m.Match(rule.SchemaPattern, schema) {
			return i
		}
	}
	return -1
}

// Route returns the target of schema.table.
func (r *Router) Route(schema, table string) TableName {
	i := r.rule(schema, table)
	if i < 0 {
		return TableName{Schema: schema, Table: table}
	}
	rule := &r.rules[i]
	out := TableName{Schema: rule.TargetSchema, Table: rule.TargetTable}
	if rule.TablePattern == "" || out.Table == "" {
		out.Table = table
	}
	return out
}

// RouteSchema returns the target schema of a schema-level object (database
// DDL): the first schema-level rule's target, else the name itself.
func (r *Router) RouteSchema(schema string) string {
	if i := r.schemaRule(schema); i >= 0 {
		return r.rules[i].TargetSchema
	}
	return schema
}
