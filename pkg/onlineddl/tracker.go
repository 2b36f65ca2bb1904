package onlineddl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
)

// Stmt is one recorded DDL of a shadow table: its text rewritten to name
// the real table (every name qualified), and the binlog location it was
// read at (a replay of the same event records nothing).
type Stmt struct {
	At  string `json:"at"`
	SQL string `json:"sql"`
}

// Record is what a shadow table of a real table went through since its
// CREATE TABLE in the binlog: its DDLs, to run on the real table at the
// cut-over.
type Record struct {
	Schema, Real, Shadow string
	Stmts                []Stmt
	// CutAt is the binlog location of the cut-over once it ran (Done):
	// the record stays for a replay of that event, and a later cut-over
	// of the real table without a new CREATE of its shadow is refused.
	CutAt string
}

// Store keeps the records across restarts. Put replaces the record of its
// (Schema, Real); Delete removes it.
type Store interface {
	Load(ctx context.Context) ([]Record, error)
	Put(ctx context.Context, r Record) error
	Delete(ctx context.Context, schema, real string) error
}

// ActionKind is what to do with a DDL statement.
type ActionKind int

const (
	// Pass: the statement is not about online schema change tables:
	// replicate it as usual.
	Pass ActionKind = iota
	// Skip: the tool's mechanics (a shadow or trash table created,
	// dropped, altered, the real table renamed away): nothing to apply.
	Skip
	// Recorded: a DDL of a shadow table, recorded for the cut-over.
	Recorded
	// CutOver: the shadow table replaced its real table: run Stmts on the
	// real table (they name it), then call Tracker.Done with the location.
	CutOver
)

// Action is the decision for one statement.
type Action struct {
	Kind         ActionKind
	Schema, Real string
	// Stmts (CutOver): the recorded DDLs, naming the real table.
	Stmts []string
	// Why says what the statement was, for logs.
	Why string
}

type recordKey struct{ schema, real string }

// Tracker follows the online schema changes of one binlog reader. It is
// not safe for concurrent use.
type Tracker struct {
	rules   *Rules
	store   Store
	records map[recordKey]*Record
}

// NewTracker loads the records of store.
func NewTracker(ctx context.Context, rules *Rules, store Store) (*Tracker, error) {
	t := &Tracker{rules: rules, store: store, records: map[recordKey]*Record{}}
	recs, err := store.Load(ctx)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		r := recs[i]
		t.records[recordKey{r.Schema, r.Real}] = &r
	}
	return t, nil
}

// Rules are the tracker's rules.
func (t *Tracker) Rules() *Rules { return t.rules }

// Pending lists the records of shadow tables not cut over yet, by name.
func (t *Tracker) Pending() []Record {
	out := make([]Record, 0, len(t.records))
	for _, r := range t.records {
		if r.CutAt == "" {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.Schema+"."+a.Real, b.Schema+"."+b.Real) })
	return out
}

// Error is a DDL of online schema change tables that cannot be followed:
// the message names the tables and the fix.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

func qname(schema, table string) string { return "`" + schema + "`.`" + table + "`" }

// Statement decides what node, one statement of a query event whose
// default schema is schema, read at binlog location at, means. It records
// shadow DDLs in the store before it returns Recorded.
func (t *Tracker) Statement(ctx context.Context, schema string, node ast.StmtNode, at string) (Action, error) {
	name := func(tn *ast.TableName) (string, string) {
		if tn.Schema.O != "" {
			return tn.Schema.O, tn.Name.O
		}
		return schema, tn.Name.O
	}
	switch n := node.(type) {
	case *ast.CreateTableStmt:
		db, tbl := name(n.Table)
		switch kind, real := t.rules.Classify(tbl); kind {
		case Shadow:
			// A new run of the tool: a stale record of an aborted one goes.
			r := Record{Schema: db, Real: real, Shadow: tbl}
			if err := t.put(ctx, r); err != nil {
				return Action{}, err
			}
			return Action{Kind: Skip, Schema: db, Real: real, Why: "shadow table " + qname(db, tbl) + " created"}, nil
		case Trash:
			return Action{Kind: Skip, Schema: db, Real: real, Why: "trash table " + qname(db, tbl) + " created"}, nil
		}
	case *ast.AlterTableStmt:
		return t.shadowDDL(ctx, schema, n.Table, node, at, "altered")
	case *ast.CreateIndexStmt:
		return t.shadowDDL(ctx, schema, n.Table, node, at, "indexed")
	case *ast.DropIndexStmt:
		return t.shadowDDL(ctx, schema, n.Table, node, at, "index dropped")
	case *ast.TruncateTableStmt:
		db, tbl := name(n.Table)
		if kind, real := t.rules.Classify(tbl); kind != Real {
			return Action{Kind: Skip, Schema: db, Real: real, Why: kind.String() + " table " + qname(db, tbl) + " truncated"}, nil
		}
	case *ast.DropTableStmt:
		online := 0
		var act Action
		for _, tn := range n.Tables {
			db, tbl := name(tn)
			kind, real := t.rules.Classify(tbl)
			if kind == Real {
				continue
			}
			online++
			act = Action{Kind: Skip, Schema: db, Real: real, Why: kind.String() + " table " + qname(db, tbl) + " dropped"}
			if r := t.records[recordKey{db, real}]; kind == Shadow && r != nil && r.Shadow == tbl {
				// The tool gave up before the cut-over.
				if err := t.delete(ctx, db, real); err != nil {
					return Action{}, err
				}
			}
		}
		switch {
		case online == 0:
		case online == len(n.Tables):
			return act, nil
		default:
			return Action{}, &Error{msg: fmt.Sprintf("online-ddl: a DROP TABLE names online schema change tables and other tables at once; "+
				"skip it with handle-error and drop the other tables on the target by hand (%s)", restoreOr(node))}
		}
	case *ast.RenameTableStmt:
		return t.rename(schema, n, at)
	}
	return Action{Kind: Pass}, nil
}

// shadowDDL records a DDL of a shadow table; trash tables' are skipped.
func (t *Tracker) shadowDDL(ctx context.Context, schema string, tn *ast.TableName, node ast.StmtNode, at, what string) (Action, error) {
	db, tbl := tn.Schema.O, tn.Name.O
	if db == "" {
		db = schema
	}
	kind, real := t.rules.Classify(tbl)
	switch kind {
	case Real:
		return Action{Kind: Pass}, nil
	case Trash:
		return Action{Kind: Skip, Schema: db, Real: real, Why: "trash table " + qname(db, tbl) + " " + what}, nil
	}
	r, ok := t.records[recordKey{db, real}]
	if !ok || r.Shadow != tbl || r.CutAt != "" {
		// Created before the task saw it: its earlier DDLs are unknown,
		// and recording the later ones alone would apply half the change.
		return Action{}, &Error{msg: fmt.Sprintf("online-ddl: DDL of shadow table %s, whose CREATE TABLE this task did not see "+
			"(the task started while the online schema change of %s ran): its DDLs cannot be replayed on %s. Let the tool finish, "+
			"then run its ALTER on the target's %s by hand and skip this DDL and the cut-over with handle-error, or start the task after the cut-over",
			qname(db, tbl), qname(db, real), qname(db, real), qname(db, real))}
	}
	for _, s := range r.Stmts {
		if s.At == at {
			return Action{Kind: Recorded, Schema: db, Real: real, Why: "replayed DDL of shadow table " + qname(db, tbl)}, nil
		}
	}
	text, err := restoreRenamed(node, schema, db, tbl, real)
	if err != nil {
		return Action{}, &Error{msg: fmt.Sprintf("online-ddl: DDL of shadow table %s cannot be rewritten for %s: %v; skip it with handle-error "+
			"and run it on the target by hand", qname(db, tbl), qname(db, real), err)}
	}
	next := *r
	next.Stmts = append(slices.Clone(r.Stmts), Stmt{At: at, SQL: text})
	if err := t.put(ctx, next); err != nil {
		return Action{}, err
	}
	return Action{Kind: Recorded, Schema: db, Real: real, Stmts: []string{text}, Why: "DDL of shadow table " + qname(db, tbl) + " recorded"}, nil
}

// rename handles RENAME TABLE: the cut-over (the real table to a trash
// name, its shadow to the real name, in one statement or two), or a
// rename the tools never make.
func (t *Tracker) rename(schema string, n *ast.RenameTableStmt, at string) (Action, error) {
	var cut *Record
	online, plain := 0, 0
	var why []string
	for _, tt := range n.TableToTables {
		odb, old := tt.OldTable.Schema.O, tt.OldTable.Name.O
		ndb, nw := tt.NewTable.Schema.O, tt.NewTable.Name.O
		if odb == "" {
			odb = schema
		}
		if ndb == "" {
			ndb = schema
		}
		ok, oreal := t.rules.Classify(old)
		nk, nreal := t.rules.Classify(nw)
		switch {
		case ok == Real && nk == Real:
			plain++
			continue
		case ok == Real && nk == Trash && odb == ndb && oreal == nreal:
			online++
			why = append(why, qname(odb, old)+" renamed to "+qname(ndb, nw))
			continue
		case ok == Shadow && nk == Real && odb == ndb && oreal == nw:
			r := t.records[recordKey{odb, oreal}]
			if r == nil || r.Shadow != old || (r.CutAt != "" && r.CutAt != at) {
				return Action{}, &Error{msg: fmt.Sprintf("online-ddl: cut-over of %s (RENAME %s TO %s), but this task did not see the shadow "+
					"table's CREATE TABLE and DDLs (it started while the online schema change ran): the target's %s would miss them. "+
					"Run the tool's ALTER on the target's %s by hand, then skip this RENAME with handle-error",
					qname(odb, oreal), qname(odb, old), qname(ndb, nw), qname(odb, oreal), qname(odb, oreal))}
			}
			online++
			cut = r
			continue
		case nk == Shadow:
			return Action{}, &Error{msg: fmt.Sprintf("online-ddl: RENAME TABLE %s TO %s renames a table to a shadow table name: no online schema "+
				"change tool does that, and its DDLs cannot be followed; skip it with handle-error (and fix the target by hand), "+
				"or change shadow-table-rules", qname(odb, old), qname(ndb, nw))}
		case ok == Shadow:
			return Action{}, &Error{msg: fmt.Sprintf("online-ddl: RENAME TABLE %s TO %s renames shadow table %s to another table than its "+
				"real table %s (DM: \"online ddls on ghost table\"): its recorded DDLs cannot be applied; skip it with handle-error "+
				"and fix the target by hand, or change shadow-table-rules", qname(odb, old), qname(ndb, nw), qname(odb, old), qname(odb, oreal))}
		default:
			return Action{}, &Error{msg: fmt.Sprintf("online-ddl: RENAME TABLE %s TO %s involves trash table names in a way no online schema change "+
				"tool does; skip it with handle-error and fix the target by hand, or change trash-table-rules", qname(odb, old), qname(ndb, nw))}
		}
	}
	switch {
	case online == 0:
		return Action{Kind: Pass}, nil
	case plain > 0:
		return Action{}, &Error{msg: "online-ddl: a RENAME TABLE renames online schema change tables and other tables at once; " +
			"skip it with handle-error and rename the other tables on the target by hand"}
	case cut == nil:
		return Action{Kind: Skip, Why: strings.Join(why, ", ")}, nil
	}
	stmts := make([]string, len(cut.Stmts))
	for i, s := range cut.Stmts {
		stmts[i] = s.SQL
	}
	return Action{Kind: CutOver, Schema: cut.Schema, Real: cut.Real, Stmts: stmts,
		Why: fmt.Sprintf("cut-over of %s: shadow table %s renamed to it", qname(cut.Schema, cut.Real), qname(cut.Schema, cut.Shadow))}, nil
}

// Done records that the cut-over of schema.real read at location at ran.
func (t *Tracker) Done(ctx context.Context, schema, real, at string) error {
	r, ok := t.records[recordKey{schema, real}]
	if !ok || r.CutAt == at {
		return nil
	}
	next := *r
	next.CutAt = at
	return t.put(ctx, next)
}

func (t *Tracker) put(ctx context.Context, r Record) error {
	if err := t.store.Put(ctx, r); err != nil {
		return fmt.Errorf("online-ddl: record the DDLs of shadow table %s: %w", qname(r.Schema, r.Shadow), err)
	}
	t.records[recordKey{r.Schema, r.Real}] = &r
	return nil
}

func (t *Tracker) delete(ctx context.Context, schema, real string) error {
	if _, ok := t.records[recordKey{schema, real}]; !ok {
		return nil
	}
	if err := t.store.Delete(ctx, schema, real); err != nil {
		return fmt.Errorf("online-ddl: delete the record of %s: %w", qname(schema, real), err)
	}
	delete(t.records, recordKey{schema, real})
	return nil
}

// tableNames collects every table name of a statement.
type tableNames struct{ names []*ast.TableName }

func (v *tableNames) Enter(n ast.Node) (ast.Node, bool) {
	if t, ok := n.(*ast.TableName); ok {
		v.names = append(v.names, t)
	}
	return n, false
}

func (v *tableNames) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// restoreRenamed restores node with every name qualified (default schema
// schema) and db.shadow renamed to db.real. It changes node.
func restoreRenamed(node ast.StmtNode, schema, db, shadow, real string) (string, error) {
	v := &tableNames{}
	node.Accept(v)
	for _, tn := range v.names {
		if tn.Schema.O == "" {
			tn.Schema = ast.NewCIStr(schema)
		}
		if tn.Schema.O == db && tn.Name.O == shadow {
			tn.Name = ast.NewCIStr(real)
		}
	}
	var b strings.Builder
	if err := node.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err != nil {
		return "", err
	}
	return b.String(), nil
}

func restoreOr(node ast.StmtNode) string {
	var b strings.Builder
	if err := node.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err != nil {
		return node.Text()
	}
	return b.String()
}
