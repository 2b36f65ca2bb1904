package syncer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/pingcap/failpoint"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions for the parser
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/unit"
)

// ddlApplier turns DDL query events into target statements and applies them
// as barriers. It belongs to one run's read loop.
type ddlApplier struct {
	r      *reader
	parser *parser.Parser
}

func newDDLApplier(r *reader) *ddlApplier { return &ddlApplier{r: r, parser: parser.New()} }

// targetDDL is one statement for the target.
type targetDDL struct {
	sql string
	// schema to USE before running sql ("" for none).
	schema string
	// ensureSchemas must exist first (CREATE DATABASE IF NOT EXISTS).
	ensureSchemas []string
}

// apply handles one query event that is not BEGIN/COMMIT: DDL of selected
// tables is routed and applied after every earlier change; anything else
// only moves the transaction boundary.
func (d *ddlApplier) apply(ctx context.Context, ev *replication.BinlogEvent, e *replication.QueryEvent, query string) error {
	r := d.r
	end := binlog.Location{Name: r.cur.Name, Pos: ev.Header.LogPos}
	start := binlog.Location{Name: r.cur.Name, Pos: ev.Header.LogPos - ev.Header.EventSize}
	stmts, err := d.translate(string(e.Schema), query)
	if err != nil {
		r.s.setStuck(&stuckDDL{start: start, end: end})
		if h := r.s.takeHandle(start, end); h != nil {
			return d.applyHandled(ctx, h, query, start, end)
		}
		var fe *filterError
		if errors.As(err, &fe) {
			return errs.New(CodeFilter, false,
				"sync: %v at binlog %s (%s); the DDL was not applied: change the rule and resume, or skip it with handle-error", fe, start, clipSQL(query))
		}
		return errs.New(CodeDDLParse, false,
			"sync: cannot parse DDL at binlog %s (%s): %w; skip or replace it with handle-error", start, clipSQL(query), err)
	}
	if len(stmts) == 0 {
		return r.commit()
	}
	if err := d.barrier(ctx, end); err != nil {
		return err
	}
	if h := r.s.takeHandle(start, end); h != nil {
		return d.applyHandled(ctx, h, query, start, end)
	}
	replay := r.pendingDDL.Name == end.Name && r.pendingDDL.Pos == end.Pos
	for _, st := range stmts {
		if err := d.exec(ctx, st); err != nil {
			code := mysqlErrorCode(err)
			if replay && ddlAlreadyDone[code] {
				r.s.logger.Info("replayed DDL had already run before a crash", zap.String("sql", st.sql), zap.Error(err))
				continue
			}
			if errs.IsResumable(err) || ctx.Err() != nil {
				return errs.Wrap(err, CodeDDL, "sync: apply DDL at binlog %s", start)
			}
			r.s.setStuck(&stuckDDL{start: start, end: end})
			return errs.New(CodeDDL, false,
				"sync: the target rejected DDL at binlog %s: %s: %w; fix the target or skip/replace the DDL with handle-error",
				start, clipSQL(st.sql), err)
		}
	}
	return d.finish(ctx, end)
}

// barrier waits for every earlier change, then saves a checkpoint before
// the DDL that names it as pending.
func (d *ddlApplier) barrier(ctx context.Context, end binlog.Location) error {
	r := d.r
	if err := r.disp.barrier(ctx); err != nil {
		return err
	}
	r.marks = r.marks[:0]
	r.marked, r.markedAt = r.boundary(), time.Now()
	return r.save(ctx, savedCheckpoint{loc: r.marked, pendingDDL: end})
}

// finish ends the DDL: the failpoint between DDL and checkpoint, cache
// invalidation, the checkpoint after it.
func (d *ddlApplier) finish(ctx context.Context, end binlog.Location) error {
	r := d.r
	failpoint.Inject("SyncCrashAfterDDL", func() {
		r.s.logger.Warn("failpoint SyncCrashAfterDDL: exiting the process", zap.Stringer("binlog", end))
		os.Exit(crashExitCode)
	})
	r.tables.invalidate()
	r.s.setStuck(nil)
	r.s.stats.ddls.Add(1)
	r.s.metrics.ddl()
	if err := r.commit(); err != nil {
		return err
	}
	r.marked = r.boundary()
	r.pendingDDL = binlog.Location{}
	return r.save(ctx, savedCheckpoint{loc: r.marked})
}

// applyHandled runs an operator's skip or replace for a stuck DDL.
func (d *ddlApplier) applyHandled(ctx context.Context, h *handleOp, query string, start, end binlog.Location) error {
	r := d.r
	if err := d.barrier(ctx, end); err != nil {
		return err
	}
	r.s.logger.Info("handle-error on DDL", zap.String("op", h.op), zap.Stringer("binlog", start),
		zap.String("ddl", clipSQL(query)), zap.Strings("sqls", h.sqls))
	if h.op == unit.HandleErrorReplace {
		for _, q := range h.sqls {
			if err := d.exec(ctx, targetDDL{sql: q}); err != nil {
				r.s.setStuck(&stuckDDL{start: start, end: end})
				return errs.Wrap(err, CodeDDL, "sync: replacement SQL for DDL at binlog %s: %s", start, clipSQL(q))
			}
		}
	}
	return d.finish(ctx, end)
}

// exec runs one target DDL on one connection.
func (d *ddlApplier) exec(ctx context.Context, st targetDDL) (err error) {
	conn, err := d.r.s.target.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, conn.Close()) }()
	for _, schema := range st.ensureSchemas {
		if _, err := conn.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+quoteName(schema)); err != nil {
			return err
		}
	}
	if st.schema != "" {
		if _, err := conn.ExecContext(ctx, "USE "+quoteName(st.schema)); err != nil {
			return err
		}
	}
	if _, err := conn.ExecContext(ctx, st.sql); err != nil {
		return err
	}
	return nil
}

// translate parses a query event and returns the statements to run on the
// target: DDL of selected tables that no filter rule ignores, with table
// names routed. Other statements (grants, views, ...) yield nothing.
func (d *ddlApplier) translate(schema, query string) ([]targetDDL, error) {
	nodes, _, err := d.parser.Parse(query, "", "")
	if err != nil {
		return nil, err
	}
	var out []targetDDL
	for _, n := range nodes {
		st, ok, err := d.translateOne(schema, query, n, len(nodes) == 1)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, st)
		}
	}
	return out, nil
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

func (d *ddlApplier) translateOne(schema, query string, node ast.StmtNode, single bool) (targetDDL, bool, error) {
	s := d.r.s
	qualify := func(t *ast.TableName) tableName {
		db := t.Schema.O
		if db == "" {
			db = schema
		}
		return tableName{Schema: db, Table: t.Name.O}
	}
	selected := func(t *ast.TableName) bool {
		n := qualify(t)
		return s.filter.tableAllowed(n.Schema, n.Table)
	}
	// kept reports whether a statement's table is replicated: selected by
	// the block-allow list and not skipped by a filter rule (an Error rule
	// makes it an error).
	kept := func(t *ast.TableName, event string) (bool, error) {
		if !selected(t) {
			return false, nil
		}
		n := qualify(t)
		skip, err := s.events.skip(n.Schema, n.Table, event, query)
		return !skip, err
	}
	var (
		event   string
		primary *ast.TableName
		dbName  string
		changed bool // the statement was narrowed or rewritten
	)
	switch n := node.(type) {
	case *ast.CreateDatabaseStmt:
		event, dbName = evCreateDatabase, n.Name.O
		if !n.IfNotExists {
			n.IfNotExists, changed = true, true
		}
	case *ast.DropDatabaseStmt:
		event, dbName = evDropDatabase, n.Name.O
	case *ast.AlterDatabaseStmt:
		event, dbName = evAlterDatabase, n.Name.O
		if n.AlterDefaultDatabase {
			dbName = schema
		}
	case *ast.CreateTableStmt:
		event, primary = evCreateTable, n.Table
	case *ast.AlterTableStmt:
		event, primary = evAlterTable, n.Table
	case *ast.TruncateTableStmt:
		event, primary = evTruncateTable, n.Table
	case *ast.CreateIndexStmt:
		event, primary = evCreateIndex, n.Table
	case *ast.DropIndexStmt:
		event, primary = evDropIndex, n.Table
	case *ast.DropTableStmt:
		if n.IsView {
			return targetDDL{}, false, nil
		}
		event = evDropTable
		tables := n.Tables[:0:0]
		for _, t := range n.Tables {
			ok, err := kept(t, event)
			if err != nil {
				return targetDDL{}, false, err
			}
			if ok {
				tables = append(tables, t)
			}
		}
		if len(tables) == 0 {
			return targetDDL{}, false, nil
		}
		changed = len(tables) != len(n.Tables)
		n.Tables = tables
		primary = tables[0]
	case *ast.RenameTableStmt:
		event = evRenameTable
		renames := n.TableToTables[:0:0]
		for _, tt := range n.TableToTables {
			ok, err := kept(tt.OldTable, event)
			if err != nil {
				return targetDDL{}, false, err
			}
			if ok {
				renames = append(renames, tt)
			}
		}
		if len(renames) == 0 {
			return targetDDL{}, false, nil
		}
		changed = len(renames) != len(n.TableToTables)
		n.TableToTables = renames
		primary = renames[0].OldTable
	default:
		return targetDDL{}, false, nil
	}

	if primary == nil {
		if !s.filter.schemaAllowed(dbName) {
			return targetDDL{}, false, nil
		}
		if skip, err := s.events.skip(dbName, "", event, query); skip || err != nil {
			return targetDDL{}, false, err
		}
		switch n := node.(type) {
		case *ast.CreateDatabaseStmt:
			n.Name, changed = ast.NewCIStr(s.router.routeSchema(dbName)), true
		case *ast.DropDatabaseStmt:
			n.Name, changed = ast.NewCIStr(s.router.routeSchema(dbName)), true
		case *ast.AlterDatabaseStmt:
			n.Name, n.AlterDefaultDatabase, changed = ast.NewCIStr(s.router.routeSchema(dbName)), false, true
		}
		return d.restore(node, query, "", changed, nil)
	}
	p := qualify(primary)
	if ok, err := kept(primary, event); !ok || err != nil {
		return targetDDL{}, false, err
	}
	if ct, ok := node.(*ast.CreateTableStmt); ok && !ct.IfNotExists {
		// Many source tables may be merged into one target table.
		if r := s.router.route(p.Schema, p.Table); r != p {
			ct.IfNotExists = true
		}
	}
	v := &tableNames{}
	node.Accept(v)
	var ensure []string
	useSchema := ""
	for _, t := range v.names {
		if t.Schema.O == "" {
			useSchema = schema
		}
		src := qualify(t)
		dst := s.router.route(src.Schema, src.Table)
		if dst != src || t.Schema.O == "" {
			changed = changed || dst != src
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
	st, ok, err := d.restore(node, query, useSchema, changed || !single, ensure)
	return st, ok, err
}

// restore returns the statement's SQL: the original text (run in schema,
// the event's default schema when the text has unqualified names) when nothing was rewritten and the event held one
// statement, else the parser's restored text with every name qualified.
func (d *ddlApplier) restore(node ast.StmtNode, query, schema string, rewritten bool, ensure []string) (targetDDL, bool, error) {
	if !rewritten {
		return targetDDL{sql: query, schema: schema, ensureSchemas: ensure}, true, nil
	}
	var b strings.Builder
	if err := node.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err != nil {
		return targetDDL{}, false, fmt.Errorf("restore routed DDL: %w", err)
	}
	return targetDDL{sql: b.String(), ensureSchemas: ensure}, true, nil
}
