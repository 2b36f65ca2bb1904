// Package filter decides which schemas and tables of a source a reader
// replicates: DM's block-allow list (Tables) and the wildcard patterns
// (Matcher) that it, route rules and event filter rules are written in.
// The sync unit, fill-history and stream tasks share it. RowFilter
// (rows.go) says which row changes DM's expression filters keep off the
// target, given a table's model.
//
// It matches names and judges row values it is given; it reads no binlog
// and opens no connection.
package filter

import (
	"regexp"
	"slices"
	"strings"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Tables applies a block-allow list (DM semantics): do-dbs and the schemas
// of do-tables allow schemas, ignore-dbs removes them; within a schema named
// by a do-tables entry only the listed tables are allowed; ignore-tables
// removes tables. An empty list allows every non-system table. A name
// starting with ~ is a regular expression (DM's block-allow list syntax,
// e.g. "~^test.*"); other names are wildcard patterns. It is immutable and
// safe for concurrent use.
type Tables struct {
	m    Matcher
	list config.BAList
	res  map[string]*regexp.Regexp // the list's ~ patterns, compiled
}

// NewTables compiles list; names compare case-sensitively when
// caseSensitive is set. Config validation refuses a ~ pattern that does not
// compile; should one get here anyway it matches nothing.
func NewTables(list config.BAList, caseSensitive bool) *Tables {
	f := &Tables{m: Matcher{CaseSensitive: caseSensitive}, list: list, res: map[string]*regexp.Regexp{}}
	add := func(p string) {
		expr, ok := strings.CutPrefix(p, "~")
		if !ok {
			return
		}
		if !caseSensitive {
			expr = "(?i)" + expr
		}
		re, err := regexp.Compile(expr)
		if err == nil {
			f.res[p] = re
		}
	}
	for _, p := range list.DoDBs {
		add(p)
	}
	for _, p := range list.IgnoreDBs {
		add(p)
	}
	for _, t := range append(slices.Clone(list.DoTables), list.IgnoreTables...) {
		add(t.DBName)
		add(t.TblName)
	}
	return f
}

// match compares a name with one pattern of the list.
func (f *Tables) match(pattern, name string) bool {
	if strings.HasPrefix(pattern, "~") {
		re := f.res[pattern]
		return re != nil && re.MatchString(name)
	}
	return f.m.Match(pattern, name)
}

func (f *Tables) matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if f.match(p, name) {
			return true
		}
	}
	return false
}

// SchemaAllowed reports whether anything in schema may be replicated.
func (f *Tables) SchemaAllowed(schema string) bool {
	if sqlschema.IsSystemSchema(schema) { // never replicated, whatever the list says
		return false
	}
	if len(f.list.DoDBs) > 0 || len(f.list.DoTables) > 0 {
		ok := f.matchAny(f.list.DoDBs, schema)
		for _, t := range f.list.DoTables {
			if !ok && f.match(t.DBName, schema) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return !f.matchAny(f.list.IgnoreDBs, schema)
}

// TableAllowed reports whether schema.table is replicated.
func (f *Tables) TableAllowed(schema, table string) bool {
	if !f.SchemaAllowed(schema) {
		return false
	}
	restricted, listed := false, false
	for _, t := range f.list.DoTables {
		if f.match(t.DBName, schema) {
			restricted = true
			if f.match(t.TblName, table) {
				listed = true
			}
		}
	}
	// A schema allowed by do-dbs as a whole is not narrowed by do-tables.
	if restricted && !listed && !f.matchAny(f.list.DoDBs, schema) {
		return false
	}
	for _, t := range f.list.IgnoreTables {
		if f.match(t.DBName, schema) && f.match(t.TblName, table) {
			return false
		}
	}
	return true
}
