package dump

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// systemSchemas are never dumped, whatever the block-allow list says.
const systemSchemas = "'mysql', 'information_schema', 'performance_schema', 'sys'"

// transactional are the engines whose tables a consistent snapshot covers.
var transactional = map[string]bool{"innodb": true, "rocksdb": true, "tokudb": true}

// tableRef names a source table.
type tableRef struct{ schema, name string }

func (t tableRef) String() string { return t.schema + "." + t.name }

// quoted is `schema`.`name`.
func (t tableRef) quoted() string { return quoteName(t.schema) + "." + quoteName(t.name) }

// quoteName quotes an identifier with backticks.
func quoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// selection lists the schemas (with SHOW CREATE DATABASE) and base tables
// the block-allow list selects, sorted by name. Views and sequences are
// left out, and logged.
func selection(ctx context.Context, c *sql.Conn, allowed *filter.Tables, log *zap.Logger) ([]dumpfile.Schema, []tableRef, error) {
	rows, err := c.QueryContext(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, IFNULL(ENGINE, '') FROM information_schema.TABLES "+
		"WHERE TABLE_SCHEMA NOT IN ("+systemSchemas+") ORDER BY TABLE_SCHEMA, TABLE_NAME")
	if err != nil {
		return nil, nil, errs.Wrap(err, CodeDumpRead, "dump: list the source's tables")
	}
	var tables []tableRef
	err = scanAll(rows, func(r *sql.Rows) error {
		var t tableRef
		var kind, engine string
		if err := r.Scan(&t.schema, &t.name, &kind, &engine); err != nil {
			return err
		}
		switch {
		case !allowed.TableAllowed(t.schema, t.name):
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
	names, err := queryStrings(ctx, c, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME NOT IN ("+
		systemSchemas+") ORDER BY SCHEMA_NAME")
	if err != nil {
		return nil, nil, errs.Wrap(err, CodeDumpRead, "dump: list the source's schemas")
	}
	var schemas []dumpfile.Schema
	for _, n := range names {
		if !allowed.SchemaAllowed(n) {
			continue
		}
		var name, create string
		if err := c.QueryRowContext(ctx, "SHOW CREATE DATABASE "+quoteName(n)).Scan(&name, &create); err != nil {
			return nil, nil, errs.Wrap(err, CodeDumpRead, "dump: SHOW CREATE DATABASE %s", quoteName(n))
		}
		schemas = append(schemas, dumpfile.Schema{Name: n, CreateSQL: create})
	}
	return schemas, tables, nil
}

// queryStrings returns the first column of every row of q.
func queryStrings(ctx context.Context, c *sql.Conn, q string) ([]string, error) {
	rows, err := c.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	var out []string
	err = scanAll(rows, func(r *sql.Rows) error {
		var s string
		if err := r.Scan(&s); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// column is one column of a table as information_schema.COLUMNS has it.
type column struct {
	name, colType, dataType, charset string
	generated                        bool
}

// tableInfo is what a table's chunks need: its definition, SELECT list and
// key.
type tableInfo struct {
	ref       tableRef
	createSQL string
	columns   []dumpfile.Column // dumped columns, in field order
	selected  string            // the SELECT list reading them
	key       []keyColumn       // empty: one chunk
	keyIndex  string            // the key's index name
}

// readTableInfo reads t's definition, columns and key on c.
func readTableInfo(ctx context.Context, c *sql.Conn, t tableRef, log *zap.Logger) (*tableInfo, error) {
	info := &tableInfo{ref: t}
	var name string
	if err := c.QueryRowContext(ctx, "SHOW CREATE TABLE "+t.quoted()).Scan(&name, &info.createSQL); err != nil {
		return nil, readErr(t, "SHOW CREATE TABLE", err)
	}
	cols, err := readColumns(ctx, c, t)
	if err != nil {
		return nil, err
	}
	exprs := make([]string, 0, len(cols))
	for _, col := range cols {
		if col.generated {
			continue
		}
		dc := dumpfile.Column{Name: col.name, Type: col.colType, Load: dumpfile.LoadRaw}
		expr := quoteName(col.name)
		switch col.dataType {
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
	if info.key, info.keyIndex, err = readKey(ctx, c, t, cols, log); err != nil {
		return nil, err
	}
	return info, nil
}

// readColumns reads t's columns in ordinal order.
func readColumns(ctx context.Context, c *sql.Conn, t tableRef) ([]column, error) {
	q := "SELECT COLUMN_NAME, COLUMN_TYPE, DATA_TYPE, IFNULL(CHARACTER_SET_NAME, ''), EXTRA FROM information_schema.COLUMNS " +
		"WHERE TABLE_SCHEMA = " + dbconn.QuoteString(t.schema) + " AND TABLE_NAME = " + dbconn.QuoteString(t.name) +
		" ORDER BY ORDINAL_POSITION"
	rows, err := c.QueryContext(ctx, q)
	if err != nil {
		return nil, readErr(t, "read its columns", err)
	}
	var cols []column
	err = scanAll(rows, func(r *sql.Rows) error {
		var col column
		var extra string
		if err := r.Scan(&col.name, &col.colType, &col.dataType, &col.charset, &extra); err != nil {
			return err
		}
		col.dataType = strings.ToLower(col.dataType)
		col.generated = strings.Contains(strings.ToUpper(extra), "GENERATED")
		cols = append(cols, col)
		return nil
	})
	if err != nil {
		return nil, readErr(t, "read its columns", err)
	}
	if len(cols) == 0 {
		return nil, errs.New(CodeDumpRead, true, "dump: table %s has no columns in information_schema: was it dropped while the dump ran? "+
			"DDL during the dump is not supported; resume to dump again", t)
	}
	return cols, nil
}

// readErr names the table and the step in an error reading it.
func readErr(t tableRef, step string, err error) error {
	if code := mysqlErrorNumber(err); code == erTableDefChanged {
		return errs.New(CodeDumpRead, true, "dump: %s was altered after the snapshot began (%w); DDL during the dump is not supported; "+
			"resume to dump again from a fresh snapshot", t, err)
	}
	return errs.Wrap(err, CodeDumpRead, "dump: table %s: %s", t, step)
}

// describe is a short form of a column list for logs.
func describe(key []keyColumn) string {
	names := make([]string, len(key))
	for i, k := range key {
		names[i] = k.name
	}
	return fmt.Sprintf("(%s)", strings.Join(names, ", "))
}
