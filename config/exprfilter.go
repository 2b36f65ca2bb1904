package config

import (
	"maps"
	"slices"
	"strings"

	"github.com/dmworker/dm-worker/pkg/exprfilter"
)

// ExpressionFilter is one of DM's expression filters: rows of one source
// table for which its SQL expression is TRUE are not replicated (FALSE and
// NULL replicate the row). A rule filters one kind of change, as in DM:
// inserts by their row, deletes by their row, or updates by their old and
// new rows together — an update is skipped when update-old-value-expr is
// TRUE on the old row AND update-new-value-expr is TRUE on the new row, a
// missing one of the two counting as TRUE. A change is skipped when any
// rule of its table says so. Schema and table are names, not patterns;
// they compare as the subtask's case-sensitive says. The expressions are
// checked with exprfilter.Check (the supported SQL is listed in
// docs/operations.md, "Expression filters: supported SQL").
type ExpressionFilter struct {
	// Name is the rule's name in the task file's expression-filter map or
	// the stream's filters map (set when a task is split); errors name it.
	Name               string `json:"name,omitempty"`
	Schema             string `json:"schema"`
	Table              string `json:"table"`
	InsertValueExpr    string `json:"insert-value-expr,omitempty"`
	UpdateOldValueExpr string `json:"update-old-value-expr,omitempty"`
	UpdateNewValueExpr string `json:"update-new-value-expr,omitempty"`
	DeleteValueExpr    string `json:"delete-value-expr,omitempty"`
}

// Expressions are the rule's non-empty expressions with their field names,
// in the order insert, update old, update new, delete.
func (r *ExpressionFilter) Expressions() []ExprField {
	var out []ExprField
	for _, f := range []ExprField{
		{"insert-value-expr", r.InsertValueExpr},
		{"update-old-value-expr", r.UpdateOldValueExpr},
		{"update-new-value-expr", r.UpdateNewValueExpr},
		{"delete-value-expr", r.DeleteValueExpr},
	} {
		if strings.TrimSpace(f.Expr) != "" {
			out = append(out, f)
		}
	}
	return out
}

// ExprField is one expression of an ExpressionFilter and its field name.
type ExprField struct {
	Field, Expr string
}

// validate checks one rule: schema and table set, exactly one kind of
// change filtered (DM refuses a rule with several), every expression one
// the evaluator supports.
func (r *ExpressionFilter) validate(p *problems, path string) {
	if strings.TrimSpace(r.Schema) == "" {
		p.add(join(path, "schema"), r.Schema, "must name the schema of the table whose rows the rule filters")
	}
	if strings.TrimSpace(r.Table) == "" {
		p.add(join(path, "table"), r.Table, "must name the table whose rows the rule filters")
	}
	exprs := r.Expressions()
	if len(exprs) == 0 {
		p.add(path, "{}", "an expression filter needs insert-value-expr, update-old-value-expr and/or "+
			"update-new-value-expr, or delete-value-expr; a rule without one filters nothing")
	}
	var kinds []string
	for _, f := range exprs {
		kind := f.Field
		if strings.HasPrefix(kind, "update-") {
			kind = "update-old-value-expr/update-new-value-expr"
		}
		if !slices.Contains(kinds, kind) {
			kinds = append(kinds, kind)
		}
	}
	if len(kinds) > 1 {
		p.add(path, strings.Join(kinds, ", "), "a rule filters one kind of change (as in DM): "+
			"write one rule per kind, for the same schema and table")
	}
	for _, f := range exprs {
		if err := exprfilter.Check(f.Expr); err != nil {
			p.add(join(path, f.Field), f.Expr, err.Error())
		}
	}
}

// validateExprFilters checks a named map of rules (the task file's
// expression-filter, a stream's filters) under path.
func validateExprFilters(p *problems, path string, m map[string]ExpressionFilter) {
	for _, name := range slices.Sorted(maps.Keys(m)) {
		r := m[name]
		r.validate(p, join(path, name))
	}
}

// namedExprFilters are the rules of m in name order, each with its Name set.
func namedExprFilters(m map[string]ExpressionFilter) []ExpressionFilter {
	if len(m) == 0 {
		return nil
	}
	out := make([]ExpressionFilter, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		r := m[name]
		r.Name = name
		out = append(out, r)
	}
	return out
}

// StreamExprFilters are the stream's expression filters in name order,
// each with its Name set.
func (c *StreamConfig) StreamExprFilters() []ExpressionFilter { return namedExprFilters(c.Filters) }
