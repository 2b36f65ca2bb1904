package extendcol

import (
	"strings"
	"testing"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"

	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

var cols = []filter.ExtendColumn{{Name: "c_table", Value: "1"}, {Name: "c_schema", Value: "s1"}, {Name: "c_source", Value: "m"}}

func edit(t *testing.T, sql string) (string, error) {
	t.Helper()
	p := parser.New()
	stmt, err := p.ParseOneStmt(sql, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ct := stmt.(*ast.CreateTableStmt)
	if err := AddToCreate(p, ct, cols); err != nil {
		return "", err
	}
	var b strings.Builder
	if err := ct.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err != nil {
		t.Fatal(err)
	}
	return b.String(), nil
}

func TestAddToCreate(t *testing.T) {
	ext := "`c_table` VARCHAR(128) CHARACTER SET UTF8MB4 COLLATE utf8mb4_bin NOT NULL DEFAULT _UTF8MB4'',`c_schema` VARCHAR(128) CHARACTER SET UTF8MB4 COLLATE utf8mb4_bin NOT NULL DEFAULT _UTF8MB4'',`c_source` VARCHAR(128) CHARACTER SET UTF8MB4 COLLATE utf8mb4_bin NOT NULL DEFAULT _UTF8MB4''"
	tests := []struct{ in, want string }{
		{"CREATE TABLE `t_1` (`id` int NOT NULL, `v` varchar(10), PRIMARY KEY (`id`), UNIQUE KEY `u` (`v`), KEY `k` (`v`)) ENGINE=InnoDB",
			"CREATE TABLE `t_1` (`id` INT NOT NULL,`v` VARCHAR(10)," + ext +
				",PRIMARY KEY(`id`, `c_table`, `c_schema`, `c_source`),UNIQUE `u`(`v`, `c_table`, `c_schema`, `c_source`),INDEX `k`(`v`)) ENGINE = InnoDB"},
		{"CREATE TABLE t (id int PRIMARY KEY AUTO_INCREMENT, e varchar(5) UNIQUE)",
			"CREATE TABLE `t` (`id` INT AUTO_INCREMENT,`e` VARCHAR(5)," + ext +
				",PRIMARY KEY(`id`, `c_table`, `c_schema`, `c_source`),UNIQUE KEY(`e`, `c_table`, `c_schema`, `c_source`))"},
		{"CREATE TABLE t (a int)", "CREATE TABLE `t` (`a` INT," + ext + ")"},
	}
	for _, tt := range tests {
		got, err := edit(t, tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.in, got, tt.want)
		}
	}
	if _, err := edit(t, "CREATE TABLE t (id int, C_Source int)"); err == nil || !strings.Contains(err.Error(), "`c_source`") {
		t.Errorf("a source column named like an extend column: %v", err)
	}
	if _, err := edit(t, "CREATE TABLE t LIKE u"); err == nil || !strings.Contains(err.Error(), "LIKE") {
		t.Errorf("LIKE: %v", err)
	}
}

func TestCheckTarget(t *testing.T) {
	tt := &sqlschema.Table{Columns: []sqlschema.Column{{Name: "id"}, {Name: "C_TABLE"}, {Name: "c_schema"}}}
	got := CheckTarget(tt, []string{"id", "c_schema"}, cols)
	if len(got) != 2 || !strings.Contains(got[0], "the source table has a column `c_schema`") || !strings.Contains(got[1], "`c_source` is missing") {
		t.Errorf("problems: %q", got)
	}
	if got := CheckTarget(&sqlschema.Table{Columns: []sqlschema.Column{{Name: "id"}, {Name: "c_table"}, {Name: "c_schema"}, {Name: "c_source"}}}, []string{"id"}, cols); got != nil {
		t.Errorf("a fitting table: %q", got)
	}
}
