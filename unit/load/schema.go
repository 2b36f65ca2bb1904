package load

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions for the parser

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/extendcol"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// tablePlan is how one dumped table is loaded.
type tablePlan struct {
	index  int // in the manifest's Tables
	source filter.TableName
	target filter.TableName
	// skipRows: a filter rule ignores the table's inserts; its chunks are
	// recorded without loading them.
	skipRows bool
	// columns is LOAD DATA's column list and SET clause.
	columns string
	// insertColumns is INSERT's column list; numeric marks the fields
	// that go in as numbers (BIT, YEAR).
	insertColumns string
	numeric       []bool
	// extend are the extend columns of the target and this table's values
	// (route extractors); insertExtend is their INSERT text, ",'v1',...".
	extend       []filter.ExtendColumn
	insertExtend string
	// indexes are the target table's deferred secondary indexes (index.go),
	// shared by every plan routed to it; nil when none is deferred.
	indexes *tableIndexes
}

// prepareTables creates the routed schemas and tables of m on the target
// (or checks the existing ones) and returns the plan of every table, in
// the order of m.Tables.
func (l *Loader) prepareTables(ctx context.Context, m *dumpfile.Manifest) ([]tablePlan, error) {
	p := parser.New()
	var err error
	if l.coll, err = l.collations(m); err != nil {
		return nil, err
	}
	created := map[string]bool{}
	for _, s := range m.Schemas {
		if err := l.createSchema(ctx, p, s, l.router.RouteSchema(s.Name), created); err != nil {
			return nil, err
		}
	}
	schemaSQL := map[string]dumpfile.Schema{}
	for _, s := range m.Schemas {
		schemaSQL[s.Name] = s
	}
	plans := make([]tablePlan, len(m.Tables))
	create := make([]bool, len(m.Tables))
	for i := range m.Tables {
		t := &m.Tables[i]
		src := filter.TableName{Schema: t.Schema, Table: t.Name}
		plan := tablePlan{index: i, source: src, target: l.router.Route(t.Schema, t.Name)}
		plan.columns, plan.insertColumns, plan.numeric = loadColumns(t.Columns)
		ext, err := l.router.Extend(t.Schema, t.Name)
		if err != nil {
			return nil, errs.New(CodeLoadConfig, false, "load: table %s: %w", src, err)
		}
		plan.setExtend(ext)
		skipCreate, err := l.events.Skip(t.Schema, t.Name, filter.EvCreateTable, t.CreateSQL)
		if err != nil {
			return nil, filterError(err, src)
		}
		if plan.skipRows, err = l.events.Skip(t.Schema, t.Name, filter.EvInsert, ""); err != nil {
			return nil, filterError(err, src)
		}
		if !skipCreate {
			s, ok := schemaSQL[t.Schema]
			if !ok {
				s = dumpfile.Schema{Name: t.Schema}
			}
			if err := l.createSchema(ctx, p, s, plan.target.Schema, created); err != nil {
				return nil, err
			}
		}
		plans[i], create[i] = plan, !skipCreate
	}
	createSQL, err := l.deferIndexes(ctx, m, plans, create)
	if err != nil {
		return nil, err
	}
	// Tables are created and checked on several connections at once: each
	// CREATE TABLE waits for its own fsyncs, which add up over many tables.
	// Shards merged into one table race harmlessly (IF NOT EXISTS).
	err = l.eachTable(ctx, len(m.Tables), func(ctx context.Context, i int, p *parser.Parser) error {
		t := &m.Tables[i]
		if create[i] {
			if err := l.createTable(ctx, p, t, createSQL[i], plans[i].target, plans[i].extend); err != nil {
				return err
			}
		}
		return l.checkColumns(ctx, t, plans[i].target, !create[i], plans[i].extend)
	})
	if err != nil {
		return nil, err
	}
	return plans, nil
}

// eachTable runs fn for table indexes 0..n-1 on up to pool-size
// goroutines (each with its own parser) and returns the first error; the
// others stop at their next table then.
func (l *Loader) eachTable(ctx context.Context, n int, fn func(ctx context.Context, i int, p *parser.Parser) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range min(l.cfg.Loader.PoolSize, n) {
		wg.Go(func() {
			p := parser.New()
			for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				if err := fn(ctx, i, p); err != nil {
					once.Do(func() { first = err })
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// filterError turns a filter rule's Error action into the unit's error.
func filterError(err error, src filter.TableName) error {
	var re *filter.RuleError
	if errors.As(err, &re) {
		return errs.New(CodeLoadFilterError, false, "load: table %s: %w; change the rule or the block-allow list to load the table", src, err)
	}
	return errs.New(CodeLoadFilterError, false, "load: table %s: %w", src, err)
}

// createSchema creates target, a routed schema of source schema s, with s's
// options unless a filter rule skips the creation of s or target was
// created already.
func (l *Loader) createSchema(ctx context.Context, p *parser.Parser, s dumpfile.Schema, target string, created map[string]bool) error {
	if created[target] {
		return nil
	}
	skip, err := l.events.Skip(s.Name, "", filter.EvCreateDatabase, s.CreateSQL)
	if err != nil {
		return filterError(err, filter.TableName{Schema: s.Name})
	}
	if skip {
		return nil
	}
	cd := &ast.CreateDatabaseStmt{}
	if stmt, err := p.ParseOneStmt(s.CreateSQL, "", ""); err == nil {
		if parsed, ok := stmt.(*ast.CreateDatabaseStmt); ok {
			cd = parsed
		}
	}
	cd.Name, cd.IfNotExists = ast.NewCIStr(target), true
	l.adjustCollations(cd, s.CreateSQL)
	q := "CREATE DATABASE IF NOT EXISTS " + sqlschema.QuoteName(target)
	var b strings.Builder
	if err := cd.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err == nil {
		q = b.String()
	}
	if _, err := l.db.ExecContext(ctx, q); err != nil {
		return errs.Wrap(err, CodeLoadSchema, "load: create database %s on the target (%s)", sqlschema.QuoteName(target), q)
	}
	created[target] = true
	return nil
}

// createTable creates target from createSQL (the source table's CREATE
// TABLE, less its deferred indexes) unless it exists; with extend columns,
// the merged table's (extendCreateTable).
func (l *Loader) createTable(ctx context.Context, p *parser.Parser, t *dumpfile.Table, createSQL string, target filter.TableName, ext []filter.ExtendColumn) error {
	q, err := renameCreateTable(p, createSQL, t.Name, target)
	if len(ext) > 0 {
		q, err = extendCreateTable(p, t.CreateSQL, target, ext)
	}
	if err == nil && l.coll != nil {
		q, err = l.adjustCreateTable(p, q)
	}
	if err != nil {
		return errs.New(CodeLoadSchema, false, "load: table %s: %w", filter.TableName{Schema: t.Schema, Table: t.Name}, err)
	}
	if _, err := l.db.ExecContext(ctx, q); err != nil {
		return errs.Wrap(err, CodeLoadSchema, "load: create table %s on the target for source table %s",
			target, filter.TableName{Schema: t.Schema, Table: t.Name})
	}
	return nil
}

// renameCreateTable turns a source's SHOW CREATE TABLE into CREATE TABLE
// IF NOT EXISTS of target. The server's own text is kept byte for byte
// when it starts the way MariaDB and MySQL print it ("CREATE TABLE `name`
// "), since the parser's restored text drops options only MariaDB knows;
// otherwise the TiDB parser renames the table and restores the statement.
func renameCreateTable(p *parser.Parser, createSQL, name string, target filter.TableName) (string, error) {
	prefix := "CREATE TABLE " + sqlschema.QuoteName(name) + " "
	if strings.HasPrefix(createSQL, prefix) {
		return "CREATE TABLE IF NOT EXISTS " + target.String() + " " + createSQL[len(prefix):], nil
	}
	stmt, err := p.ParseOneStmt(createSQL, "", "")
	if err != nil {
		return "", fmt.Errorf("parse the dumped CREATE TABLE: %w", err)
	}
	ct, ok := stmt.(*ast.CreateTableStmt)
	if !ok {
		return "", fmt.Errorf("the dumped CREATE TABLE is a %T, not CREATE TABLE", stmt)
	}
	ct.Table.Schema, ct.Table.Name = ast.NewCIStr(target.Schema), ast.NewCIStr(target.Table)
	ct.IfNotExists = true
	var b strings.Builder
	if err := ct.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err != nil {
		return "", fmt.Errorf("restore the renamed CREATE TABLE: %w", err)
	}
	return b.String(), nil
}

// checkColumns compares target's columns (generated ones left out) with the
// dumped columns of t: the same names in the same order and the same
// types. A missing table is an error too (a filter rule skipped its
// creation when skipped is set).
func (l *Loader) checkColumns(ctx context.Context, t *dumpfile.Table, target filter.TableName, skipped bool, ext []filter.ExtendColumn) error {
	src := filter.TableName{Schema: t.Schema, Table: t.Name}
	have, extendDiffs, err := targetColumns(ctx, l.db, target, t.Columns, ext)
	if err != nil {
		return errs.Wrap(err, CodeLoadSchema, "load: read the columns of target table %s", target)
	}
	if len(have) == 0 {
		why := "it was not created"
		if skipped {
			why = "a filter rule skips its create table event"
		}
		return errs.New(CodeLoadSchema, false, "load: target table %s for source table %s does not exist (%s); create it on the target",
			target, src, why)
	}
	diffs := extendDiffs
	for i := 0; i < max(len(have), len(t.Columns)); i++ {
		switch {
		case i >= len(have):
			diffs = append(diffs, fmt.Sprintf("column %d %s %s is missing in the target", i+1, sqlschema.QuoteName(t.Columns[i].Name), t.Columns[i].Type))
		case i >= len(t.Columns):
			diffs = append(diffs, fmt.Sprintf("column %d %s %s of the target is not in the source", i+1, sqlschema.QuoteName(have[i].Name), have[i].Type))
		case !strings.EqualFold(have[i].Name, t.Columns[i].Name) || normType(have[i].Type) != normType(t.Columns[i].Type):
			diffs = append(diffs, fmt.Sprintf("column %d is %s %s in the source but %s %s in the target",
				i+1, sqlschema.QuoteName(t.Columns[i].Name), t.Columns[i].Type, sqlschema.QuoteName(have[i].Name), have[i].Type))
		}
	}
	if len(diffs) > 0 {
		return errs.New(CodeLoadSchema, false, "load: target table %s does not match source table %s: %s; "+
			"make the target table's columns match (or drop it so the load creates it) and resume",
			target, src, strings.Join(diffs, "; "))
	}
	return nil
}

// column is a target column's name and COLUMN_TYPE.
type column struct{ Name, Type string }

// targetColumns returns the stored (not generated) columns of a table in
// order, extend columns left out; none when the table does not exist. With
// extend columns it also returns what the table lacks of them
// (extendcol.CheckTarget against the source's columns src).
func targetColumns(ctx context.Context, db *sql.DB, t filter.TableName, src []dumpfile.Column, ext []filter.ExtendColumn) ([]column, []string, error) {
	tb, err := sqlschema.ReadTable(ctx, db, t.Schema, t.Table)
	if errors.Is(err, sqlschema.ErrTableNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var out []column
	for _, c := range tb.Columns {
		if !c.Generated && !extendcol.IsExtend(ext, c.Name) {
			out = append(out, column{Name: c.Name, Type: c.ColumnType})
		}
	}
	var diffs []string
	if len(ext) > 0 {
		names := make([]string, len(src))
		for i, c := range src {
			names[i] = c.Name
		}
		diffs = extendcol.CheckTarget(tb, names, ext)
	}
	return out, diffs, nil
}

// intWidth is the display width of an integer type, which MySQL 8 no
// longer prints.
var intWidth = regexp.MustCompile(`^(tinyint|smallint|mediumint|int|bigint)\(\d+\)`)

// normType is a COLUMN_TYPE as compared: lower case, integer display width
// dropped.
func normType(t string) string {
	return intWidth.ReplaceAllString(strings.ToLower(strings.TrimSpace(t)), "$1")
}

// loadColumns returns LOAD DATA's column list for cols, with a SET clause
// that casts the BIT columns' decimal text (dumpfile.LoadBit) and the YEAR
// columns' text to integers (the server prints the zero year as "0", which
// LOAD DATA reads as the string '0', the year 2000; the number 0 is 0000),
// INSERT's column list, and which fields are such numbers.
func loadColumns(cols []dumpfile.Column) (load, insert string, numeric []bool) {
	names := make([]string, len(cols))
	plain := make([]string, len(cols))
	numeric = make([]bool, len(cols))
	var sets []string
	for i, c := range cols {
		names[i], plain[i] = sqlschema.QuoteName(c.Name), sqlschema.QuoteName(c.Name)
		if t := normType(c.Type); c.Load == dumpfile.LoadBit || t == "year" || t == "year(4)" {
			v := fmt.Sprintf("@v%d", i)
			names[i], numeric[i] = v, true
			sets = append(sets, sqlschema.QuoteName(c.Name)+" = CAST("+v+" AS UNSIGNED)")
		}
	}
	load = "(" + strings.Join(names, ", ") + ")"
	if len(sets) > 0 {
		load += " SET " + strings.Join(sets, ", ")
	}
	return load, "(" + strings.Join(plain, ", ") + ")", numeric
}
