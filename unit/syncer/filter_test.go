package syncer

import (
	"testing"

	"github.com/dmworker/dm-worker/config"
)

func TestWildcardMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true},
		{"*", "abc", true},
		{"a*", "abc", true},
		{"a*c", "abbbc", true},
		{"a*c", "abcd", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"db_*_?", "db_x_1", true},
		{"db_*_?", "db_x_12", false},
		{"exact", "exact", true},
		{"exact", "exact1", false},
		{"*a*b*", "xxaxxbxx", true},
		{"*a*b*", "xxbxxaxx", false},
		{"[x]", "[x]", true},
	}
	for _, tt := range tests {
		if got := wildcardMatch(tt.pattern, tt.name); got != tt.want {
			t.Errorf("wildcardMatch(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestTableFilter(t *testing.T) {
	type check struct {
		schema, table string
		want          bool
	}
	tests := []struct {
		name          string
		list          config.BAList
		caseSensitive bool
		checks        []check
	}{
		{"empty allows all but system", config.BAList{}, false, []check{
			{"app", "t", true}, {"mysql", "user", false}, {"information_schema", "tables", false},
		}},
		{"do-dbs", config.BAList{DoDBs: []string{"app*"}}, false, []check{
			{"app", "t", true}, {"app2", "x", true}, {"other", "t", false},
		}},
		{"ignore-dbs", config.BAList{IgnoreDBs: []string{"tmp?"}}, false, []check{
			{"tmp1", "t", false}, {"tmp", "t", true}, {"app", "t", true},
		}},
		{"do-tables narrow their schema only", config.BAList{
			DoDBs:    []string{"keep"},
			DoTables: []config.TableRef{{DBName: "app", TblName: "orders*"}},
		}, false, []check{
			{"app", "orders", true}, {"app", "orders_2024", true}, {"app", "users", false},
			{"keep", "anything", true}, {"other", "t", false},
		}},
		{"ignore-tables", config.BAList{IgnoreTables: []config.TableRef{{DBName: "app", TblName: "log_*"}}}, false, []check{
			{"app", "log_1", false}, {"app", "orders", true}, {"other", "log_1", true},
		}},
		{"case-insensitive", config.BAList{DoTables: []config.TableRef{{DBName: "App", TblName: "T"}}}, false, []check{
			{"app", "t", true}, {"APP", "T", true},
		}},
		{"case-sensitive", config.BAList{DoTables: []config.TableRef{{DBName: "App", TblName: "T"}}}, true, []check{
			{"app", "t", false}, {"App", "T", true},
		}},
		{"~ regular expressions (DM's syntax)", config.BAList{DoDBs: []string{"do", "~^x+$"},
			DoTables:     []config.TableRef{{DBName: "~^test.*", TblName: "~^t.*"}},
			IgnoreTables: []config.TableRef{{DBName: "~^test", TblName: "~_log$"}}}, false, []check{
			{"test1", "t1", true}, {"TEST2", "Tx", true}, {"test1", "u1", false}, {"test1", "t_log", false},
			{"do", "anything", true}, {"xtest", "t1", false}, {"xx", "any", true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTableFilter(tt.list, tt.caseSensitive)
			for _, c := range tt.checks {
				if got := f.tableAllowed(c.schema, c.table); got != c.want {
					t.Errorf("tableAllowed(%q, %q) = %v, want %v", c.schema, c.table, got, c.want)
				}
			}
		})
	}
}

func TestEventFilter(t *testing.T) {
	type check struct {
		schema, table, event, sql string
		skip                      bool
		fail                      string // the error of an Error rule
	}
	tests := []struct {
		name   string
		rules  []config.FilterRule
		checks []check
	}{
		{"ignore delete", []config.FilterRule{{SchemaPattern: "app", TablePattern: "t*", Events: []string{"delete"}, Action: "Ignore"}}, []check{
			{"app", "t1", evDelete, "", true, ""}, {"app", "t1", evInsert, "", false, ""}, {"app", "u", evDelete, "", false, ""},
			{"other", "t1", evDelete, "", false, ""},
		}},
		{"ignore all ddl of schema", []config.FilterRule{{SchemaPattern: "app", Events: []string{"all ddl"}, Action: "Ignore"}}, []check{
			{"app", "t", evAlterTable, "ALTER TABLE t ADD c INT", true, ""}, {"app", "t", evUpdate, "", false, ""},
			{"app", "", evDropDatabase, "DROP DATABASE app", true, ""},
		}},
		{"table rule does not match schema-level DDL", []config.FilterRule{{SchemaPattern: "app", TablePattern: "t", Events: []string{"all"}, Action: "Ignore"}}, []check{
			{"app", "", evDropDatabase, "DROP DATABASE app", false, ""}, {"app", "t", evInsert, "", true, ""},
		}},
		{"sql pattern", []config.FilterRule{{SchemaPattern: "*", SQLPattern: []string{`^DROP\s+TABLE`}, Action: "Ignore"}}, []check{
			{"app", "t", evDropTable, "drop table t", true, ""}, {"app", "t", evCreateTable, "CREATE TABLE t (a INT)", false, ""},
		}},
		{"do rule keeps only its events", []config.FilterRule{{SchemaPattern: "app", TablePattern: "*", Events: []string{"insert", "create table"}, Action: "Do"}}, []check{
			{"app", "t", evInsert, "", false, ""}, {"app", "t", evDelete, "", true, ""}, {"app", "t", evCreateTable, "CREATE TABLE t (a INT)", false, ""},
			{"other", "t", evDelete, "", false, ""},
		}},
		{"error rule names rule, schema, table and event", []config.FilterRule{
			{Name: "no-drop", SchemaPattern: "app", Events: []string{"drop table", "drop database"}, Action: "Error"},
			{SchemaPattern: "app", TablePattern: "t", SQLPattern: []string{"^TRUNCATE"}, Action: "Error"},
		}, []check{
			{"app", "t", evDropTable, "DROP TABLE t", true, "filter rule no-drop (action Error) matched event \"drop table\" on `app`.`t`"},
			{"app", "", evDropDatabase, "DROP DATABASE app", true, "filter rule no-drop (action Error) matched event \"drop database\" on `app`"},
			{"app", "t", evTruncateTable, "TRUNCATE TABLE t", true, "filter rule filter-rules[1] (action Error) matched event \"truncate table\" on `app`.`t`"},
			{"app", "t", evInsert, "", false, ""}, {"other", "t", evDropTable, "DROP TABLE t", false, ""},
		}},
		{"an earlier ignore rule wins over an error rule", []config.FilterRule{
			{SchemaPattern: "app", Events: []string{"delete"}, Action: "Ignore"},
			{Name: "guard", SchemaPattern: "*", Events: []string{"all dml"}, Action: "Error"},
		}, []check{
			{"app", "t", evDelete, "", true, ""},
			{"app", "t", evInsert, "", true, "filter rule guard (action Error) matched event \"insert\" on `app`.`t`"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := newEventFilter(tt.rules, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tt.checks {
				got, err := f.skip(c.schema, c.table, c.event, c.sql)
				if got != c.skip || (err != nil) != (c.fail != "") {
					t.Errorf("skip(%q, %q, %q, %q) = %v, %v; want %v, error %q", c.schema, c.table, c.event, c.sql, got, err, c.skip, c.fail)
				}
				if err != nil && err.Error() != c.fail {
					t.Errorf("skip(%q, %q, %q, %q) error %q, want %q", c.schema, c.table, c.event, c.sql, err, c.fail)
				}
			}
		})
	}
}

func TestEventFilterRejectsBadPattern(t *testing.T) {
	if _, err := newEventFilter([]config.FilterRule{{SchemaPattern: "*", SQLPattern: []string{"("}, Action: "Ignore"}}, false); err == nil {
		t.Fatal("a broken sql-pattern was accepted")
	}
}
