package check

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/extendcol"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// maxNameLen is the longest identifier MySQL and MariaDB accept.
const maxNameLen = 64

// scratchName is the name of the table checkWritable creates in the meta
// schema: the task and source in it for whoever sees it, and a random
// suffix so that concurrent checks never share one.
func scratchName(task, source string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := "_" + hex.EncodeToString(b[:])
	name := "_dm_precheck_" + task + "_" + source
	if len(name)+len(suffix) > maxNameLen {
		name = name[:maxNameLen-len(suffix)]
	}
	return name + suffix
}

// checkWritable creates the meta schema when missing and creates, fills
// and drops a scratch table in it: the task can then keep its checkpoints
// and chunk records there.
func (c *run) checkWritable(ctx context.Context, s *server, l *items) {
	schema := c.cfg.MetaSchema
	if schema == "" {
		schema = config.DefaultMetaSchema
	}
	tbl := filter.TableName{Schema: schema, Table: scratchName(c.cfg.Name, c.cfg.SourceID)}
	steps := []struct{ what, sql string }{
		{"create the meta schema " + sqlschema.QuoteName(schema), "CREATE DATABASE IF NOT EXISTS " + sqlschema.QuoteName(schema)},
		{"create table " + tbl.String(), "CREATE TABLE " + tbl.String() + " (id INT PRIMARY KEY, task VARCHAR(255) NOT NULL)"},
		{"insert into " + tbl.String(), "INSERT INTO " + tbl.String() + " VALUES (1, " + quoteString(c.cfg.Name) + ")"},
	}
	var failed, created bool
	for i, st := range steps {
		if _, err := query(ctx, func(ctx context.Context) (any, error) { return s.db.ExecContext(ctx, st.sql) }); err != nil {
			c.writeFailure(ctx, s, schema, st.what, err, l)
			failed = true
			break
		}
		created = i >= 1
	}
	if created {
		_, err := query(ctx, func(ctx context.Context) (any, error) {
			return s.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+tbl.String())
		})
		if err != nil && !failed {
			c.writeFailure(ctx, s, schema, "drop table "+tbl.String()+" (drop it by hand)", err, l)
			failed = true
		}
	}
	if !failed {
		l.pass("target_writable", s.what, "task %s can create tables and write rows in meta schema %s on %s",
			c.cfg.Name, sqlschema.QuoteName(schema), s.what)
	}
}

// writeFailure adds the failure of one step of checkWritable with the
// GRANT that fixes it.
func (c *run) writeFailure(ctx context.Context, s *server, schema, what string, err error, l *items) {
	user, uerr := query(ctx, func(ctx context.Context) (string, error) {
		var u string
		return u, s.db.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&u)
	})
	account := "the target user"
	if uerr == nil {
		account = quoteAccount(user)
	}
	l.failErr(err, "target_writable", s.what,
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX ON %s.* TO %s, and the same on the schemas the task writes to",
			sqlschema.QuoteName(schema), account),
		"task %s cannot %s on %s: %v", c.cfg.Name, what, s.what, err)
}

// checkTargetTables compares every selected source table whose routed
// target table exists with that table: the same stored columns, in the
// same order, of the same types. A difference fails modes that load
// (full, all) and is a warning in incremental mode, where the target
// tables must match the source as of the start position, not now.
func (c *run) checkTargetTables(ctx context.Context, s *server, tables []*table, l *items) {
	routed := make(map[*table]filter.TableName, len(tables))
	for _, t := range tables {
		routed[t] = c.router.Route(t.schema, t.name)
	}
	existing, key, err := readTargetTables(ctx, s, routed)
	if err != nil {
		l.failErr(err, "target_tables", s.what, "give the target user SELECT on information_schema of the target schemas",
			"read the columns of the target tables on %s: %v", s.what, err)
		return
	}
	var same, differ int
	for _, t := range tables {
		r := routed[t]
		cols, ok := existing[key(r)]
		if !ok {
			continue
		}
		diff, err := c.compareExtended(t, cols)
		if err != nil {
			l.failErr(err, "target_tables", s.what, "fix the route rule's extractor", "table %s: %v", sqlschema.QuoteTable(t.schema, t.name), err)
			continue
		}
		if diff == "" {
			same++
			continue
		}
		differ++
		c.tableMismatch(s, t, r, diff, l)
	}
	switch {
	case differ > 0:
	case same == 0:
		l.pass("target_tables", s.what, "none of the %d selected table(s) exists on the target yet", len(tables))
	default:
		l.pass("target_tables", s.what, "%d of the %d selected table(s) route to existing target tables with the same columns",
			same, len(tables))
	}
}

// readTargetTables returns the stored columns of the existing target
// tables in the schemas of routed, under the key of each name (lower case
// when the target has lower_case_table_names 1 or 2, which store or
// compare names in lower case).
func readTargetTables(ctx context.Context, s *server, routed map[*table]filter.TableName) (
	map[filter.TableName][]column, func(filter.TableName) filter.TableName, error,
) {
	var schemas []string
	for _, r := range routed {
		if !slices.Contains(schemas, r.Schema) {
			schemas = append(schemas, r.Schema)
		}
	}
	fold, err := query(ctx, func(ctx context.Context) (bool, error) {
		var v int
		err := s.db.QueryRowContext(ctx, "SELECT @@lower_case_table_names").Scan(&v)
		return v != 0, err
	})
	if err != nil {
		return nil, nil, err
	}
	key := func(t filter.TableName) filter.TableName {
		if fold {
			return filter.TableName{Schema: strings.ToLower(t.Schema), Table: strings.ToLower(t.Table)}
		}
		return t
	}
	existing := map[filter.TableName][]column{}
	if len(schemas) == 0 {
		return existing, key, nil
	}
	_, err = query(ctx, func(ctx context.Context) (any, error) {
		return nil, readColumns(ctx, s.db, schemas, func(m *sqlschema.Table, cols []column) {
			if len(cols) > 0 {
				k := key(filter.TableName{Schema: m.Schema, Table: m.Name})
				existing[k] = append(existing[k], cols...)
			}
		})
	})
	return existing, key, err
}

// tableMismatch adds the item of a target table whose columns differ from
// its source table's.
func (c *run) tableMismatch(s *server, src *table, dst filter.TableName, diff string, l *items) {
	msg := fmt.Sprintf("target table %s on %s already exists with other columns than source table %s of source %s: %s",
		dst, s.addr, src, c.src.SourceID, diff)
	if c.dumps() {
		l.fail("target_table_schema", dst.String(),
			fmt.Sprintf("drop it on the target (DROP TABLE %s) so the load creates it, change its columns to the source's (SHOW CREATE TABLE %s on the source), or route the source table elsewhere (route-rules)", dst, src),
			"%s", msg)
		return
	}
	l.warn("target_table_schema", dst.String(),
		"make its columns match the source table's as of the task's start position (meta)",
		"%s; the sync unit writes rows by these columns", msg)
}

// compareColumns describes how the target's columns differ from the
// source's ("" when they do not).
// compareExtended is compareColumns for a source table whose route rule
// has extractors: the target's extend columns are left out of the
// comparison and must exist, and the source must not have them (as DM's
// precheck says).
func (c *run) compareExtended(t *table, dst []column) (string, error) {
	ext, err := c.router.Extend(t.schema, t.name)
	if err != nil || len(ext) == 0 {
		return compareColumns(t.columns, dst), err
	}
	var d []string
	rest := make([]column, 0, len(dst))
	for _, col := range dst {
		if !extendcol.IsExtend(ext, col.name) {
			rest = append(rest, col)
		}
	}
	for _, e := range ext {
		if !slices.ContainsFunc(dst, func(col column) bool { return strings.EqualFold(col.name, e.Name) }) {
			d = append(d, "the target lacks extend column "+sqlschema.QuoteName(e.Name)+" of the route rule (add it, or drop the table so the load creates it)")
		}
		if slices.ContainsFunc(t.columns, func(col column) bool { return strings.EqualFold(col.name, e.Name) }) {
			d = append(d, "the source has a column "+sqlschema.QuoteName(e.Name)+", which is an extend column of the route rule")
		}
	}
	if diff := compareColumns(t.columns, rest); diff != "" {
		d = append(d, diff)
	}
	return capJoin(d, 5, "; "), nil
}

func compareColumns(src, dst []column) string {
	var d []string
	for i := 0; i < max(len(src), len(dst)); i++ {
		switch {
		case i >= len(src):
			d = append(d, fmt.Sprintf("the target has an extra column %d %s %s", i+1, sqlschema.QuoteName(dst[i].name), dst[i].typ))
		case i >= len(dst):
			d = append(d, fmt.Sprintf("the target lacks column %d %s %s", i+1, sqlschema.QuoteName(src[i].name), src[i].typ))
		case !strings.EqualFold(src[i].name, dst[i].name):
			d = append(d, fmt.Sprintf("column %d is %s %s on the source but %s %s on the target",
				i+1, sqlschema.QuoteName(src[i].name), src[i].typ, sqlschema.QuoteName(dst[i].name), dst[i].typ))
		case src[i].typ != dst[i].typ:
			d = append(d, fmt.Sprintf("column %d %s is %s on the source but %s on the target",
				i+1, sqlschema.QuoteName(src[i].name), src[i].typ, dst[i].typ))
		}
	}
	return capJoin(d, 5, "; ")
}
