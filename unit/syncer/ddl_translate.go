package syncer

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions for the parser
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/collation"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// ddlTranslator turns the text of a query event into the statements to run
// on the target: it selects the DDL of replicated tables (block-allow list,
// binlog event filters) and routes their names. It only parses and
// rewrites; it runs nothing.
type ddlTranslator struct {
	parser *parser.Parser
	// normalize: always the parser's restored text, so that the same DDL
	// of different shards reads the same (shard mode compares them).
	normalize bool
	filter    *filter.Tables
	events    *filter.EventFilter
	router    *filter.Router
	// ansiQuotes parses with sql_mode ANSI_QUOTES (names in double
	// quotes): set per query event from the sql_mode it was written with
	// (binlog.SQLMode), as DM discovers it. Such statements are always
	// restored, with backquotes, for the target.
	ansiQuotes bool
	// oldTable reads the target table a source table is routed to, as it
	// is before the statement, for the finer kinds of a MODIFY or CHANGE
	// COLUMN (filter.AlterKinds; nil or a nil result: none, as in DM when
	// it cannot read the table).
	oldTable func(routed tableName) *sqlschema.Table
	// collations, when set (collation_compatible strict), are written
	// into CREATE and ALTER statements of databases and tables that leave
	// a collation out (collation.Defaults.Adjust): the source's defaults
	// in the session of the event being translated.
	collations *collation.Defaults
	logger     *zap.Logger
}

func newDDLTranslator(tables *filter.Tables, events *filter.EventFilter, router *filter.Router) *ddlTranslator {
	return &ddlTranslator{filter: tables, events: events, router: router}
}

// pickParser readies x.parser in the current quoting mode.
func (x *ddlTranslator) pickParser() {
	if x.parser == nil {
		x.parser = parser.New()
	}
	var mode mysql.SQLMode
	if x.ansiQuotes {
		mode = mysql.ModeANSIQuotes
	}
	x.parser.SetSQLMode(mode)
}

// translate parses a query event and returns the statements to run on the
// target: DDL of selected tables that no filter rule ignores, with table
// names routed. Other statements (grants, views, ...) yield nothing.
func (x *ddlTranslator) translate(schema, query string) ([]targetDDL, error) {
	x.pickParser()
	nodes, _, err := x.parser.Parse(query, "", "")
	if err != nil {
		return nil, err
	}
	var out []targetDDL
	for _, n := range nodes {
		st, ok, err := x.translateOne(schema, query, n, len(nodes) == 1)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, st)
		}
	}
	return out, nil
}

// parse parses a query event's text.
func (x *ddlTranslator) parse(query string) ([]ast.StmtNode, error) {
	x.pickParser()
	nodes, _, err := x.parser.Parse(query, "", "")
	return nodes, err
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

// ddlStmt is what translateOne learns about a statement before routing it:
// the filter event it is, the table it is about (nil for a database
// statement, then dbName names the database) and whether it was already
// rewritten (narrowed, or IF NOT EXISTS added).
type ddlStmt struct {
	event string
	// kinds are an ALTER TABLE's finer filter kinds (filter.AlterKinds).
	kinds   []string
	primary *ast.TableName
	dbName  string
	changed bool
}

// translateOne translates one statement of a query event (single: the
// event holds only this one); ok is false when nothing is to run for it.
func (x *ddlTranslator) translateOne(schema, query string, node ast.StmtNode, single bool) (targetDDL, bool, error) {
	st, ok, err := x.classify(schema, query, node)
	if !ok || err != nil {
		return targetDDL{}, false, err
	}
	if x.collations != nil {
		changed, unknown := x.collations.Adjust(node)
		st.changed = st.changed || changed
		if len(unknown) > 0 && x.logger != nil {
			x.logger.Warn("collation_compatible strict: the source has no default collation for a character set the statement names; that part runs as written",
				zap.Strings("charsets", unknown), zap.String("sql", clipSQL(query)))
		}
	}
	if st.primary == nil {
		return x.translateDatabaseDDL(node, query, st)
	}
	return x.translateTableDDL(node, schema, query, st, single)
}

// classify names the filter event of a DDL statement and the table or
// database it is about. DROP TABLE and RENAME TABLE are narrowed to the
// tables that are kept. ok is false for a statement that is not replicated:
// not DDL, a view, or a drop or rename of no kept table.
func (x *ddlTranslator) classify(schema, query string, node ast.StmtNode) (st ddlStmt, ok bool, err error) {
	switch n := node.(type) {
	case *ast.CreateDatabaseStmt:
		st.event, st.dbName = filter.EvCreateDatabase, n.Name.O
		if !n.IfNotExists {
			n.IfNotExists, st.changed = true, true
		}
	case *ast.DropDatabaseStmt:
		st.event, st.dbName = filter.EvDropDatabase, n.Name.O
	case *ast.AlterDatabaseStmt:
		st.event, st.dbName = filter.EvAlterDatabase, n.Name.O
		if n.AlterDefaultDatabase {
			st.dbName = schema
		}
	case *ast.CreateTableStmt:
		st.event, st.primary = filter.EvCreateTable, n.Table
	case *ast.AlterTableStmt:
		st.event, st.primary = filter.EvAlterTable, n.Table
		st.kinds = filter.AlterKinds(n, func() *sqlschema.Table {
			if x.oldTable == nil {
				return nil
			}
			src := qualify(n.Table, schema)
			return x.oldTable(x.router.Route(src.Schema, src.Table))
		})
	case *ast.TruncateTableStmt:
		st.event, st.primary = filter.EvTruncateTable, n.Table
	case *ast.CreateIndexStmt:
		st.event, st.primary = filter.EvCreateIndex, n.Table
	case *ast.DropIndexStmt:
		st.event, st.primary = filter.EvDropIndex, n.Table
	case *ast.DropTableStmt:
		if n.IsView {
			return ddlStmt{}, false, nil
		}
		tables, err := keepWhere(n.Tables, func(t *ast.TableName) (bool, error) {
			return x.kept(schema, query, t, filter.EvDropTable)
		})
		if err != nil || len(tables) == 0 {
			return ddlStmt{}, false, err
		}
		st = ddlStmt{event: filter.EvDropTable, primary: tables[0], changed: len(tables) != len(n.Tables)}
		n.Tables = tables
	case *ast.RenameTableStmt:
		renames, err := keepWhere(n.TableToTables, func(tt *ast.TableToTable) (bool, error) {
			return x.kept(schema, query, tt.OldTable, filter.EvRenameTable)
		})
		if err != nil || len(renames) == 0 {
			return ddlStmt{}, false, err
		}
		st = ddlStmt{event: filter.EvRenameTable, primary: renames[0].OldTable, changed: len(renames) != len(n.TableToTables)}
		n.TableToTables = renames
	default:
		return ddlStmt{}, false, nil
	}
	return st, true, nil
}

// keepWhere returns the items keep accepts, in order, or keep's first error.
func keepWhere[T any](items []T, keep func(T) (bool, error)) ([]T, error) {
	out := items[:0:0]
	for _, it := range items {
		ok, err := keep(it)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, it)
		}
	}
	return out, nil
}

// qualify names t in full: in schema, the event's default schema, when the
// statement leaves the schema out.
func qualify(t *ast.TableName, schema string) tableName {
	db := t.Schema.O
	if db == "" {
		db = schema
	}
	return tableName{Schema: db, Table: t.Name.O}
}

// kept reports whether a statement's table is replicated: selected by
// the block-allow list and not skipped by a filter rule (an Error rule
// makes it an error).
func (x *ddlTranslator) kept(schema, query string, t *ast.TableName, event string, kinds ...string) (bool, error) {
	n := qualify(t, schema)
	if !x.filter.TableAllowed(n.Schema, n.Table) {
		return false, nil
	}
	skip, err := x.events.SkipDDL(n.Schema, n.Table, event, kinds, query)
	return !skip, err
}

// translateDatabaseDDL translates CREATE, DROP or ALTER DATABASE: nothing
// for a database the block-allow list or a filter rule leaves out, else the
// statement with the database name routed.
func (x *ddlTranslator) translateDatabaseDDL(node ast.StmtNode, query string, st ddlStmt) (targetDDL, bool, error) {
	if !x.filter.SchemaAllowed(st.dbName) {
		return targetDDL{}, false, nil
	}
	if skip, err := x.events.Skip(st.dbName, "", st.event, query); skip || err != nil {
		return targetDDL{}, false, err
	}
	routed := ast.NewCIStr(x.router.RouteSchema(st.dbName))
	switch n := node.(type) {
	case *ast.CreateDatabaseStmt:
		n.Name = routed
	case *ast.DropDatabaseStmt:
		n.Name = routed
	case *ast.AlterDatabaseStmt:
		n.Name, n.AlterDefaultDatabase = routed, false
	}
	out, ok, err := x.restore(node, query, "", true, nil)
	out.event = st.event
	return out, ok, err
}

// translateTableDDL translates a statement about st.primary: nothing when
// that table is not kept, else the statement with every table name routed.
// A CREATE TABLE whose table is routed elsewhere gets IF NOT EXISTS, since
// many source tables may be merged into one target table.
func (x *ddlTranslator) translateTableDDL(node ast.StmtNode, schema, query string, st ddlStmt, single bool) (targetDDL, bool, error) {
	if ok, err := x.kept(schema, query, st.primary, st.event, st.kinds...); !ok || err != nil {
		return targetDDL{}, false, err
	}
	if ct, ok := node.(*ast.CreateTableStmt); ok && !ct.IfNotExists {
		p := qualify(st.primary, schema)
		if r := x.router.Route(p.Schema, p.Table); r != p {
			ct.IfNotExists = true
		}
	}
	src := qualify(st.primary, schema)
	var tables []tableName
	switch n := node.(type) {
	case *ast.DropTableStmt:
		for _, t := range n.Tables {
			tables = append(tables, qualify(t, schema))
		}
	default:
		tables = []tableName{src}
	}
	extended, err := x.extendDDL(node, src) // extend.go
	if err != nil {
		return targetDDL{}, false, err
	}
	useSchema, ensure, routed := x.routeNames(node, schema, st.primary)
	out, ok, err := x.restore(node, query, useSchema, st.changed || routed || extended || !single || x.normalize, ensure)
	out.event, out.source, out.target, out.tables = st.event, src, x.router.Route(src.Schema, src.Table), tables
	return out, ok, err
}

// routeNames routes every table name of node in place, qualifying the
// unqualified ones. It returns the schema to USE if the original text is
// kept (the event's default schema when a name was unqualified), the target
// schemas that must exist first (of the created table, of a rename's new
// names) and whether any name was routed to another table.
func (x *ddlTranslator) routeNames(node ast.StmtNode, schema string, primary *ast.TableName) (useSchema string, ensure []string, routed bool) {
	v := &tableNames{}
	node.Accept(v)
	for _, t := range v.names {
		if t.Schema.O == "" {
			useSchema = schema
		}
		src := qualify(t, schema)
		dst := x.router.Route(src.Schema, src.Table)
		if dst != src || t.Schema.O == "" {
			routed = routed || dst != src
			t.Schema, t.Name = ast.NewCIStr(dst.Schema), ast.NewCIStr(dst.Table)
		}
		if _, isCreate := node.(*ast.CreateTableStmt); isCreate && t == primary {
			ensure = append(ensure, dst.Schema)
		}
		if rt, isRename := node.(*ast.RenameTableStmt); isRename {
			for _, tt := range rt.TableToTables {
				if tt.NewTable == t {
					ensure = append(ensure, dst.Schema)
				}
			}
		}
	}
	return useSchema, ensure, routed
}

// restore returns the statement's SQL: the original text (run in schema,
// the event's default schema when the text has unqualified names) when nothing was rewritten and the event held one
// statement, else the parser's restored text with every name qualified.
func (x *ddlTranslator) restore(node ast.StmtNode, query, schema string, rewritten bool, ensure []string) (targetDDL, bool, error) {
	if !rewritten && !x.ansiQuotes {
		return targetDDL{sql: query, schema: schema, ensureSchemas: ensure}, true, nil
	}
	var b strings.Builder
	if err := node.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err != nil {
		return targetDDL{}, false, fmt.Errorf("restore routed DDL: %w", err)
	}
	return targetDDL{sql: b.String(), ensureSchemas: ensure}, true, nil
}

// normalizeSQL returns the parser's restored text of one statement an
// operator wrote (handle-error replace of a shard DDL), so that it reads
// the same as the translated DDLs of the other shards.
func (x *ddlTranslator) normalizeSQL(query string) (string, error) {
	x.pickParser()
	nodes, _, err := x.parser.Parse(query, "", "")
	if err != nil {
		return "", err
	}
	if len(nodes) != 1 {
		return "", fmt.Errorf("want one statement, got %d", len(nodes))
	}
	var b strings.Builder
	if err := nodes[0].Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err != nil {
		return "", err
	}
	return b.String(), nil
}

// renameTableIn returns query, one statement whose table names are
// qualified, with every name of table from changed to to.
func renameTableIn(query string, from, to tableName) (string, error) {
	nodes, _, err := parser.New().Parse(query, "", "")
	if err != nil {
		return "", err
	}
	if len(nodes) != 1 {
		return "", fmt.Errorf("want one statement, got %d", len(nodes))
	}
	v := &tableNames{}
	nodes[0].Accept(v)
	for _, t := range v.names {
		if strings.EqualFold(t.Schema.O, from.Schema) && strings.EqualFold(t.Name.O, from.Table) {
			t.Schema, t.Name = ast.NewCIStr(to.Schema), ast.NewCIStr(to.Table)
		}
	}
	var b strings.Builder
	if err := nodes[0].Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err != nil {
		return "", err
	}
	return b.String(), nil
}
