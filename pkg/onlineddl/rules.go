// Package onlineddl recognises the tables of online schema change tools
// (gh-ost, pt-online-schema-change) on a source and decides what their
// DDL means for a replica of the real table (issue 26; DM's
// dm/pkg/onlineddl and dm/syncer/online-ddl-tools).
//
// Both tools change table t without locking it: they create a shadow
// table (gh-ost `_t_gho`, pt-osc `_t_new`) with t's schema, ALTER the
// shadow, copy t's rows into it while a trigger (pt-osc) or the binlog
// (gh-ost) carries the concurrent changes, then swap it in:
// `RENAME TABLE t TO _t_del, _t_gho TO t` (gh-ost; `_t_old`, `_t_new`
// for pt-osc), and drop what is left (`_t_del`, gh-ost's changelog
// `_t_ghc`). A replica that follows t needs none of this but the ALTER:
// the shadow's DDL is recorded, its rows dropped, and at the cut-over the
// recorded statements run on t.
//
// The package holds the rules that name those tables (Rules), the
// decision for one DDL statement (Tracker.Statement) and the record of a
// shadow's DDLs (Store; SQLStore keeps it in the meta schema on the
// target). It runs nothing on the target or the source itself.
package onlineddl

import (
	"fmt"
	"regexp"
)

// The default rules, DM's: the first group is the real table's name.
const (
	DefaultShadowRule = `^_(.+)_(?:new|gho)$`
	DefaultTrashRule  = `^_(.+)_(?:ghc|del|old)$`
)

// Kind is what a table is to online schema changes.
type Kind int

const (
	// Real: any table that is not a shadow or a trash table.
	Real Kind = iota
	// Shadow: the tool's copy of a real table that is altered and swapped
	// in (`_t_gho`, `_t_new`).
	Shadow
	// Trash: the tool's other tables (`_t_ghc`, `_t_del`, `_t_old`).
	Trash
)

func (k Kind) String() string {
	switch k {
	case Shadow:
		return "shadow"
	case Trash:
		return "trash"
	}
	return "real"
}

// Rules names shadow and trash tables by regular expressions whose first
// group is the real table's name.
type Rules struct {
	shadow, trash []*regexp.Regexp
}

// NewRules compiles the rules; empty lists take the defaults. A rule that
// does not compile or has no group is an error naming it.
func NewRules(shadow, trash []string) (*Rules, error) {
	if len(shadow) == 0 {
		shadow = []string{DefaultShadowRule}
	}
	if len(trash) == 0 {
		trash = []string{DefaultTrashRule}
	}
	r := &Rules{}
	for _, set := range []struct {
		what  string
		rules []string
		dst   *[]*regexp.Regexp
	}{{"shadow-table-rules", shadow, &r.shadow}, {"trash-table-rules", trash, &r.trash}} {
		for _, s := range set.rules {
			re, err := CompileRule(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", set.what, err)
			}
			*set.dst = append(*set.dst, re)
		}
	}
	return r, nil
}

// CompileRule compiles one rule: a regular expression with at least one
// group, the real table's name.
func CompileRule(s string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, fmt.Errorf("rule %q is not a regular expression: %w", s, err)
	}
	if re.NumSubexp() < 1 {
		return nil, fmt.Errorf("rule %q has no group: its first group must match the real table's name, as in %q", s, DefaultShadowRule)
	}
	return re, nil
}

// Classify says what table is and, for a shadow or trash table, the name
// of its real table. Shadow rules are tried first.
func (r *Rules) Classify(table string) (Kind, string) {
	if r == nil {
		return Real, table
	}
	for _, re := range r.shadow {
		if m := re.FindStringSubmatch(table); m != nil && m[1] != "" {
			return Shadow, m[1]
		}
	}
	for _, re := range r.trash {
		if m := re.FindStringSubmatch(table); m != nil && m[1] != "" {
			return Trash, m[1]
		}
	}
	return Real, table
}

// Online reports whether table is a shadow or trash table.
func (r *Rules) Online(table string) bool {
	k, _ := r.Classify(table)
	return k != Real
}
