package filter

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

func TestTables(t *testing.T) {
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
			f := NewTables(tt.list, tt.caseSensitive)
			for _, c := range tt.checks {
				if got := f.TableAllowed(c.schema, c.table); got != c.want {
					t.Errorf("TableAllowed(%q, %q) = %v, want %v", c.schema, c.table, got, c.want)
				}
			}
		})
	}
}
