package filter

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Event types a filter rule names (DM's binlog event filter, lower case).
const (
	EvInsert         = "insert"
	EvUpdate         = "update"
	EvDelete         = "delete"
	EvCreateDatabase = "create database"
	EvDropDatabase   = "drop database"
	EvAlterDatabase  = "alter database"
	EvCreateTable    = "create table"
	EvDropTable      = "drop table"
	EvTruncateTable  = "truncate table"
	EvRenameTable    = "rename table"
	EvAlterTable     = "alter table"
	EvCreateIndex    = "create index"
	EvDropIndex      = "drop index"
	EvCreateView     = "create view"
	EvDropView       = "drop view"
)

// IsDMLEvent reports whether e names a row change.
func IsDMLEvent(e string) bool { return e == EvInsert || e == EvUpdate || e == EvDelete }

// eventRule is one compiled filter rule.
type eventRule struct {
	name          string // the rule's name in the task file, or filter-rules[i]
	schema, table string
	events        map[string]bool
	sqls          []*regexp.Regexp
	do            bool // action Do: only matching events pass
	fail          bool // action Error: a matching event stops the subtask
}

// EventFilter decides whether a binlog event of a table is skipped by the
// filter rules. Ignore rules skip matching events; Do rules skip every event
// of their tables that they do not match; Error rules make a matching event
// an error (DM's binlog event filter).
type EventFilter struct {
	m     Matcher
	rules []eventRule
}

// NewEventFilter compiles rules; a bad sql-pattern is an error naming its rule.
func NewEventFilter(rules []config.FilterRule, caseSensitive bool) (*EventFilter, error) {
	f := &EventFilter{m: Matcher{CaseSensitive: caseSensitive}}
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

// matches reports whether the rule names the event (by type, one of its
// finer kinds, their class, or SQL text).
func (r *eventRule) matches(event string, kinds []string, sql string) bool {
	if r.events["all"] || r.events[event] {
		return true
	}
	if IsDMLEvent(event) {
		if r.events["all dml"] {
			return true
		}
	} else {
		if r.events["all ddl"] {
			return true
		}
		class := r.events[EvIncompatibleDDLChanges]
		if class && incompatible[event] {
			return true
		}
		for _, k := range kinds {
			if r.events[k] || class && incompatible[k] {
				return true
			}
		}
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

// RuleError is an event matched by a filter rule whose action is Error.
type RuleError struct {
	rule, schema, table, event string
}

func (e *RuleError) Error() string {
	at := sqlschema.QuoteName(e.schema)
	if e.table != "" {
		at += "." + sqlschema.QuoteName(e.table)
	}
	return fmt.Sprintf("filter rule %s (action Error) matched event %q on %s", e.rule, e.event, at)
}

// Skip reports whether the event (an event type above; sql is the DDL text,
// "" for row changes) on schema.table (table "" for schema-level DDL) is
// filtered out. The first rule of the table that decides wins; a matching
// Error rule returns a *RuleError.
func (f *EventFilter) Skip(schema, table, event, sql string) (bool, error) {
	return f.SkipDDL(schema, table, event, nil, sql)
}

// SkipDDL is Skip for a DDL statement that is also of the finer kinds
// (AlterKinds): a rule naming the statement's kind, any of the finer
// kinds, or "incompatible ddl changes" when one of them is such a change,
// matches it. (DM matches only the first clause's finer kind, and not
// "alter table" then; a rule here matches every kind the statement has.)
func (f *EventFilter) SkipDDL(schema, table, event string, kinds []string, sql string) (bool, error) {
	for i := range f.rules {
		r := &f.rules[i]
		if !f.m.Match(r.schema, schema) {
			continue
		}
		if r.table != "" && (table == "" || !f.m.Match(r.table, table)) {
			continue
		}
		matched := r.matches(event, kinds, sql)
		switch {
		case r.fail && matched:
			return true, &RuleError{rule: r.name, schema: schema, table: table, event: event}
		case r.fail:
		case matched != r.do:
			return true, nil
		}
	}
	return false, nil
}
