package config

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// dmTaskYAML is a task file in DM's format, as in the DM documentation.
const dmTaskYAML = `
name: test
task-mode: all
meta-schema: "dm_meta"
case-sensitive: false

target-database:
  host: "127.0.0.1"
  port: 4000
  user: "root"
  password: "target-pw"

block-allow-list:
  bw-rule-1:
    do-dbs: ["all_mode"]
    ignore-tables:
      - db-name: "all_mode"
        tbl-name: "tmp_*"
  bw-rule-2:
    do-tables:
      - {db-name: "shard_?", tbl-name: "orders"}

routes:
  route-rule-1:
    schema-pattern: "test_*"
    table-pattern: "t_*"
    target-schema: "test"
    target-table: "t"
  route-rule-2:
    schema-pattern: "test_*"
    target-schema: "test"

filters:
  filter-rule-1:
    schema-pattern: "test_*"
    table-pattern: "t_*"
    events: ["truncate table", "DROP TABLE"]
    action: Ignore
  filter-rule-2:
    schema-pattern: "test_*"
    sql-pattern: ["^DROP\\s+PROCEDURE", "^CREATE\\s+PROCEDURE"]
    action: ignore

mydumpers:
  global:
    threads: 8
    rows: 5000

loaders:
  global:
    pool-size: 32
    dir: "./dumped_data"

syncers:
  global:
    worker-count: 32
    batch: 200
    safe-mode: true
  small:
    worker-count: 2

validators:
  global:
    mode: full
    worker-count: 8
    row-error-delay: 10m

mysql-instances:
  - source-id: "mysql-replica-01"
    meta:
      binlog-name: binlog.000001
      binlog-pos: 4
      binlog-gtid: ""
    block-allow-list: "bw-rule-1"
    route-rules: ["route-rule-1", "route-rule-2"]
    filter-rules: ["filter-rule-1"]
    mydumper-config-name: "global"
    loader-config-name: "global"
    syncer-config-name: "global"
    validator-config-name: "global"

  - source-id: "mysql-replica-02"
    block-allow-list: "bw-rule-2"
    route-rules: ["route-rule-2"]
    filter-rules: ["filter-rule-2", "filter-rule-1"]
    syncer-config-name: "small"
`

func TestTaskConfigSplit(t *testing.T) {
	task, err := ParseTaskConfig([]byte(dmTaskYAML))
	if err != nil {
		t.Fatal(err)
	}
	subs, err := task.SubTaskConfigs()
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 2 {
		t.Fatalf("got %d subtasks", len(subs))
	}
	a, b := subs[0], subs[1]

	// Inherited from the task.
	for _, st := range subs {
		if st.Name != "test" || st.TaskMode != ModeAll || st.MetaSchema != "dm_meta" || st.CaseSensitive {
			t.Errorf("%s: inherited fields: %+v", st.SourceID, st)
		}
		if !reflect.DeepEqual(st.TargetDatabase, DBConfig{Host: "127.0.0.1", Port: 4000, User: "root", Password: "target-pw"}) {
			t.Errorf("%s: target: %v", st.SourceID, st.TargetDatabase)
		}
		requireProblems(t, st.Validate())
	}

	// Instance 1: every named piece.
	if a.SourceID != "mysql-replica-01" || a.Meta != (Meta{BinlogName: "binlog.000001", BinlogPos: 4}) {
		t.Errorf("a: source/meta: %s %+v", a.SourceID, a.Meta)
	}
	if len(a.BAList.DoDBs) != 1 || a.BAList.DoDBs[0] != "all_mode" || a.BAList.IgnoreTables[0] != (TableRef{DBName: "all_mode", TblName: "tmp_*"}) {
		t.Errorf("a: ba-list: %+v", a.BAList)
	}
	if len(a.RouteRules) != 2 || a.RouteRules[0].TargetTable != "t" || a.RouteRules[1].TablePattern != "" {
		t.Errorf("a: routes: %+v", a.RouteRules)
	}
	if len(a.FilterRules) != 1 || a.FilterRules[0].Events[1] != "drop table" || a.FilterRules[0].Action != FilterIgnore {
		t.Errorf("a: filters: %+v", a.FilterRules)
	}
	if a.Syncer != (SyncerConfig{WorkerCount: 32, Batch: 200, SafeMode: true, CheckpointFlushInterval: 30}) {
		t.Errorf("a: syncer: %+v", a.Syncer)
	}
	if a.Mydumper != (MydumperConfig{Threads: 8, Rows: 5000}) || a.Loader != (LoaderConfig{PoolSize: 32, Dir: "./dumped_data"}) {
		t.Errorf("a: mydumper/loader: %+v %+v", a.Mydumper, a.Loader)
	}
	if a.Validator != (ValidatorConfig{Mode: ValidationFull, WorkerCount: 8, RowErrorDelay: Duration{10 * time.Minute}}) {
		t.Errorf("a: validator: %+v", a.Validator)
	}

	// Instance 2: other names, defaults for what it does not name.
	if b.SourceID != "mysql-replica-02" || b.Meta != (Meta{}) {
		t.Errorf("b: source/meta: %s %+v", b.SourceID, b.Meta)
	}
	if len(b.BAList.DoTables) != 1 || b.BAList.DoTables[0].DBName != "shard_?" || b.BAList.DoDBs != nil {
		t.Errorf("b: ba-list: %+v", b.BAList)
	}
	if len(b.FilterRules) != 2 || b.FilterRules[0].SQLPattern[0] != `^DROP\s+PROCEDURE` || b.FilterRules[0].Action != FilterIgnore || b.FilterRules[1].Events[0] != "truncate table" {
		t.Errorf("b: filters (in instance order): %+v", b.FilterRules)
	}
	if b.Syncer != (SyncerConfig{WorkerCount: 2, Batch: 100, CheckpointFlushInterval: 30}) {
		t.Errorf("b: syncer (named, defaults filled): %+v", b.Syncer)
	}
	if b.Mydumper != (MydumperConfig{Threads: 4, Rows: 10000}) || b.Loader != (LoaderConfig{PoolSize: 16}) {
		t.Errorf("b: default mydumper/loader: %+v %+v", b.Mydumper, b.Loader)
	}
	if b.Validator != (ValidatorConfig{Mode: ValidationNone, WorkerCount: 4, RowErrorDelay: Duration{30 * time.Minute}}) {
		t.Errorf("b: default validator: %+v", b.Validator)
	}

	// Copies, not shared: changing a subtask leaves the task and the other
	// subtask alone.
	a.FilterRules[0].Events[0] = "insert"
	if task.Filters["filter-rule-1"].Events[0] != "truncate table" || b.FilterRules[1].Events[0] != "truncate table" {
		t.Errorf("filter events are shared between subtasks and the task")
	}
	a.BAList.DoDBs[0] = "changed"
	if task.BAList["bw-rule-1"].DoDBs[0] != "all_mode" {
		t.Errorf("ba-list is shared with the task")
	}
}

func TestTaskConfigValidate(t *testing.T) {
	const head = "name: t\ntask-mode: all\ntarget-database: {host: h}\n"
	tests := []struct {
		name   string
		yaml   string
		fields []string
	}{
		{name: "dm task", yaml: dmTaskYAML},
		{name: "minimal", yaml: head + "mysql-instances: [{source-id: s1}]\n"},
		{name: "no instances, bad basics", yaml: "name: ''\ntask-mode: half\ntarget-database: {host: '', port: 99999}\n",
			fields: []string{"name", "task-mode", "target-database.host", "target-database.port", "mysql-instances"}},
		{name: "duplicate source ids", yaml: head + "mysql-instances: [{source-id: s1}, {source-id: s2}, {source-id: s1}]\n",
			fields: []string{"mysql-instances[2].source-id"}},
		{name: "bad source id", yaml: head + "mysql-instances: [{source-id: 'a b'}]\n", fields: []string{"mysql-instances[0].source-id"}},
		{name: "missing references", yaml: head + `
routes: {r1: {schema-pattern: a, target-schema: b}}
mysql-instances:
  - source-id: s1
    block-allow-list: nope
    route-rules: [r1, r2]
    filter-rules: [f1]
    syncer-config-name: sy
    mydumper-config-name: md
    loader-config-name: ld
    validator-config-name: vd
`, fields: []string{
			"mysql-instances[0].block-allow-list", "mysql-instances[0].route-rules[1]", "mysql-instances[0].filter-rules[0]",
			"mysql-instances[0].syncer-config-name", "mysql-instances[0].mydumper-config-name",
			"mysql-instances[0].loader-config-name", "mysql-instances[0].validator-config-name",
		}},
		// s2 has no meta: it resumes from checkpoints (dmctl checks them).
		{name: "an incremental meta names a start", yaml: "name: t\ntask-mode: incremental\ntarget-database: {host: h}\n" +
			"mysql-instances: [{source-id: s1, meta: {binlog-gtid: '0-1-2'}}, {source-id: s2}, {source-id: s3, meta: {}}]\n",
			fields: []string{"mysql-instances[2].meta"}},
		{name: "bad named rules", yaml: head + `
routes: {r1: {table-pattern: x}}
filters: {f1: {schema-pattern: s, events: [nope], action: Do}}
syncers: {g: {batch: -1}}
mydumpers: {g: {threads: -2}}
loaders: {g: {pool-size: -1}}
validators: {g: {mode: slow}}
block-allow-list: {b: {do-tables: [{tbl-name: x}]}}
mysql-instances: [{source-id: s1}]
`, fields: []string{
			"routes.r1.schema-pattern", "routes.r1.target-schema", "filters.f1.events[0]", "syncers.g.batch",
			"mydumpers.g.threads", "loaders.g.pool-size", "validators.g.mode", "block-allow-list.b.do-tables[0].db-name",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseTaskConfig([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			err = c.Validate()
			requireProblems(t, err, tt.fields...)
			subs, splitErr := c.SubTaskConfigs()
			if (err == nil) != (splitErr == nil) {
				t.Fatalf("Validate = %v but SubTaskConfigs = %v", err, splitErr)
			}
			if splitErr != nil && (subs != nil || !errors.Is(splitErr, ErrInvalidConfig)) {
				t.Errorf("SubTaskConfigs on an invalid task: %v, %v", subs, splitErr)
			}
		})
	}
}

func TestTaskConfigRoundTrip(t *testing.T) {
	c, err := ParseTaskConfig([]byte(dmTaskYAML))
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.JSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseTaskConfig(j)
	if err != nil || !back.Equal(c) {
		t.Fatalf("YAML→struct→JSON→struct changed it:\n%s\n%v", j, err)
	}
	y, err := back.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err = ParseTaskConfig(y)
	if err != nil || !back.Equal(c) {
		t.Fatalf("YAML round trip:\n%s\n%v", y, err)
	}
	if !strings.Contains(string(j), `"mysql-instances":[{"source-id":"mysql-replica-01"`) {
		t.Errorf("JSON names: %s", j)
	}
}

// TestTaskConfigCleanDumpFile: DM's task-level clean-dump-file reaches
// every subtask whose loader does not set cleanup-dump-file itself.
func TestTaskConfigCleanDumpFile(t *testing.T) {
	const task = `
name: t1
task-mode: full
clean-dump-file: false
target-database: {host: 127.0.0.1, port: 3306, user: root}
mysql-instances:
  - source-id: s1
  - source-id: s2
    loader-config-name: keep
  - source-id: s3
loaders:
  keep: {cleanup-dump-file: true}
`
	c, err := ParseTaskConfig([]byte(task))
	if err != nil {
		t.Fatal(err)
	}
	subs, err := c.SubTaskConfigs()
	if err != nil {
		t.Fatal(err)
	}
	if subs[0].Loader.CleanupDump() || !subs[1].Loader.CleanupDump() || subs[2].Loader.CleanupDump() {
		t.Fatalf("cleanup per source: %v %v %v, want false true false",
			subs[0].Loader.CleanupDump(), subs[1].Loader.CleanupDump(), subs[2].Loader.CleanupDump())
	}
	c.CleanDumpFile = nil
	if subs, _ = c.SubTaskConfigs(); !subs[0].Loader.CleanupDump() {
		t.Fatal("omitted clean-dump-file must mean true")
	}
}

func TestTaskConfigAcceptsDMCompatFields(t *testing.T) {
	const base = `
name: t1
task-mode: incremental
online-ddl: true
timezone: "+00:00"
clean-dump-file: true
collation_compatible: loose
ignore-checking-items: ["all"]
target-database: {host: 127.0.0.1, port: 3306, user: root}
mysql-instances:
  - source-id: s1
    meta: {binlog-name: mariadb-bin.000001, binlog-pos: 4}
`
	c, err := ParseTaskConfig([]byte(base))
	if err != nil {
		t.Fatalf("DM fields must load: %v", err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("DM fields must validate: %v", err)
	}
	if want := []string{"timezone"}; !slices.Equal(c.Notes.Ignored, want) {
		t.Errorf("ignored fields %v, want %v", c.Notes.Ignored, want)
	}
	if !slices.Equal(c.IgnoreCheckingItems, []string{"all"}) {
		t.Errorf("ignore-checking-items = %q", c.IgnoreCheckingItems)
	}
	bad := strings.Replace(base, `ignore-checking-items: ["all"]`, `ignore-checking-items: ["all", "versoin"]`, 1)
	if _, _, err := CheckTaskConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), "ignore-checking-items[1]") {
		t.Errorf("a misspelt checking item must be refused naming it: %v", err)
	}
	if !c.OnlineDDL {
		t.Error("online-ddl: true was not read")
	}
}

func TestTaskConfigShardMode(t *testing.T) {
	base := "name: t1\ntask-mode: all\ntarget-database: {host: h}\nmysql-instances: [{source-id: s1}, {source-id: s2}]\n"
	for _, tt := range []struct{ add, want string }{
		{"", ""},
		{"shard-mode: pessimistic\n", ShardPessimistic},
		{"shard-mode: Pessimistic\n", ShardPessimistic},
		{"is-sharding: true\n", ShardPessimistic},
		{"is-sharding: false\n", ""},
	} {
		_, subs, err := CheckTaskConfig([]byte(base + tt.add))
		if err != nil {
			t.Errorf("%q: %v", tt.add, err)
			continue
		}
		for _, st := range subs {
			if st.ShardMode != tt.want {
				t.Errorf("%q: subtask %s has shard-mode %q, want %q", tt.add, st.SourceID, st.ShardMode, tt.want)
			}
			if err := st.Validate(); err != nil {
				t.Errorf("%q: subtask %s: %v", tt.add, st.SourceID, err)
			}
		}
	}
	for _, tt := range []struct{ add, field, says string }{
		{"shard-mode: pesimistic\n", "shard-mode", `want "pessimistic"`},
		{"shard-mode: pessimistic\nstrict-optimistic-shard-mode: true\n", "strict-optimistic-shard-mode", "optimistic"},
	} {
		_, _, err := CheckTaskConfig([]byte(base + tt.add))
		if err == nil || !strings.Contains(err.Error(), tt.field) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%q: want an error naming %s that says %q, got %v", tt.add, tt.field, tt.says, err)
		}
	}
}

func TestTaskConfigOnlineDDL(t *testing.T) {
	base := "name: t1\ntask-mode: all\ntarget-database: {host: h}\nmysql-instances: [{source-id: s1}]\n"
	for _, tt := range []struct {
		add  string
		want bool
	}{{"", false}, {"online-ddl: true\n", true}, {"online-ddl-scheme: gh-ost\n", true}, {"online-ddl-scheme: pt\n", true}} {
		_, subs, err := CheckTaskConfig([]byte(base + tt.add))
		if err != nil {
			t.Fatalf("%q: %v", tt.add, err)
		}
		if subs[0].OnlineDDL != tt.want {
			t.Errorf("%q: online-ddl %v, want %v", tt.add, subs[0].OnlineDDL, tt.want)
		}
	}
	_, subs, err := CheckTaskConfig([]byte(base + "online-ddl: true\nshadow-table-rules: ['^(.+)_s$']\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := subs[0].OnlineDDLRules(); err != nil || r == nil {
		t.Fatalf("rules %v, %v", r, err)
	}
	for _, tt := range []struct{ add, field string }{
		{"online-ddl-scheme: osc\n", "online-ddl-scheme"},
		{"online-ddl: true\nshadow-table-rules: ['^_t_gho$']\n", "shadow-table-rules[0]"},
		{"online-ddl: true\ntrash-table-rules: ['(']\n", "trash-table-rules[0]"},
	} {
		if _, _, err := CheckTaskConfig([]byte(base + tt.add)); err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%q: want an error naming %s, got %v", tt.add, tt.field, err)
		}
	}
}

// TestFilterEventAliases: DM's alias event names and "truncate" are read as
// the events they stand for, so the worker's filter matches them.
func TestFilterEventAliases(t *testing.T) {
	const doc = `
name: t1
task-mode: all
target-database: {host: 127.0.0.1, port: 3306, user: root}
mysql-instances:
  - source-id: s1
    filter-rules: [f1]
filters:
  f1: {schema-pattern: "*", table-pattern: "*", events: ["Truncate", "drop table", "CREATE SCHEMA", "drop schema", "alter schema"], action: Ignore}
`
	_, subs, err := CheckTaskConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	got := subs[0].FilterRules[0].Events
	if want := []string{"truncate table", "drop table", "create database", "drop database", "alter database"}; !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	if _, _, err := CheckTaskConfig([]byte(strings.Replace(doc, `"Truncate"`, `"truncat"`, 1))); err == nil || !strings.Contains(err.Error(), `"truncat"`) {
		t.Errorf("a misspelt event must be refused naming it, got %v", err)
	}
}

// TestMydumperWhere: mydumpers.*.where reaches the subtask; a condition
// that does not parse is refused naming its path.
func TestMydumperWhere(t *testing.T) {
	base := "name: t1\ntask-mode: all\ntarget-database: {host: h}\nmysql-instances: [{source-id: s1, mydumper-config-name: m}]\n"
	_, subs, err := CheckTaskConfig([]byte(base + "mydumpers: {m: {where: 'id > 3 AND name LIKE \"a%\"'}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := subs[0].Mydumper.Where; got != `id > 3 AND name LIKE "a%"` {
		t.Errorf("subtask where = %q", got)
	}
	for _, bad := range []string{"id >", "1; DROP TABLE t", "id > 3) OR (1"} {
		_, _, err := CheckTaskConfig([]byte(base + "mydumpers: {m: {where: '" + bad + "'}}\n"))
		if err == nil || !strings.Contains(err.Error(), "mydumpers.m.where") {
			t.Errorf("where %q: want a refusal naming mydumpers.m.where, got %v", bad, err)
		}
	}
}
