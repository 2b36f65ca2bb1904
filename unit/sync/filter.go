package syncer

import (
	"fmt"
	"regexp"
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
type tableFilter struct {
	m    matcher
	list config.BAList
}

func newTableFilter(list config.BAList, caseSensitive bool) *tableFilter {
	return &tableFilter{m: matcher{caseSensitive: caseSensitive}, list: list}
}

// schemaAllowed reports whether anything in schema may be replicated.
func (f *tableFilter) schemaAllowed(schema string) bool {
	if systemSchemas[strings.ToLower(schema)] {
		return false
	}
	if len(f.list.DoDBs) > 0 || len(f.list.DoTables) > 0 {
		ok := f.m.matchAny(f.list.DoDBs, schema)
		for _, t := range f.list.DoTables {
			if !ok && f.m.match(t.DBName, schema) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return !f.m.matchAny(f.list.IgnoreDBs, schema)
}

// tableAllowed reports whether schema.table is replicated.
func (f *tableFilter) tableAllowed(schema, table string) bool {
	if !f.schemaAllowed(schema) {
		return false
	}
	restricted, listed := false, false
	for _, t := range f.list.DoTables {
		if f.m.match(t.DBName, schema) {
			restricted = true
			if f.m.match(t.TblName, table) {
				listed = true
			}
		}
	}
	// A schema allowed by do-dbs as a whole is not narrowed by do-tables.
	if restricted && !listed && !f.m.matchAny(f.list.DoDBs, schema) {
		return false
	}
	for _, t := range f.list.IgnoreTables {
		if f.m.match(t.DBName, schema) && f.m.match(t.TblName, table) {
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
	schema, table string
	events        map[string]bool
	sqls          []*regexp.Regexp
	do            bool // action Do: only matching events pass
}

// eventFilter decides whether a binlog event of a table is skipped by the
// filter rules. Ignore rules skip matching events; Do rules skip every event
// of their tables that they do not match.
type eventFilter struct {
	m     matcher
	rules []eventRule
}

func newEventFilter(rules []config.FilterRule, caseSensitive bool) (*eventFilter, error) {
	f := &eventFilter{m: matcher{caseSensitive: caseSensitive}}
	for i, r := range rules {
		er := eventRule{schema: r.SchemaPattern, table: r.TablePattern, events: map[string]bool{},
			do: strings.EqualFold(r.Action, config.FilterDo)}
		for _, e := range r.Events {
			er.events[strings.ToLower(e)] = true
		}
		for _, s := range r.SQLPattern {
			re, err := regexp.Compile("(?i)" + s)
			if err != nil {
				return nil, fmt.Errorf("filter-rules[%d]: sql-pattern %q: %w", i, s, err)
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

// skip reports whether the event (an event type above; sql is the DDL text,
// "" for row changes) on schema.table (table "" for schema-level DDL) is
// filtered out.
func (f *eventFilter) skip(schema, table, event, sql string) bool {
	for i := range f.rules {
		r := &f.rules[i]
		if !f.m.match(r.schema, schema) {
			continue
		}
		if r.table != "" && (table == "" || !f.m.match(r.table, table)) {
			continue
		}
		if r.matches(event, sql) != r.do {
			return true
		}
	}
	return false
}
