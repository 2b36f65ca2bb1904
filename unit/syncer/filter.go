package syncer

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/dmworker/dm-worker/config"
)

// systemSchemas are never replicated, whatever the block-allow list says.
var systemSchemas = map[string]bool{
	"mysql": true, "information_schema": true, "performance_schema": true, "sys": true,
}

// tableFilter applies a block-allow list (DM semantics): do-dbs and the
// schemas of do-tables allow schemas, ignore-dbs removes them; within a
// schema named by a do-tables entry only the listed tables are allowed;
// ignore-tables removes tables. An empty list allows every non-system table.
// A name starting with ~ is a regular expression (DM's block-allow list
// syntax, e.g. "~^test.*"); other names are wildcard patterns.
type tableFilter struct {
	m    matcher
	list config.BAList
	res  map[string]*regexp.Regexp // the list's ~ patterns, compiled
}

func newTableFilter(list config.BAList, caseSensitive bool) *tableFilter {
	f := &tableFilter{m: matcher{caseSensitive: caseSensitive}, list: list, res: map[string]*regexp.Regexp{}}
	add := func(p string) {
		expr, ok := strings.CutPrefix(p, "~")
		if !ok {
			return
		}
		if !caseSensitive {
			expr = "(?i)" + expr
		}
		// Config validation refuses a pattern that does not compile; should
		// one get here anyway it matches nothing.
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
func (f *tableFilter) match(pattern, name string) bool {
	if strings.HasPrefix(pattern, "~") {
		re := f.res[pattern]
		return re != nil && re.MatchString(name)
	}
	return f.m.match(pattern, name)
}

func (f *tableFilter) matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if f.match(p, name) {
			return true
		}
	}
	return false
}

// schemaAllowed reports whether anything in schema may be replicated.
func (f *tableFilter) schemaAllowed(schema string) bool {
	if systemSchemas[strings.ToLower(schema)] {
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

// tableAllowed reports whether schema.table is replicated.
func (f *tableFilter) tableAllowed(schema, table string) bool {
	if !f.schemaAllowed(schema) {
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

// Event types a filter rule names (DM's binlog event filter, lower case).
const (
	evInsert         = "insert"
	evUpdate         = "update"
	evDelete         = "delete"
	evCreateDatabase = "create database"
	evDropDatabase   = "drop database"
	evAlterDatabase  = "alter database"
	evCreateTable    = "create table"
	evDropTable      = "drop table"
	evTruncateTable  = "truncate table"
	evRenameTable    = "rename table"
	evAlterTable     = "alter table"
	evCreateIndex    = "create index"
	evDropIndex      = "drop index"
	evCreateView     = "create view"
	evDropView       = "drop view"
)

func isDMLEvent(e string) bool { return e == evInsert || e == evUpdate || e == evDelete }

// eventRule is one compiled filter rule.
type eventRule struct {
	name          string // the rule's name in the task file, or filter-rules[i]
	schema, table string
	events        map[string]bool
	sqls          []*regexp.Regexp
	do            bool // action Do: only matching events pass
	fail          bool // action Error: a matching event stops the subtask
}

// eventFilter decides whether a binlog event of a table is skipped by the
// filter rules. Ignore rules skip matching events; Do rules skip every event
// of their tables that they do not match; Error rules make a matching event
// an error (DM's binlog event filter).
type eventFilter struct {
	m     matcher
	rules []eventRule
}

func newEventFilter(rules []config.FilterRule, caseSensitive bool) (*eventFilter, error) {
	f := &eventFilter{m: matcher{caseSensitive: caseSensitive}}
	for i, r := range rules {
		er := eventRule{name: r.Name, schema: r.SchemaPattern, table: r.TablePattern, events: map[string]bool{},
			do: strings.EqualFold(r.Action, config.FilterDo), fail: strings.EqualFold(r.Action, config.FilterError)}
		if er.name == "" {
			er.name = fmt.Sprintf("filter-rules[%d]", i)
		}
		for _, e := range r.Events {
			er.events[strings.ToLower(e)] = true
		}
		for _, s := range r.SQLPattern {
			re, err := regexp.Compile("(?i)" + s)
			if err != nil {
				return nil, fmt.Errorf("filter rule %s: sql-pattern %q: %w", er.name, s, err)
			}
			er.sqls = append(er.sqls, re)
		}
		f.rules = append(f.rules, er)
	}
	return f, nil
}

// matches reports whether the rule names the event (by type or SQL text).
func (r *eventRule) matches(event, sql string) bool {
	if r.events["all"] || r.events[event] {
		return true
	}
	if isDMLEvent(event) && r.events["all dml"] {
		return true
	}
	if !isDMLEvent(event) && r.events["all ddl"] {
		return true
	}
	if sql != "" {
		for _, re := range r.sqls {
			if re.MatchString(sql) {
				return true
			}
		}
	}
	return false
}

// filterError is an event matched by a filter rule whose action is Error.
type filterError struct {
	rule, schema, table, event string
}

func (e *filterError) Error() string {
	at := quoteName(e.schema)
	if e.table != "" {
		at += "." + quoteName(e.table)
	}
	return fmt.Sprintf("filter rule %s (action Error) matched event %q on %s", e.rule, e.event, at)
}

// skip reports whether the event (an event type above; sql is the DDL text,
// "" for row changes) on schema.table (table "" for schema-level DDL) is
// filtered out. The first rule of the table that decides wins; a matching
// Error rule returns a *filterError.
func (f *eventFilter) skip(schema, table, event, sql string) (bool, error) {
	for i := range f.rules {
		r := &f.rules[i]
		if !f.m.match(r.schema, schema) {
			continue
		}
		if r.table != "" && (table == "" || !f.m.match(r.table, table)) {
			continue
		}
		matched := r.matches(event, sql)
		switch {
		case r.fail && matched:
			return true, &filterError{rule: r.name, schema: schema, table: table, event: event}
		case r.fail:
		case matched != r.do:
			return true, nil
		}
	}
	return false, nil
}
