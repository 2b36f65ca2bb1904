package check

import (
	"context"
	"errors"
	"strings"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// checkExprFilters, in the modes that sync, binds every expression filter
// of the subtask to its table on the source, as the sync unit will: a
// rule that cannot be bound (a column type expression filters do not
// read) fails; a rule naming a column the table does not have, or a table
// the block-allow list does not select, is a warning (it filters nothing);
// a table the source does not have yet passes (its rules are bound when its
// rows come).
func (c *run) checkExprFilters(ctx context.Context, s *server, l *items) {
	if !c.syncs() || len(c.cfg.ExprFilter) == 0 {
		return
	}
	const item = "expression_filters"
	rules := filter.NewRowFilter(c.cfg.ExprFilter, c.cs)
	seen := map[filter.TableName]bool{}
	for _, r := range c.cfg.ExprFilter {
		t := filter.TableName{Schema: r.Schema, Table: r.Table}
		key := t
		if !c.cs {
			key = filter.TableName{Schema: strings.ToLower(r.Schema), Table: strings.ToLower(r.Table)}
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		names := ruleNames(rules.Rules(t.Schema, t.Table))
		if !c.selected(t.Schema, t.Table) {
			l.warn(item, t.String(), "add the table to the block-allow list or remove the rules from expression-filters",
				"expression filter(s) %s name table %s, which the task's block-allow list does not select: they filter nothing", names, t)
			continue
		}
		model, err := query(ctx, func(ctx context.Context) (*sqlschema.Table, error) {
			return sqlschema.ReadTable(ctx, s.db, t.Schema, t.Table)
		})
		switch {
		case errors.Is(err, sqlschema.ErrTableNotFound):
			l.pass(item, t.String(), "table %s of expression filter(s) %s is not on source %s yet: the rules are bound when its rows come",
				t, names, c.src.SourceID)
			continue
		case err != nil:
			l.failErr(err, item, t.String(), "give the source user SELECT on the table",
				"read table %s of expression filter(s) %s from %s: %v", t, names, s.what, err)
			continue
		}
		b, err := rules.Bind(t.Schema, t.Table, model, nil)
		if err != nil {
			l.fail(item, t.String(), "correct the rule in the task file's expression-filter", "%v", err)
			continue
		}
		for _, w := range b.Warnings() {
			l.warn(item, t.String(), "correct the rule, or ignore this if the column comes with a later DDL", "%s", w)
		}
		if len(b.Warnings()) == 0 {
			l.pass(item, t.String(), "expression filter(s) %s bind to table %s of source %s", names, t, c.src.SourceID)
		}
	}
}

// ruleNames lists rules' names, quoted, comma-separated.
func ruleNames(rules []config.ExpressionFilter) string {
	var out []string
	for _, r := range rules {
		out = append(out, `"`+r.Name+`"`)
	}
	return strings.Join(out, ", ")
}
