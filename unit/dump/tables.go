package dump

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/collation"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/onlineddl"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// transactional are the engines whose tables a consistent snapshot covers.
var transactional = map[string]bool{"innodb": true, "rocksdb": true, "tokudb": true}

// tableRef names a source table.
type tableRef struct{ schema, name string }

func (t tableRef) String() string { return t.schema + "." + t.name }

// quoted is `schema`.`name`.
func (t tableRef) quoted() string { return sqlschema.QuoteTable(t.schema, t.name) }

// selection lists the schemas (with SHOW CREATE DATABASE) and base tables
// the block-allow list selects, sorted by name. Views and sequences are
// left out, and logged, and so are the system schemas whatever the list
// says. With online-ddl on (osc not nil) the shadow and trash tables of
// gh-ost and pt-online-schema-change are left out too, each logged: the
// sync unit never creates them on the target, and at a cut-over the real
// table gets the shadow's DDLs instead.
func selection(ctx context.Context, c *sql.Conn, allowed *filter.Tables, osc *onlineddl.Rules,
	log *zap.Logger) ([]dumpfile.Schema, []tableRef, error) {
	var tables []tableRef
	err := sqlschema.ScanAll(ctx, c, "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, IFNULL(ENGINE, '') FROM information_schema.TABLES "+
		"WHERE TABLE_SCHEMA NOT IN "+sqlschema.SystemSchemaList()+" ORDER BY TABLE_SCHEMA, TABLE_NAME", nil, func(r *sql.Rows) error {
		var t tableRef
		var kind, engine string
		if err := r.Scan(&t.schema, &t.name, &kind, &engine); err != nil {
			return err
		}
		switch {
		case !allowed.TableAllowed(t.schema, t.name):
		case osc.Online(t.name):
			what, real := osc.Classify(t.name)
			log.Info(fmt.Sprintf("the dump skips gh-ost/pt-osc table %s (%s of %s)", t.quoted(), what, sqlschema.QuoteName(real)),
				zap.Stringer("table", t), zap.Stringer("kind", what), zap.String("real-table", real))
		case kind == "BASE TABLE":
			if !transactional[strings.ToLower(engine)] {
				log.Warn("the table's engine is not transactional: the consistent snapshot does not cover it, "+
					"so its rows may include writes made after the snapshot's binlog location (safe mode replays them in all mode)",
					zap.Stringer("table", t), zap.String("engine", engine))
			}
			tables = append(tables, t)
		default:
			log.Info("the dump skips a table that is not a base table", zap.Stringer("table", t), zap.String("type", kind))
		}
		return nil
	})
	if err != nil {
		return nil, nil, errs.Wrap(err, CodeDumpRead, "dump: list the source's tables")
	}
	names, err := sqlschema.QueryStrings(ctx, c, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME NOT IN "+
		sqlschema.SystemSchemaList()+" ORDER BY SCHEMA_NAME")
	if err != nil {
		return nil, nil, errs.Wrap(err, CodeDumpRead, "dump: list the source's schemas")
	}
	var schemas []dumpfile.Schema
	for _, n := range names {
		if !allowed.SchemaAllowed(n) {
			continue
		}
		var name, create string
		if err := c.QueryRowContext(ctx, "SHOW CREATE DATABASE "+sqlschema.QuoteName(n)).Scan(&name, &create); err != nil {
			return nil, nil, errs.Wrap(err, CodeDumpRead, "dump: SHOW CREATE DATABASE %s", sqlschema.QuoteName(n))
		}
		schemas = append(schemas, dumpfile.Schema{Name: n, CreateSQL: create})
	}
	return schemas, tables, nil
}

// tableInfo is what a table's chunks need: its definition, SELECT list and
// key.
type tableInfo struct {
	ref       tableRef
	createSQL string
	columns   []dumpfile.Column // dumped columns, in field order
	selected  string            // the SELECT list reading them
	key       *sqlschema.Keyset // nil: one chunk
	// where is the subtask's mydumper.where ("" for every row): the
	// chunks' boundaries cover every row, their reads only these.
	where string
}

// readTableInfo reads t's definition, columns and key on c.
func readTableInfo(ctx context.Context, c *sql.Conn, t tableRef, log *zap.Logger) (*tableInfo, error) {
	info := &tableInfo{ref: t}
	var name string
	if err := c.QueryRowContext(ctx, "SHOW CREATE TABLE "+t.quoted()).Scan(&name, &info.createSQL); err != nil {
		return nil, readErr(t, "SHOW CREATE TABLE", err)
	}
	tbl, err := readColumns(ctx, c, t)
	if err != nil {
		return nil, err
	}
	exprs := make([]string, 0, len(tbl.Columns))
	for _, col := range tbl.Columns {
		if col.Generated {
			continue
		}
		dc := dumpfile.Column{Name: col.Name, Type: col.ColumnType, Load: dumpfile.LoadRaw}
		expr := sqlschema.QuoteName(col.Name)
		switch col.DataType {
		case "float":
			expr = "CAST(" + expr + " AS DOUBLE)"
		case "bit":
			expr = "CAST(" + expr + " AS UNSIGNED)"
			dc.Load = dumpfile.LoadBit
		case "year":
			// go-sql-driver parses YEAR as an integer (0000 becomes 0,
			// which LOAD DATA reads as 2000); as a string it keeps
			// MariaDB's four digits.
			expr = "CAST(" + expr + " AS CHAR)"
		}
		exprs = append(exprs, expr)
		info.columns = append(info.columns, dc)
	}
	if len(exprs) == 0 {
		return nil, errs.New(CodeDumpRead, false, "dump: table %s has no columns to dump (all generated?)", t)
	}
	info.selected = strings.Join(exprs, ", ")
	if info.key, err = readKey(ctx, c, t, tbl, log); err != nil {
		return nil, err
	}
	return info, nil
}

// readColumns reads t's model (columns in ordinal order, indexes) with
// sqlschema.ReadTable.
func readColumns(ctx context.Context, c *sql.Conn, t tableRef) (*sqlschema.Table, error) {
	tbl, err := sqlschema.ReadTable(ctx, c, t.schema, t.name)
	if errors.Is(err, sqlschema.ErrTableNotFound) {
		return nil, errs.New(CodeDumpRead, true, "dump: table %s has no columns in information_schema: was it dropped while the dump ran? "+
			"DDL during the dump is not supported; resume to dump again", t)
	}
	if err != nil {
		return nil, readErr(t, "read its columns", err)
	}
	return tbl, nil
}

// readErr names the table and the step in an error reading it.
func readErr(t tableRef, step string, err error) error {
	if dbconn.ErrorNumber(err) == erTableDefChanged {
		return errs.New(CodeDumpRead, true, "dump: %s was altered after the snapshot began (%w); DDL during the dump is not supported; "+
			"resume to dump again from a fresh snapshot", t, err)
	}
	return errs.Wrap(err, CodeDumpRead, "dump: table %s: %s", t, step)
}

// readCollations reads the source's default collations on c (a snapshot
// reader: information_schema and global variables are not versioned, so
// they are what the server says at the snapshot's time).
func readCollations(ctx context.Context, c *sql.Conn) (*collation.Defaults, error) {
	cat, err := collation.Read(ctx, c)
	if err != nil {
		return nil, errs.Wrap(err, CodeDumpRead, "dump: read the source's default collations")
	}
	return &cat.Global, nil
}
