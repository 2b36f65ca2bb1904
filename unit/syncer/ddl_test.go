package syncer

import (
	"reflect"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/collation"
	"github.com/dmworker/dm-worker/pkg/filter"
)

func TestTranslateDDL(t *testing.T) {
	events, err := filter.NewEventFilter([]config.FilterRule{
		{SchemaPattern: "app", TablePattern: "nodrop", Events: []string{"drop table"}, Action: config.FilterIgnore},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	d := newDDLTranslator(
		filter.NewTables(config.BAList{IgnoreTables: []config.TableRef{{DBName: "app", TblName: "skip*"}}}, false),
		events,
		filter.NewRouter([]config.RouteRule{{SchemaPattern: "shard*", TablePattern: "o*", TargetSchema: "m", TargetTable: "o"}}, "s1", false),
	)
	tests := []struct {
		name, schema, query string
		want                []targetDDL
	}{
		{"unrouted keeps text", "app", "ALTER TABLE t ADD COLUMN c INT",
			[]targetDDL{{sql: "ALTER TABLE t ADD COLUMN c INT", schema: "app"}}},
		{"qualified needs no USE", "", "ALTER TABLE app.t ADD INDEX i (c)",
			[]targetDDL{{sql: "ALTER TABLE app.t ADD INDEX i (c)"}}},
		{"ignored table", "app", "ALTER TABLE skip1 ADD COLUMN c INT", nil},
		{"routed create", "shard1", "CREATE TABLE o1 (id INT PRIMARY KEY)",
			[]targetDDL{{sql: "CREATE TABLE IF NOT EXISTS `m`.`o` (`id` INT PRIMARY KEY)", ensureSchemas: []string{"m"}}}},
		{"drop narrowed", "app", "DROP TABLE t, skip2, nodrop",
			[]targetDDL{{sql: "DROP TABLE `app`.`t`"}}},
		{"rename routed", "shard1", "RENAME TABLE o1 TO x",
			[]targetDDL{{sql: "RENAME TABLE `m`.`o` TO `shard1`.`x`", ensureSchemas: []string{"shard1"}}}},
		{"system schema", "mysql", "CREATE TABLE t (a INT)", nil},
		{"not ddl", "app", "GRANT SELECT ON *.* TO 'u'@'%'", nil},
		{"create database", "", "CREATE DATABASE app2",
			[]targetDDL{{sql: "CREATE DATABASE IF NOT EXISTS `app2`"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.translate(tt.schema, tt.query)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got { // what shard mode uses: TestTranslateDDLNames
				got[i].event, got[i].source, got[i].target, got[i].tables = "", tableName{}, tableName{}, nil
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("translate(%q) = %#v\nwant %#v", tt.query, got, tt.want)
			}
		})
	}
	if _, err := d.translate("app", "ALTER TABLE t FROBNICATE"); err == nil {
		t.Fatal("a statement that does not parse was accepted")
	}
}

// TestTranslateDDLNames: what shard mode reads of a translated statement:
// its filter event, upstream table, routed table, every dropped table, and
// with normalize the restored text even when nothing was rewritten.
func TestTranslateDDLNames(t *testing.T) {
	d := newDDLTranslator(filter.NewTables(config.BAList{}, false), mustEvents(t),
		filter.NewRouter([]config.RouteRule{{SchemaPattern: "shard*", TablePattern: "o*", TargetSchema: "m", TargetTable: "o"}}, "s1", false))
	d.normalize = true
	tests := []struct {
		schema, query string
		want          targetDDL
	}{
		{"shard1", "ALTER TABLE o1 ADD COLUMN c INT",
			targetDDL{sql: "ALTER TABLE `m`.`o` ADD COLUMN `c` INT", event: filter.EvAlterTable,
				source: tableName{Schema: "shard1", Table: "o1"}, target: tableName{Schema: "m", Table: "o"},
				tables: []tableName{{Schema: "shard1", Table: "o1"}}}},
		{"app", "ALTER TABLE t ADD COLUMN c INT",
			targetDDL{sql: "ALTER TABLE `app`.`t` ADD COLUMN `c` INT", event: filter.EvAlterTable,
				source: tableName{Schema: "app", Table: "t"}, target: tableName{Schema: "app", Table: "t"},
				tables: []tableName{{Schema: "app", Table: "t"}}}},
		{"shard2", "DROP TABLE o1, shard3.o2",
			targetDDL{sql: "DROP TABLE `m`.`o`, `m`.`o`", event: filter.EvDropTable,
				source: tableName{Schema: "shard2", Table: "o1"}, target: tableName{Schema: "m", Table: "o"},
				tables: []tableName{{Schema: "shard2", Table: "o1"}, {Schema: "shard3", Table: "o2"}}}},
	}
	for _, tt := range tests {
		got, err := d.translate(tt.schema, tt.query)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !reflect.DeepEqual(got[0], tt.want) {
			t.Errorf("translate(%q) = %#v\nwant %#v", tt.query, got, tt.want)
		}
	}
}

func mustEvents(t *testing.T) *filter.EventFilter {
	t.Helper()
	ev, err := filter.NewEventFilter(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestTranslateDDLCollations: with collation_compatible strict the routed
// statement gets the source session's defaults written in; loose (nil)
// keeps the text.
func TestTranslateDDLCollations(t *testing.T) {
	d := newDDLTranslator(filter.NewTables(config.BAList{}, false), mustEvents(t),
		filter.NewRouter([]config.RouteRule{{SchemaPattern: "shard*", TablePattern: "o*", TargetSchema: "m", TargetTable: "o"}}, "s1", false))
	strict := collation.Defaults{Server: "utf8mb4_unicode_ci", Charsets: map[string]string{"utf8mb4": "utf8mb4_unicode_ci", "latin1": "latin1_swedish_ci"}}
	tests := []struct {
		schema, query, strict, loose string
	}{
		{"", "CREATE DATABASE app2", "CREATE DATABASE IF NOT EXISTS `app2` COLLATE = utf8mb4_unicode_ci", "CREATE DATABASE IF NOT EXISTS `app2`"},
		{"", "CREATE DATABASE app2 CHARSET latin1", "CREATE DATABASE IF NOT EXISTS `app2` CHARACTER SET = latin1 COLLATE = latin1_swedish_ci",
			"CREATE DATABASE IF NOT EXISTS `app2` CHARACTER SET = latin1"},
		{"app", "CREATE TABLE t (a varchar(3) CHARACTER SET latin1) CHARSET utf8mb4",
			"CREATE TABLE `app`.`t` (`a` VARCHAR(3) CHARACTER SET LATIN1 COLLATE latin1_swedish_ci) DEFAULT CHARACTER SET = UTF8MB4 DEFAULT COLLATE = UTF8MB4_UNICODE_CI",
			"CREATE TABLE t (a varchar(3) CHARACTER SET latin1) CHARSET utf8mb4"},
		{"shard1", "CREATE TABLE o1 (a text) CHARSET latin1",
			"CREATE TABLE IF NOT EXISTS `m`.`o` (`a` TEXT) DEFAULT CHARACTER SET = LATIN1 DEFAULT COLLATE = LATIN1_SWEDISH_CI",
			"CREATE TABLE IF NOT EXISTS `m`.`o` (`a` TEXT) DEFAULT CHARACTER SET = LATIN1"},
		{"app", "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4", "ALTER TABLE `app`.`t` CONVERT TO CHARACTER SET UTF8MB4 COLLATE UTF8MB4_UNICODE_CI",
			"ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4"},
		{"app", "CREATE TABLE t (a int)", "CREATE TABLE t (a int)", "CREATE TABLE t (a int)"},
		{"app", "CREATE TABLE t2 LIKE t", "CREATE TABLE t2 LIKE t", "CREATE TABLE t2 LIKE t"},
	}
	for _, tt := range tests {
		for _, mode := range []struct {
			c    *collation.Defaults
			want string
		}{{&strict, tt.strict}, {nil, tt.loose}} {
			d.collations = mode.c
			got, err := d.translate(tt.schema, tt.query)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].sql != mode.want {
				t.Errorf("strict %v: translate(%q) = %#v\nwant %s", mode.c != nil, tt.query, got, mode.want)
			}
		}
	}
}
