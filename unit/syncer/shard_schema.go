package syncer

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/ha/shardddl"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/unit/syncer/syncmeta"
)

// Optimistic shard DDL reports every DDL of a member table with the
// table's schema before and after it. The unit keeps those schemas itself,
// per upstream table, as they were at each DDL it handled:
//
//   - A table's first schema is read from the source when the unit first
//     sees the table (subtask start, or its CREATE TABLE in the binlog).
//   - The schema after a DDL is computed on the target, in a scratch
//     database of the task and source: the table is created there from its
//     schema before (SHOW CREATE TABLE text), the DDL runs on it, and the
//     result is read back and the scratch table dropped. MariaDB itself
//     thus decides what a DDL does, and every schema is read the same way
//     (first schemas go through the scratch database too).
//   - Each schema is stored, before the DDL is reported, in
//     <meta-schema>.syncer_shard_schema keyed by the DDL's binlog location:
//     a restart finds the schema at its checkpoint (after the last DDL
//     before it), and a replayed DDL finds what it reported.

// schemaVer is one schema of an upstream table: SHOW CREATE TABLE's text
// and the model read back.
type schemaVer struct {
	create string
	model  *sqlschema.Table
}

// schemaRow is a table's schema around one DDL (at is its start; zero for
// the table's first schema, whose before is empty).
type schemaRow struct {
	at            binlog.Location
	ddls          []string
	before, after schemaVer
}

// shardSchemas holds the schemas of this source's member tables.
type shardSchemas struct {
	s    *Syncer
	rows map[tableName][]schemaRow // by at, the first schema first
	cur  map[tableName]schemaVer   // at the read location
}

// rowBefore orders schema rows: the first schema before every DDL.
func rowBefore(a, b binlog.Location) bool {
	switch {
	case a.IsZero():
		return !b.IsZero()
	case b.IsZero():
		return false
	}
	return a.Compare(b) < 0
}

// loadShardSchemas reads this task and source's stored schemas.
func (s *Syncer) loadShardSchemas(ctx context.Context) (*shardSchemas, error) {
	ss := &shardSchemas{s: s, rows: map[tableName][]schemaRow{}, cur: map[tableName]schemaVer{}}
	st := s.store
	rows, err := st.db.QueryContext(ctx, "SELECT source_schema, source_table, binlog_name, binlog_pos, ddls, create_before, create_after, "+
		"model_before, model_after FROM "+st.table(syncmeta.ShardSchemaTable)+" WHERE task = ? AND source = ?", st.task, st.source)
	if err != nil {
		return nil, errs.Wrap(err, CodeCheckpoint, "sync: read the shard schemas of task %q source %q", st.task, st.source)
	}
	err = sqlschema.ScanRows(rows, func(rows *sql.Rows) error {
		var t tableName
		var row schemaRow
		var ddls, mb, ma string
		if err := rows.Scan(&t.Schema, &t.Table, &row.at.Name, &row.at.Pos, &ddls, &row.before.create, &row.after.create, &mb, &ma); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(ddls), &row.ddls); err != nil {
			return fmt.Errorf("table %s at %s: ddls: %w", t, row.at, err)
		}
		for _, m := range []struct {
			text string
			dst  **sqlschema.Table
		}{{mb, &row.before.model}, {ma, &row.after.model}} {
			if m.text == "" {
				continue
			}
			if err := json.Unmarshal([]byte(m.text), m.dst); err != nil {
				return fmt.Errorf("table %s at %s: model: %w", t, row.at, err)
			}
		}
		ss.rows[t] = append(ss.rows[t], row)
		return nil
	})
	if err != nil {
		return nil, errs.Wrap(err, CodeCheckpoint, "sync: read the shard schemas of task %q source %q (remove the task's meta "+
			"with `dmctl task start --remove-meta` if they are damaged)", st.task, st.source)
	}
	for t, rs := range ss.rows {
		slices.SortFunc(rs, func(a, b schemaRow) int {
			switch {
			case rowBefore(a.at, b.at):
				return -1
			case rowBefore(b.at, a.at):
				return 1
			}
			return 0
		})
		ss.rows[t] = rs
	}
	return ss, nil
}

// rewindTo sets every known table's schema to the one at loc: after the
// last DDL that starts before loc.
func (ss *shardSchemas) rewindTo(loc binlog.Location) {
	clear(ss.cur)
	for t, rs := range ss.rows {
		for _, row := range rs {
			if !row.at.IsZero() && row.at.Compare(loc) >= 0 {
				break
			}
			ss.cur[t] = row.after
		}
	}
}

// latest sets every known table's schema to the newest stored one (the
// unit is initialised before it knows where it will read from).
func (ss *shardSchemas) latest() {
	for t, rs := range ss.rows {
		ss.cur[t] = rs[len(rs)-1].after
	}
}

// rowAt is t's row of the DDL starting at at.
func (ss *shardSchemas) rowAt(t tableName, at binlog.Location) (schemaRow, bool) {
	for _, row := range ss.rows[t] {
		if !row.at.IsZero() && row.at.Name == at.Name && row.at.Pos == at.Pos {
			return row, true
		}
	}
	return schemaRow{}, false
}

// put stores t's row and makes its schema after the current one. Rows
// before the last one that starts before the saved checkpoint are deleted:
// no restart reads them again.
func (ss *shardSchemas) put(ctx context.Context, t tableName, row schemaRow, saved binlog.Location) error {
	st := ss.s.store
	ddls, err := json.Marshal(row.ddls)
	if err != nil {
		return err
	}
	models := make([]string, 2)
	for i, m := range []*sqlschema.Table{row.before.model, row.after.model} {
		if m == nil {
			continue
		}
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		models[i] = string(b)
	}
	if _, err := st.db.ExecContext(ctx, "REPLACE INTO "+st.table(syncmeta.ShardSchemaTable)+
		" (task, source, source_schema, source_table, binlog_name, binlog_pos, ddls, create_before, create_after, model_before, model_after)"+
		" VALUES (?,?,?,?,?,?,?,?,?,?,?)", st.task, st.source, t.Schema, t.Table, row.at.Name, row.at.Pos, string(ddls),
		row.before.create, row.after.create, models[0], models[1]); err != nil {
		return errs.Wrap(err, CodeCheckpoint, "sync: store the schema of %s at binlog %s", t, row.at)
	}
	rs := slices.DeleteFunc(slices.Clone(ss.rows[t]), func(r schemaRow) bool { return r.at == row.at })
	i, _ := slices.BinarySearchFunc(rs, row, func(a, b schemaRow) int {
		if rowBefore(a.at, b.at) {
			return -1
		}
		return 1
	})
	rs = slices.Insert(rs, i, row)
	keep := 0
	for j, r := range rs {
		if r.at.IsZero() || (!saved.IsZero() && r.at.Compare(saved) < 0) {
			keep = j
		}
	}
	for _, old := range rs[:keep] {
		if _, err := st.db.ExecContext(ctx, "DELETE FROM "+st.table(syncmeta.ShardSchemaTable)+
			" WHERE task = ? AND source = ? AND source_schema = ? AND source_table = ? AND binlog_name = ? AND binlog_pos = ?",
			st.task, st.source, t.Schema, t.Table, old.at.Name, old.at.Pos); err != nil {
			return errs.Wrap(err, CodeCheckpoint, "sync: delete an old schema of %s", t)
		}
	}
	ss.rows[t] = rs[keep:]
	ss.cur[t] = row.after
	return nil
}

// first makes sure every table of tables has a schema: a table never seen
// gets its current schema on the source as its first.
func (ss *shardSchemas) first(ctx context.Context, tables []tableName) error {
	var missing []tableName
	for _, t := range tables {
		if _, ok := ss.cur[t]; !ok && len(ss.rows[t]) == 0 {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	s := ss.s
	db, err := s.sources.Open(s.source, s.source.DriverConfig(), s.cfg.Name, 1)
	if err != nil {
		return errs.Wrap(err, CodeShardDDL, "sync: read the schemas of the sharded tables from source %s", s.cfg.SourceID)
	}
	defer func() { _ = db.Close() }()
	for _, t := range missing {
		var name, create string
		if err := db.QueryRowContext(ctx, "SHOW CREATE TABLE "+sqlschema.QuoteTable(t.Schema, t.Table)).Scan(&name, &create); err != nil {
			return errs.Wrap(err, CodeShardDDL, "sync: read the schema of sharded table %s from source %s", t, s.cfg.SourceID)
		}
		v, err := ss.shadow(ctx, t, create, nil)
		if err != nil {
			return err
		}
		if err := ss.put(ctx, t, schemaRow{ddls: []string{}, after: v}, binlog.Location{}); err != nil {
			return err
		}
	}
	s.logger.Info("optimistic shard mode: read the first schemas of the sharded tables from the source",
		zap.Int("tables", len(missing)), zap.Stringer("first", missing[0]))
	return nil
}

// models are the current schemas of tables, as a share publishes them.
func (ss *shardSchemas) models(tables []tableName) map[shardddl.Table]*sqlschema.Table {
	out := make(map[shardddl.Table]*sqlschema.Table, len(tables))
	for _, t := range tables {
		out[lockTable(t)] = ss.cur[t].model
	}
	return out
}

// shadowNames are the scratch database of this task and source on the
// target and the scratch table of upstream table t in it.
func (ss *shardSchemas) shadowNames(t tableName) (string, string) {
	st := ss.s.store
	h := sha256.Sum256([]byte(st.task + "\x00" + st.source))
	db := st.schema
	if len(db) > 40 {
		db = db[:40]
	}
	th := sha256.Sum256([]byte(t.Schema + "\x00" + t.Table))
	return db + "_shadow_" + hex.EncodeToString(h[:6]), "t_" + hex.EncodeToString(th[:12])
}

// shadow returns the schema of t that create (SHOW CREATE TABLE text) with
// the statements ddls (naming target table target, as translated) run on
// it gives, computed in the scratch database.
func (ss *shardSchemas) shadow(ctx context.Context, t tableName, create string, ddls []targetDDL) (v schemaVer, err error) {
	db, name := ss.shadowNames(t)
	fail := func(err error, what string) error {
		return errs.New(CodeShardDDL, false, "sync: optimistic shard mode: %s for table %s in scratch table %s on the target: %w; "+
			"skip or replace the DDL with handle-error", what, t, sqlschema.QuoteTable(db, name), err)
	}
	conn, err := ss.s.target.Conn(ctx)
	if err != nil {
		return v, errs.Wrap(err, CodeShardDDL, "sync: connect to the target for the schema of %s", t)
	}
	defer func() { err = errors.Join(err, conn.Close()) }()
	var fkChecks int
	if err := conn.QueryRowContext(ctx, "SELECT @@SESSION.foreign_key_checks").Scan(&fkChecks); err != nil {
		return v, errs.Wrap(err, CodeShardDDL, "sync: read foreign_key_checks on the target")
	}
	// A scratch table may name parents that are not there.
	if _, err := conn.ExecContext(ctx, "SET SESSION foreign_key_checks = 0"); err != nil {
		return v, errs.Wrap(err, CodeShardDDL, "sync: turn off foreign key checks for the scratch tables")
	}
	defer func() {
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("SET SESSION foreign_key_checks = %d", fkChecks)); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	table := sqlschema.QuoteTable(db, name)
	for _, q := range []string{"CREATE DATABASE IF NOT EXISTS " + sqlschema.QuoteName(db), "DROP TABLE IF EXISTS " + table} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return v, errs.Wrap(err, CodeShardDDL, "sync: prepare the scratch table %s on the target", table)
		}
	}
	defer func() {
		if _, derr := conn.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+table); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	// No create text: the first statement is the table's CREATE TABLE.
	if create != "" {
		q, err := retargetCreate(create, db, name)
		if err != nil {
			return v, fail(err, "the schema cannot be recreated")
		}
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return v, fail(err, "the schema cannot be recreated")
		}
	}
	for _, d := range ddls {
		q, err := renameTableIn(d.sql, d.target, tableName{Schema: db, Table: name})
		if err != nil {
			return v, fail(err, fmt.Sprintf("DDL %q cannot be rewritten", clipSQL(d.sql)))
		}
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return v, fail(err, fmt.Sprintf("DDL %q failed", clipSQL(d.sql)))
		}
	}
	var got string
	if err := conn.QueryRowContext(ctx, "SHOW CREATE TABLE "+table).Scan(&name, &got); err != nil {
		return v, fail(err, "the schema cannot be read back")
	}
	m, err := sqlschema.ReadTable(ctx, conn, db, name)
	if err != nil {
		return v, fail(err, "the schema cannot be read back")
	}
	m.Schema, m.Name = t.Schema, t.Table
	return schemaVer{create: got, model: m}, nil
}

// retargetCreate rewrites the name of SHOW CREATE TABLE's text to
// schema.name.
func retargetCreate(create, schema, name string) (string, error) {
	const prefix = "CREATE TABLE "
	rest, ok := strings.CutPrefix(create, prefix)
	if !ok {
		rest, ok = strings.CutPrefix(create, "CREATE TABLE IF NOT EXISTS ")
	}
	if !ok || !strings.HasPrefix(rest, "`") {
		return "", fmt.Errorf("not SHOW CREATE TABLE text: %q", clipSQL(create))
	}
	// The quoted name: backticks doubled inside; a schema-qualified one
	// has a second part after a dot.
	for part := 0; part < 2; part++ {
		i := 1
		for {
			j := strings.IndexByte(rest[i:], '`')
			if j < 0 {
				return "", fmt.Errorf("unterminated table name in %q", clipSQL(create))
			}
			i += j + 1
			if i < len(rest) && rest[i] == '`' {
				i++
				continue
			}
			break
		}
		rest = rest[i:]
		if !strings.HasPrefix(rest, ".`") {
			break
		}
		rest = rest[1:]
	}
	return prefix + sqlschema.QuoteTable(schema, name) + rest, nil
}
