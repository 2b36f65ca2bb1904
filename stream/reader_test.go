package stream

import (
	"reflect"
	"testing"

	"github.com/pingcap/tidb/pkg/parser"
)

func TestDDLTargets(t *testing.T) {
	p := parser.New()
	tests := []struct {
		query string
		want  []ddlTarget
		isDDL bool
	}{
		{"ALTER TABLE t ADD COLUMN c INT DEFAULT 5", []ddlTarget{{"app", "t"}}, true},
		{"CREATE TABLE other.t2 LIKE t", []ddlTarget{{"other", "t2"}, {"app", "t"}}, true},
		{"RENAME TABLE a TO b, other.c TO d", []ddlTarget{{"app", "a"}, {"app", "b"}, {"other", "c"}, {"app", "d"}}, true},
		{"DROP TABLE IF EXISTS x, y", []ddlTarget{{"app", "x"}, {"app", "y"}}, true},
		{"CREATE DATABASE IF NOT EXISTS shop", []ddlTarget{{db: "shop"}}, true},
		{"ALTER DATABASE CHARACTER SET utf8mb4", []ddlTarget{{db: "app"}}, true},
		{"TRUNCATE TABLE z", []ddlTarget{{"app", "z"}}, true},
		{"GRANT SELECT ON app.* TO 'u'@'%'", nil, false},
		{"SAVEPOINT s1", nil, false},
	}
	for _, tt := range tests {
		_, got, isDDL, err := ddlTargets(p, "app", tt.query)
		if err != nil || isDDL != tt.isDDL || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ddlTargets(%q) = %v, %v, %v; want %v, %v", tt.query, got, isDDL, err, tt.want, tt.isDDL)
		}
	}
	for q, want := range map[string]bool{"create or replace sequence s": true, "  (DROP x)": true, "FLUSH TABLES": false, "": false} {
		if ddlVerb(q) != want {
			t.Errorf("ddlVerb(%q) = %v", q, !want)
		}
	}
}
