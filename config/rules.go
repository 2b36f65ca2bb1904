package config

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions for the parser
)

// filterEvents are the binlog event types a filter rule may name, as in DM's
// binlog event filter (tidb-tools/binlog-filter), lower case.
var filterEvents = map[string]bool{
	"all": true, "all dml": true, "all ddl": true,
	"none": true, "none dml": true, "none ddl": true,
	"incompatible ddl changes": true,
	"insert":                   true, "update": true, "delete": true,
	"create database": true, "drop database": true, "alter database": true,
	"create table": true, "drop table": true, "truncate table": true,
	"rename table": true, "alter table": true,
	"create index": true, "drop index": true,
	"create view": true, "drop view": true,
	"value range decrease": true, "precision decrease": true,
	"modify column": true, "rename column": true, "rename index": true,
	"drop column": true, "drop primary key": true, "drop unique key": true,
	"modify default value": true, "modify constraint": true,
	"modify columns order": true, "modify charset": true, "modify collation": true,
	"remove auto increment": true, "modify storage engine": true,
	"add table partition": true, "drop table partition": true,
	"truncate table partition": true, "reorganize table partition": true,
	"rebuild table partition": true, "coalesce table partition": true,
	"split table partition": true, "exchange table partition": true,
	"add column": true, "add primary key": true, "add foreign key": true, "drop foreign key": true,
	"modify table comment": true, "alter table partitioning": true, "remove table partitioning": true,
	// TiDB's own kinds, which a MariaDB or MySQL source never produces.
	"modify schema charset and collate": true, "modify table charset and collate": true,
	"recover table": true, "set default value": true, "rebase auto id": true,
	"alter index visibility": true, "alter ttl info": true, "alter ttl remove": true,
	"multi schema change": true,
}

// filterEventAliases are event names read as another: DM's own aliases of
// the database events, and "truncate", which DM's task files use for
// "truncate table" (DM itself logs an error for it and drops the whole
// rule; here the rule filters what it says).
var filterEventAliases = map[string]string{
	"create schema": "create database",
	"drop schema":   "drop database",
	"alter schema":  "alter database",
	"truncate":      "truncate table",
}

// IsFilterEvent reports whether e (case-insensitive) is a binlog event type
// of DM's binlog event filter ("all dml", "truncate table", ...).
func IsFilterEvent(e string) bool {
	e = strings.ToLower(e)
	return filterEvents[e] || filterEventAliases[e] != ""
}

const filterEventsHelp = "must be a DM binlog event type: all, all dml, all ddl, none, none dml, none ddl, " +
	"incompatible ddl changes, insert, update, delete, create database, drop database, alter database, " +
	"create table, drop table, truncate table, rename table, alter table, create index, drop index, " +
	"create view, drop view, or a finer DDL kind such as modify column or drop table partition"

// validate checks the table references of a block-allow list.
func (b *BAList) validate(p *problems, path string) {
	for i, db := range b.DoDBs {
		if db == "" {
			p.add(index(join(path, "do-dbs"), i), db, "must not be empty (use * to match every schema)")
		}
	}
	for i, db := range b.IgnoreDBs {
		if db == "" {
			p.add(index(join(path, "ignore-dbs"), i), db, "must not be empty")
		}
	}
	// A name starting with ~ is a regular expression, as in DM.
	checkRegexp := func(at, name string) {
		if expr, ok := strings.CutPrefix(name, "~"); ok {
			if _, err := regexp.Compile(expr); err != nil {
				p.add(at, name, "a name starting with ~ must be a Go regular expression: "+err.Error())
			}
		}
	}
	for i, db := range b.DoDBs {
		checkRegexp(index(join(path, "do-dbs"), i), db)
	}
	for i, db := range b.IgnoreDBs {
		checkRegexp(index(join(path, "ignore-dbs"), i), db)
	}
	checkTables := func(list string, refs []TableRef) {
		for i, t := range refs {
			at := index(join(path, list), i)
			if t.DBName == "" {
				p.add(join(at, "db-name"), t.DBName, "must not be empty (wildcards * and ?, or ~regexp)")
			}
			if t.TblName == "" {
				p.add(join(at, "tbl-name"), t.TblName, "must not be empty (wildcards * and ?, or ~regexp)")
			}
			checkRegexp(join(at, "db-name"), t.DBName)
			checkRegexp(join(at, "tbl-name"), t.TblName)
		}
	}
	checkTables("do-tables", b.DoTables)
	checkTables("ignore-tables", b.IgnoreTables)
}

// validate checks one route rule.
func (r *RouteRule) validate(p *problems, path string) {
	if r.SchemaPattern == "" {
		p.add(join(path, "schema-pattern"), r.SchemaPattern, "must not be empty")
	}
	if r.TargetSchema == "" {
		p.add(join(path, "target-schema"), r.TargetSchema, "must not be empty")
	}
	if r.TargetTable != "" && r.TablePattern == "" {
		p.add(join(path, "table-pattern"), r.TablePattern, "must not be empty when target-table is set")
	}
	seen := map[string]string{}
	for _, e := range r.Extractors() {
		at := join(path, e.Field)
		col := strings.TrimSpace(e.TargetColumn)
		switch {
		case col == "":
			p.add(join(at, "target-column"), e.TargetColumn, "must name the target table's column that gets the extracted value")
		case col != e.TargetColumn || len(col) > 64 || strings.ContainsAny(col, "`\x00"):
			p.add(join(at, "target-column"), e.TargetColumn, "must be a column name: at most 64 characters, no backtick, NUL or surrounding spaces")
		default:
			if other, dup := seen[strings.ToLower(col)]; dup {
				p.add(join(at, "target-column"), e.TargetColumn, "collides with "+join(path, other)+".target-column: every extractor of a rule needs a column of its own")
			}
			seen[strings.ToLower(col)] = e.Field
		}
		if strings.HasPrefix(e.Regexp, "~") {
			p.add(join(at, e.RegexpField), e.Regexp, "is a regular expression already: remove the leading ~ (as in DM)")
		} else if _, err := regexp.Compile(e.Regexp); err != nil {
			p.add(join(at, e.RegexpField), e.Regexp, "must be a Go regular expression: "+err.Error())
		}
	}
}

// validate checks one filter rule.
func (r *FilterRule) validate(p *problems, path string) {
	if r.SchemaPattern == "" {
		p.add(join(path, "schema-pattern"), r.SchemaPattern, "must not be empty")
	}
	if !strings.EqualFold(r.Action, FilterIgnore) && !strings.EqualFold(r.Action, FilterDo) && !strings.EqualFold(r.Action, FilterError) {
		p.add(join(path, "action"), r.Action, "must be Ignore, Do or Error")
	}
	if len(r.Events) == 0 && len(r.SQLPattern) == 0 {
		p.add(join(path, "events"), "[]", "a filter rule needs events or sql-pattern")
	}
	for i, e := range r.Events {
		if !IsFilterEvent(e) {
			p.add(index(join(path, "events"), i), e, filterEventsHelp)
		}
	}
	for i, s := range r.SQLPattern {
		if _, err := regexp.Compile(s); err != nil {
			p.add(index(join(path, "sql-pattern"), i), s, "must be a Go regular expression: "+err.Error())
		}
	}
}

// validate checks the tuning of the sync unit.
func (c *SyncerConfig) validate(p *problems, path string) {
	if c.WorkerCount < 1 || c.WorkerCount > 1024 {
		p.add(join(path, "worker-count"), c.WorkerCount, "must be between 1 and 1024")
	}
	if c.Batch < 1 || c.Batch > 100000 {
		p.add(join(path, "batch"), c.Batch, "must be between 1 and 100000")
	}
	if c.CheckpointFlushInterval < 1 {
		p.add(join(path, "checkpoint-flush-interval"), c.CheckpointFlushInterval, "must be at least 1 (seconds)")
	}
}

// validate checks the tuning of the dump unit.
func (c *MydumperConfig) validate(p *problems, path string) {
	if c.Threads < 1 {
		p.add(join(path, "threads"), c.Threads, "must be at least 1")
	}
	if c.Rows < 0 {
		p.add(join(path, "rows"), c.Rows, "must not be negative")
	}
	if c.Where != "" {
		if _, err := WhereCondition(c.Where); err != nil {
			p.add(join(path, "where"), c.Where, err.Error())
		}
	}
}

// WhereCondition checks that where is one SQL condition, as it follows
// WHERE in a SELECT of a table, and returns it as the parser restores it
// (no comments, every name quoted), which the dump runs in parentheses.
func WhereCondition(where string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("must be one SQL condition, as after WHERE (e.g. id > 100): %s", why)
	}
	nodes, _, err := parser.New().Parse("SELECT 1 FROM t WHERE "+where, "", "")
	if err != nil {
		return bad(err.Error())
	}
	if len(nodes) != 1 {
		return bad(fmt.Sprintf("%d statements", len(nodes)))
	}
	sel, ok := nodes[0].(*ast.SelectStmt)
	if !ok || sel.Where == nil || sel.OrderBy != nil || sel.Limit != nil || sel.GroupBy != nil || sel.Having != nil ||
		sel.LockInfo != nil || sel.WindowSpecs != nil {
		return bad("it continues past the condition (ORDER BY, LIMIT, UNION, ...)")
	}
	var b strings.Builder
	flags := format.RestoreStringSingleQuotes | format.RestoreNameBackQuotes | format.RestoreKeyWordUppercase
	if err := sel.Where.Restore(format.NewRestoreCtx(flags, &b)); err != nil {
		return bad(err.Error())
	}
	return b.String(), nil
}

// validate checks the tuning of the load unit.
func (c *LoaderConfig) validate(p *problems, path string) {
	if c.PoolSize < 1 {
		p.add(join(path, "pool-size"), c.PoolSize, "must be at least 1")
	}
}

// validate checks the validator settings.
func (c *ValidatorConfig) validate(p *problems, path string) {
	switch strings.ToLower(c.Mode) {
	case ValidationNone, ValidationFast, ValidationFull:
	default:
		p.add(join(path, "mode"), c.Mode, "must be none, fast or full")
	}
	if c.WorkerCount < 1 {
		p.add(join(path, "worker-count"), c.WorkerCount, "must be at least 1")
	}
	if c.RowErrorDelay.Duration < 0 {
		p.add(join(path, "row-error-delay"), c.RowErrorDelay, "must not be negative")
	}
}

// validate checks where a server is; the password is never looked at, so it
// never appears in an error.
func (c *DBConfig) validate(p *problems, path string) {
	if strings.TrimSpace(c.Host) == "" {
		p.add(join(path, "host"), c.Host, "must not be empty")
	}
	validatePort(p, join(path, "port"), c.Port)
	if c.MaxAllowedPacket < 0 {
		p.add(join(path, "max-allowed-packet"), c.MaxAllowedPacket, "must not be negative")
	}
	c.Security.validate(p, join(path, "security"))
}

func validatePort(p *problems, field string, port int) {
	if port < 1 || port > 65535 {
		p.add(field, port, "must be between 1 and 65535")
	}
}

// validate checks a binlog location; path is the field of the Meta.
func (m *Meta) validate(p *problems, path string) {
	if m.BinlogName != "" && m.BinlogPos < MinBinlogPos {
		p.add(join(path, "binlog-pos"), m.BinlogPos, "must be at least 4 (the binlog file header is 4 bytes)")
	}
	if m.BinlogName == "" && m.BinlogPos != 0 && m.BinlogPos != MinBinlogPos {
		p.add(join(path, "binlog-name"), m.BinlogName, "must be set when binlog-pos is set")
	}
}

// empty reports whether the location names no start point.
func (m *Meta) empty() bool { return m.BinlogName == "" && m.BinlogGTID == "" }

func validateTaskMode(p *problems, field, mode string) {
	switch strings.ToLower(mode) {
	case ModeFull, ModeIncremental, ModeAll:
	default:
		p.add(field, mode, "must be full, incremental or all")
	}
}

func validateMetaSchema(p *problems, field, schema string) {
	if schema == "" || len(schema) > 64 || strings.ContainsAny(schema, "`\x00") {
		p.add(field, schema, "must be a schema name of 1 to 64 characters without ` or NUL")
	}
}

// CheckingItems maps the precheck items a task's ignore-checking-items may
// name, DM's names (tiflow dm/config checking_item.go) and this worker's,
// to this worker's items they stand for; "all" stands for every item. A DM
// item this worker does not check (version, conn_number, the lightning
// ones, ...) stands for none: ignoring it changes nothing.
var CheckingItems = map[string][]string{
	"all":                    nil,
	"dump_privilege":         {"privilege_select", "privilege_reload"},
	"replication_privilege":  {"privilege_replication_client", "privilege_replication_slave"},
	"version":                {},
	"server_id":              {"server_id"},
	"binlog_enable":          {"log_bin"},
	"binlog_format":          {"binlog_format"},
	"binlog_row_image":       {"binlog_row_image"},
	"table_schema":           {"table_keys", "target_table_schema"},
	"schema_of_shard_tables": {"shard_table_schema"},
	"auto_increment_ID":      {"shard_auto_increment"},
	"online_ddl":             {"online_ddl"},
	"binlog_db":              {},
	"conn_number":            {},
	"target_privilege":       {"target_writable"},
	"meta_position":          {},
	"lightning_empty_region": {}, "lightning_region_distribution": {}, "lightning_cluster_version": {},
	"lightning_free_space": {}, "lightning_sorting_space": {}, "lightning_mutex_feature": {},
	"lightning_table_empty": {}, "lightning_cdc_pitr": {},
	// This worker's own items.
	"log_bin": {"log_bin"}, "binlog_row_metadata": {"binlog_row_metadata"}, "gtid": {"gtid"},
	"binlog_retention": {"binlog_retention"}, "privilege_select": {"privilege_select"},
	"privilege_reload": {"privilege_reload"}, "privilege_replication_client": {"privilege_replication_client"},
	"privilege_replication_slave": {"privilege_replication_slave"}, "source_tables": {"source_tables"},
	"target_tables": {"target_tables"}, "table_keys": {"table_keys"}, "target_table_schema": {"target_table_schema"},
	"target_writable": {"target_writable"}, "foreign_keys": {"foreign_keys"},
	"shard_table_schema": {"shard_table_schema"}, "shard_auto_increment": {"shard_auto_increment"},
	"expression_filters": {"expression_filters"},
}

func validateCheckingItems(p *problems, field string, names []string) {
	for i, n := range names {
		if _, ok := CheckingItems[n]; !ok {
			p.add(index(field, i), n, "not a precheck item: use DM's names (all, dump_privilege, replication_privilege, "+
				"server_id, binlog_enable, binlog_format, binlog_row_image, table_schema, schema_of_shard_tables, "+
				"auto_increment_ID, online_ddl, target_privilege, ...) or this worker's (binlog_row_metadata, gtid, ...)")
		}
	}
}
