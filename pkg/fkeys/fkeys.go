// Package fkeys is what the sync unit and the precheck know about foreign
// keys: it reads a server's foreign keys from information_schema, groups
// tables that foreign keys connect, and compares a source's cascading keys
// with what its target enforces after block-allow list and routes.
//
// A server does not write the changes its cascades (ON DELETE/UPDATE CASCADE,
// SET NULL, SET DEFAULT) make to the binlog: a target only ends up with the
// source's rows when it has the same keys and applies the parent's change
// with foreign_key_checks on. The package owns no state on any server; it
// only reads.
package fkeys

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Key is one foreign key: Child's columns Cols reference Parent's RefCols.
type Key struct {
	Name          string
	Child, Parent filter.TableName
	Cols, RefCols []string
	// OnDelete and OnUpdate are the referential actions as the server
	// names them: CASCADE, SET NULL, SET DEFAULT, RESTRICT, NO ACTION.
	OnDelete, OnUpdate string
}

// Cascades reports whether a change of a parent row changes child rows
// (rather than only being refused): the changes a binlog does not hold.
func (k Key) Cascades() bool { return changesChild(k.OnDelete) || changesChild(k.OnUpdate) }

func changesChild(action string) bool {
	switch strings.ToUpper(action) {
	case "CASCADE", "SET NULL", "SET DEFAULT":
		return true
	}
	return false
}

// Actions is the key's clause as SQL writes it: "ON DELETE CASCADE ON
// UPDATE RESTRICT".
func (k Key) Actions() string { return "ON DELETE " + k.OnDelete + " ON UPDATE " + k.OnUpdate }

// String names the key for messages: "`t2_ibfk_1` (`id`) REFERENCES
// `fk`.`t1` (`id`) ON DELETE CASCADE ON UPDATE CASCADE".
func (k Key) String() string {
	return fmt.Sprintf("%s (%s) REFERENCES %s (%s) %s", sqlschema.QuoteName(k.Name), quoteList(k.Cols),
		k.Parent, quoteList(k.RefCols), k.Actions())
}

func quoteList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = sqlschema.QuoteName(c)
	}
	return strings.Join(q, ", ")
}

// Read returns the foreign keys whose child table is in one of schemas
// (every schema but the system ones when schemas is empty), sorted by
// child table and name. The keys and their columns come from
// KEY_COLUMN_USAGE, which a user with SELECT sees; their actions from
// REFERENTIAL_CONSTRAINTS, which MariaDB shows only to a user with more
// than SELECT on the table, else from the child's SHOW CREATE TABLE.
func Read(ctx context.Context, db *sql.DB, schemas []string) ([]Key, error) {
	cond := "k.TABLE_SCHEMA NOT IN " + sqlschema.SystemSchemaList()
	args := make([]any, 0, len(schemas))
	if len(schemas) > 0 {
		cond = "k.TABLE_SCHEMA IN (?" + strings.Repeat(",?", len(schemas)-1) + ")"
		for _, s := range schemas {
			args = append(args, s)
		}
	}
	keys, err := readKeys(ctx, db, "SELECT k.TABLE_SCHEMA, k.TABLE_NAME, k.CONSTRAINT_NAME, "+
		"k.REFERENCED_TABLE_SCHEMA, k.REFERENCED_TABLE_NAME, IFNULL(rc.DELETE_RULE, ''), IFNULL(rc.UPDATE_RULE, ''), "+
		"k.COLUMN_NAME, k.REFERENCED_COLUMN_NAME "+
		"FROM information_schema.KEY_COLUMN_USAGE k LEFT JOIN information_schema.REFERENTIAL_CONSTRAINTS rc "+
		"ON rc.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND rc.TABLE_NAME = k.TABLE_NAME AND rc.CONSTRAINT_NAME = k.CONSTRAINT_NAME "+
		"WHERE k.REFERENCED_TABLE_NAME IS NOT NULL AND "+cond+
		" ORDER BY k.TABLE_SCHEMA, k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION", args...)
	if err != nil {
		return nil, err
	}
	created := map[filter.TableName]string{}
	for i := range keys {
		k := &keys[i]
		if k.OnDelete != "" && k.OnUpdate != "" {
			continue
		}
		def, ok := created[k.Child]
		if !ok {
			if err := db.QueryRowContext(ctx, "SHOW CREATE TABLE "+k.Child.String()).Scan(new(string), &def); err != nil {
				return nil, fmt.Errorf("read the foreign key actions of %s: %w", k.Child, err)
			}
			created[k.Child] = def
		}
		k.OnDelete, k.OnUpdate = actionsIn(def, k.Name)
	}
	return keys, nil
}

func readKeys(ctx context.Context, db *sql.DB, query string, args ...any) (_ []Key, err error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read foreign keys from information_schema: %w", err)
	}
	defer func() { err = errors.Join(err, rows.Close()) }()
	var out []Key
	for rows.Next() {
		var k Key
		var col, ref string
		if err := rows.Scan(&k.Child.Schema, &k.Child.Table, &k.Name, &k.Parent.Schema, &k.Parent.Table,
			&k.OnDelete, &k.OnUpdate, &col, &ref); err != nil {
			return nil, fmt.Errorf("read foreign keys: %w", err)
		}
		if n := len(out); n > 0 && out[n-1].Child == k.Child && out[n-1].Name == k.Name {
			out[n-1].Cols = append(out[n-1].Cols, col)
			out[n-1].RefCols = append(out[n-1].RefCols, ref)
			continue
		}
		k.Cols, k.RefCols = []string{col}, []string{ref}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read foreign keys: %w", err)
	}
	return out, nil
}

// actionRE finds a referential action in a constraint's line of SHOW
// CREATE TABLE.
var actionRE = regexp.MustCompile(`ON (DELETE|UPDATE) (CASCADE|SET NULL|SET DEFAULT|RESTRICT|NO ACTION)`)

// actionsIn returns the actions of constraint name in a SHOW CREATE TABLE
// text; an action the text leaves out is RESTRICT, the default.
func actionsIn(def, name string) (onDelete, onUpdate string) {
	onDelete, onUpdate = "RESTRICT", "RESTRICT"
	prefix := "CONSTRAINT " + sqlschema.QuoteName(name) + " FOREIGN KEY"
	for _, line := range strings.Split(def, "\n") {
		if !strings.Contains(line, prefix) {
			continue
		}
		for _, m := range actionRE.FindAllStringSubmatch(line, -1) {
			if m[1] == "DELETE" {
				onDelete = m[2]
			} else {
				onUpdate = m[2]
			}
		}
	}
	return onDelete, onUpdate
}

// fold is the form tables are compared in: lower case, so that a server
// that folds names (lower_case_table_names) and one that does not agree.
// Two tables differing only in case then count as one, which can only
// join groups, never split one.
func fold(t filter.TableName) filter.TableName {
	return filter.TableName{Schema: strings.ToLower(t.Schema), Table: strings.ToLower(t.Table)}
}

// Groups are the connected components of the graph whose nodes are tables
// and whose edges are foreign keys (either direction; a self-reference
// makes a group of one). A table no key touches is in no group.
type Groups struct {
	of map[filter.TableName]string
}

// NewGroups groups the tables keys connect. A group's name is its
// smallest member ("schema.table", folded), so the same keys always give
// the same names.
func NewGroups(keys []Key) *Groups {
	parent := map[filter.TableName]filter.TableName{}
	var find func(t filter.TableName) filter.TableName
	find = func(t filter.TableName) filter.TableName {
		p, ok := parent[t]
		if !ok {
			parent[t] = t
			return t
		}
		if p == t {
			return t
		}
		r := find(p)
		parent[t] = r
		return r
	}
	less := func(a, b filter.TableName) bool {
		return a.Schema < b.Schema || a.Schema == b.Schema && a.Table < b.Table
	}
	for _, k := range keys {
		a, b := find(fold(k.Child)), find(fold(k.Parent))
		if a == b {
			continue
		}
		if less(b, a) {
			a, b = b, a
		}
		parent[b] = a // the smaller root stays: it names the group
	}
	g := &Groups{of: make(map[filter.TableName]string, len(parent))}
	for t := range parent {
		r := find(t)
		g.of[t] = r.Schema + "." + r.Table
	}
	return g
}

// Of returns the name of t's group; ok is false when no key touches t.
func (g *Groups) Of(t filter.TableName) (name string, ok bool) {
	if g == nil {
		return "", false
	}
	name, ok = g.of[fold(t)]
	return name, ok
}

// Problem is a cascading key of the source that the target does not
// reproduce.
type Problem struct {
	Key Key
	// Target are the routed child and parent tables.
	TargetChild, TargetParent filter.TableName
	Reason                    string
}

// Message is the problem as one sentence for a status warning or a
// precheck item.
func (p Problem) Message() string {
	return fmt.Sprintf("source table %s has foreign key %s, whose cascades the source does not write to the binlog, but %s: "+
		"rows of %s that the source's cascades change will differ on the target",
		p.Key.Child, p.Key, p.Reason, p.TargetChild)
}

// Selection is what decides where a source table's rows go.
type Selection struct {
	Allowed func(t filter.TableName) bool
	Route   func(t filter.TableName) filter.TableName
}

// Missing returns every cascading key of source (keys of the source
// server) whose child or parent is selected but that the target, whose
// keys are target and whose existing tables exist reports, does not
// reproduce: one side of the key is not replicated, or the target's
// routed child table has no key from the same columns to the routed parent
// with the same actions. A routed child table that does not exist on the
// target (yet) is not a problem. Sorted by child table and key name.
func Missing(source []Key, sel Selection, target []Key, exists func(filter.TableName) bool) []Problem {
	byChild := map[filter.TableName][]Key{}
	for _, k := range target {
		byChild[fold(k.Child)] = append(byChild[fold(k.Child)], k)
	}
	var out []Problem
	for _, k := range source {
		if !k.Cascades() {
			continue
		}
		childIn, parentIn := sel.Allowed(k.Child), sel.Allowed(k.Parent)
		if !childIn && !parentIn {
			continue
		}
		p := Problem{Key: k, TargetChild: sel.Route(k.Child), TargetParent: sel.Route(k.Parent)}
		switch {
		case !parentIn:
			p.Reason = fmt.Sprintf("its parent table %s is not replicated (block-allow list), so the parent's changes never reach the target", k.Parent)
		case !childIn:
			p.TargetChild = k.Child
			p.Reason = fmt.Sprintf("the child table itself is not replicated (block-allow list) while its parent %s is", k.Parent)
		case !exists(p.TargetChild):
			continue
		case !hasKey(byChild[fold(p.TargetChild)], k, p.TargetParent):
			p.Reason = fmt.Sprintf("target table %s has no foreign key (%s) REFERENCES %s (%s) %s",
				p.TargetChild, quoteList(k.Cols), p.TargetParent, quoteList(k.RefCols), k.Actions())
		default:
			continue
		}
		out = append(out, p)
	}
	slices.SortStableFunc(out, func(a, b Problem) int {
		return strings.Compare(a.Key.Child.String()+"\x00"+a.Key.Name, b.Key.Child.String()+"\x00"+b.Key.Name)
	})
	return out
}

// hasKey reports whether one of keys (the target child's) reproduces k:
// the same columns referencing the same columns of parent with the same
// actions.
func hasKey(keys []Key, k Key, parent filter.TableName) bool {
	for _, t := range keys {
		if fold(t.Parent) == fold(parent) && equalFold(t.Cols, k.Cols) && equalFold(t.RefCols, k.RefCols) &&
			sameAction(t.OnDelete, k.OnDelete) && sameAction(t.OnUpdate, k.OnUpdate) {
			return true
		}
	}
	return false
}

// sameAction compares referential actions; InnoDB treats RESTRICT and NO
// ACTION alike.
func sameAction(a, b string) bool {
	norm := func(s string) string {
		if s = strings.ToUpper(s); s == "NO ACTION" {
			return "RESTRICT"
		}
		return s
	}
	return norm(a) == norm(b)
}

func equalFold(a, b []string) bool {
	return slices.EqualFunc(a, b, strings.EqualFold)
}
