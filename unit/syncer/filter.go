package syncer

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/filter"
)

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
	m     filter.Matcher
	rules []eventRule
}

func newEventFilter(rules []config.FilterRule, caseSensitive bool) (*eventFilter, error) {
	f := &eventFilter{m: filter.Matcher{CaseSensitive: caseSensitive}}
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
		if !f.m.Match(r.schema, schema) {
			continue
		}
		if r.table != "" && (table == "" || !f.m.Match(r.table, table)) {
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
