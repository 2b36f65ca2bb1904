package filter

import (
	"testing"

	"github.com/dmworker/dm-worker/config"
)

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
			{"app", "t1", EvDelete, "", true, ""}, {"app", "t1", EvInsert, "", false, ""}, {"app", "u", EvDelete, "", false, ""},
			{"other", "t1", EvDelete, "", false, ""},
		}},
		{"ignore all ddl of schema", []config.FilterRule{{SchemaPattern: "app", Events: []string{"all ddl"}, Action: "Ignore"}}, []check{
			{"app", "t", EvAlterTable, "ALTER TABLE t ADD c INT", true, ""}, {"app", "t", EvUpdate, "", false, ""},
			{"app", "", EvDropDatabase, "DROP DATABASE app", true, ""},
		}},
		{"table rule does not match schema-level DDL", []config.FilterRule{{SchemaPattern: "app", TablePattern: "t", Events: []string{"all"}, Action: "Ignore"}}, []check{
			{"app", "", EvDropDatabase, "DROP DATABASE app", false, ""}, {"app", "t", EvInsert, "", true, ""},
		}},
		{"sql pattern", []config.FilterRule{{SchemaPattern: "*", SQLPattern: []string{`^DROP\s+TABLE`}, Action: "Ignore"}}, []check{
			{"app", "t", EvDropTable, "drop table t", true, ""}, {"app", "t", EvCreateTable, "CREATE TABLE t (a INT)", false, ""},
		}},
		{"do rule keeps only its events", []config.FilterRule{{SchemaPattern: "app", TablePattern: "*", Events: []string{"insert", "create table"}, Action: "Do"}}, []check{
			{"app", "t", EvInsert, "", false, ""}, {"app", "t", EvDelete, "", true, ""}, {"app", "t", EvCreateTable, "CREATE TABLE t (a INT)", false, ""},
			{"other", "t", EvDelete, "", false, ""},
		}},
		{"error rule names rule, schema, table and event", []config.FilterRule{
			{Name: "no-drop", SchemaPattern: "app", Events: []string{"drop table", "drop database"}, Action: "Error"},
			{SchemaPattern: "app", TablePattern: "t", SQLPattern: []string{"^TRUNCATE"}, Action: "Error"},
		}, []check{
			{"app", "t", EvDropTable, "DROP TABLE t", true, "filter rule no-drop (action Error) matched event \"drop table\" on `app`.`t`"},
			{"app", "", EvDropDatabase, "DROP DATABASE app", true, "filter rule no-drop (action Error) matched event \"drop database\" on `app`"},
			{"app", "t", EvTruncateTable, "TRUNCATE TABLE t", true, "filter rule filter-rules[1] (action Error) matched event \"truncate table\" on `app`.`t`"},
			{"app", "t", EvInsert, "", false, ""}, {"other", "t", EvDropTable, "DROP TABLE t", false, ""},
		}},
		{"an earlier ignore rule wins over an error rule", []config.FilterRule{
			{SchemaPattern: "app", Events: []string{"delete"}, Action: "Ignore"},
			{Name: "guard", SchemaPattern: "*", Events: []string{"all dml"}, Action: "Error"},
		}, []check{
			{"app", "t", EvDelete, "", true, ""},
			{"app", "t", EvInsert, "", true, "filter rule guard (action Error) matched event \"insert\" on `app`.`t`"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewEventFilter(tt.rules, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tt.checks {
				got, err := f.Skip(c.schema, c.table, c.event, c.sql)
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
	if _, err := NewEventFilter([]config.FilterRule{{SchemaPattern: "*", SQLPattern: []string{"("}, Action: "Ignore"}}, false); err == nil {
		t.Fatal("a broken sql-pattern was accepted")
	}
}
