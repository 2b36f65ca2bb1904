package config

import (
	"testing"
	"time"
)

const subtaskYAML = `
name: task1
source-id: mysql-01
task-mode: incremental
meta: {binlog-name: mariadb-bin.000003}
target-database: {host: 127.0.0.1, port: 4000, user: root, password: "tpw"}
case-sensitive: true
block-allow-list:
  do-dbs: [shop]
  do-tables: [{db-name: shop, tbl-name: "order_*"}]
  ignore-tables: [{db-name: shop, tbl-name: tmp}]
route-rules:
  - {schema-pattern: "shop", table-pattern: "order_*", target-schema: shop, target-table: orders}
filter-rules:
  - {schema-pattern: "shop", events: ["Truncate Table", "drop table"], sql-pattern: ["^DROP\\s+PROCEDURE"], action: ignore}
syncer: {worker-count: 8}
validator: {mode: Fast}
`

func TestParseSubTaskConfigDefaults(t *testing.T) {
	c, err := ParseSubTaskConfig([]byte(subtaskYAML))
	if err != nil {
		t.Fatal(err)
	}
	requireProblems(t, c.Validate())
	if c.Meta.BinlogPos != 4 {
		t.Errorf("binlog-pos default: %d", c.Meta.BinlogPos)
	}
	if c.MetaSchema != "dm_meta" {
		t.Errorf("meta-schema: %q", c.MetaSchema)
	}
	if want := (SyncerConfig{WorkerCount: 8, Batch: 100, CheckpointFlushInterval: 30}); c.Syncer != want {
		t.Errorf("syncer: %+v", c.Syncer)
	}
	if want := (MydumperConfig{Threads: 4, Rows: 10000}); c.Mydumper != want {
		t.Errorf("mydumper: %+v", c.Mydumper)
	}
	if c.Loader.PoolSize != 16 {
		t.Errorf("loader: %+v", c.Loader)
	}
	if want := (ValidatorConfig{Mode: ValidationFast, WorkerCount: 4, RowErrorDelay: Duration{30 * time.Minute}}); c.Validator != want {
		t.Errorf("validator: %+v", c.Validator)
	}
	f := c.FilterRules[0]
	if f.Action != FilterIgnore || f.Events[0] != "truncate table" {
		t.Errorf("filter not normalised: %+v", f)
	}
	if c.RouteRules[0].TargetTable != "orders" || c.BAList.DoTables[0].TblName != "order_*" {
		t.Errorf("rules: %+v %+v", c.RouteRules, c.BAList)
	}
}

func TestSubTaskConfigValidate(t *testing.T) {
	const base = "name: t1\nsource-id: s1\ntask-mode: all\ntarget-database: {host: h}\n"
	tests := []struct {
		name   string
		yaml   string
		fields []string
	}{
		{name: "valid", yaml: subtaskYAML},
		{name: "minimal", yaml: base},
		{name: "incremental without meta (resumes from checkpoints)", yaml: "name: t1\nsource-id: s1\ntask-mode: incremental\ntarget-database: {host: h}\n"},
		{name: "gtid meta is enough", yaml: "name: t1\nsource-id: s1\ntask-mode: incremental\nmeta: {binlog-gtid: 0-1-5}\ntarget-database: {host: h}\n"},
		{name: "names, mode, target",
			yaml:   "name: '-x'\nsource-id: ''\ntask-mode: sometimes\ntarget-database: {port: 0, host: ''}\nmeta-schema: ''\n",
			fields: []string{"name", "source-id", "task-mode", "target-database.host"}},
		{name: "bad binlog pos", yaml: base + "meta: {binlog-name: b.000001, binlog-pos: 2}\n", fields: []string{"meta.binlog-pos"}},
		{name: "pos without name", yaml: base + "meta: {binlog-pos: 100}\n", fields: []string{"meta.binlog-name"}},
		{name: "target port", yaml: "name: t1\nsource-id: s1\ntask-mode: full\ntarget-database: {host: h, port: 65536}\n",
			fields: []string{"target-database.port"}},
		{name: "tuning", yaml: base + "syncer: {worker-count: 2000, batch: 100001, checkpoint-flush-interval: -1}\nmydumper: {threads: -1, rows: -5}\nloader: {pool-size: -1}\nvalidator: {mode: paranoid, worker-count: -1, row-error-delay: -1s}\n",
			fields: []string{"syncer.worker-count", "syncer.batch", "syncer.checkpoint-flush-interval", "mydumper.threads", "mydumper.rows", "loader.pool-size", "validator.mode", "validator.worker-count", "validator.row-error-delay"}},
		{name: "rules", yaml: base + `
block-allow-list: {do-dbs: [""], do-tables: [{db-name: "", tbl-name: t}], ignore-tables: [{db-name: d}]}
route-rules:
  - {schema-pattern: s, target-schema: t}
  - {table-pattern: x}
  - {schema-pattern: s, target-schema: t, target-table: u}
filter-rules:
  - {schema-pattern: s, events: [insert], action: Do}
  - {schema-pattern: s, events: [insert, "explode table"], sql-pattern: ["(unclosed"], action: Maybe}
  - {action: Ignore}
`, fields: []string{
			"block-allow-list.do-dbs[0]", "block-allow-list.do-tables[0].db-name", "block-allow-list.ignore-tables[0].tbl-name",
			"route-rules[1].schema-pattern", "route-rules[1].target-schema", "route-rules[2].table-pattern",
			"filter-rules[1].events[1]", "filter-rules[1].sql-pattern[0]", "filter-rules[1].action",
			"filter-rules[2].schema-pattern", "filter-rules[2].events",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseSubTaskConfig([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			requireProblems(t, c.Validate(), tt.fields...)
		})
	}
}

func TestSubTaskConfigRoundTrip(t *testing.T) {
	c, err := ParseSubTaskConfig([]byte(subtaskYAML))
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.JSON()
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := ParseSubTaskConfig(j)
	if err != nil || !fromJSON.Equal(c) {
		t.Fatalf("YAML→struct→JSON→struct changed it:\n%s\n%+v, %v", j, fromJSON, err)
	}
	y, err := fromJSON.YAML()
	if err != nil {
		t.Fatal(err)
	}
	fromYAML, err := ParseSubTaskConfig(y)
	if err != nil || !fromYAML.Equal(c) {
		t.Fatalf("YAML round trip changed it:\n%s\n%v", y, err)
	}
	if fromYAML.TargetDatabase.Password != "tpw" {
		t.Errorf("JSON/YAML must keep the password for etcd: %q", fromYAML.TargetDatabase.Password)
	}
}
