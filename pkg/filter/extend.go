package filter

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/dmworker/dm-worker/config"
)

// ExtendColumn is one extend column (DM's extend-column) of a target
// table and the value every row of one source table gets in it.
type ExtendColumn struct {
	Name  string
	Value string
}

// extractor is a compiled extractor of a route rule.
type extractor struct {
	column string
	// of says whose name it reads: the table, the schema or the source.
	of string
	re *regexp.Regexp
	// err is the rule's bad regexp (config validation refuses it first).
	err error
}

func compileExtractors(rule *config.RouteRule, i int) []extractor {
	var out []extractor
	for _, e := range rule.Extractors() {
		x := extractor{column: e.TargetColumn, of: strings.TrimPrefix(e.Field, "extract-")}
		re, err := regexp.Compile(e.Regexp)
		if err != nil {
			x.err = fmt.Errorf("route rule %d (schema-pattern %q, table-pattern %q): %s.%s %q: %w",
				i, rule.SchemaPattern, rule.TablePattern, e.Field, e.RegexpField, e.Regexp, err)
		}
		x.re = re
		out = append(out, x)
	}
	return out
}

// Extend returns the extend columns of the target table schema.table
// routes to and the values its rows get, in DM's order (extract-table,
// extract-schema, extract-source of the routing rule); none when that rule
// has no extractor. As in DM (FetchExtendColumn), a value is the
// concatenation of the regexp's submatches in the original name (case as
// written, whatever case-sensitive says), "" when the regexp does not
// match or has no group.
func (r *Router) Extend(schema, table string) ([]ExtendColumn, error) {
	i := r.rule(schema, table)
	if i < 0 || len(r.extract[i]) == 0 {
		return nil, nil
	}
	out := make([]ExtendColumn, 0, len(r.extract[i]))
	for _, x := range r.extract[i] {
		if x.err != nil {
			return nil, x.err
		}
		name := table
		switch x.of {
		case "schema":
			name = schema
		case "source":
			name = r.source
		}
		var v strings.Builder
		if m := x.re.FindStringSubmatch(name); m != nil {
			for _, part := range m[1:] {
				v.WriteString(part)
			}
		}
		out = append(out, ExtendColumn{Name: x.column, Value: v.String()})
	}
	return out, nil
}

// HasExtend reports whether any rule has an extractor.
func (r *Router) HasExtend() bool {
	for _, xs := range r.extract {
		if len(xs) > 0 {
			return true
		}
	}
	return false
}
