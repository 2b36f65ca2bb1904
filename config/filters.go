package config

import (
	"fmt"
	"strings"
)

// WithSourceFilters returns the binlog event filter rules a subtask applies
// on its source, as DM does: the subtask's own rules, then the source's
// `filters` that no rule of the subtask already covers (a rule with the
// same schema-pattern and table-pattern; the task's rule wins). Unnamed
// source rules are named "source filters[i]" so that errors can name them.
// caseSensitive says how patterns compare. Neither input is modified.
func WithSourceFilters(task, source []FilterRule, caseSensitive bool) []FilterRule {
	if len(source) == 0 {
		return task
	}
	same := func(a, b string) bool {
		if caseSensitive {
			return a == b
		}
		return strings.EqualFold(a, b)
	}
	out := cloneFilters(task)
	for i, r := range source {
		covered := false
		for _, t := range task {
			if same(t.SchemaPattern, r.SchemaPattern) && same(t.TablePattern, r.TablePattern) {
				covered = true
				break
			}
		}
		if covered {
			continue
		}
		r = r.clone()
		if r.Name == "" {
			r.Name = fmt.Sprintf("source filters[%d]", i)
		}
		out = append(out, r)
	}
	return out
}
