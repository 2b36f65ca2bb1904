package filter

import (
	"slices"
	"testing"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// alterOld is the table the ALTERs below change, as information_schema
// describes it.
func alterOld(t *testing.T) *sqlschema.Table {
	t.Helper()
	col := func(name, dataType, columnType, charset string, nullable bool, def string, extra string) sqlschema.Column {
		c, err := sqlschema.NewColumn(name, dataType, columnType, charset, nullable)
		if err != nil {
			t.Fatal(err)
		}
		c.SetExtra(extra)
		c.SetDefault(def, def != "")
		return c
	}
	return &sqlschema.Table{Schema: "db", Name: "t", Columns: []sqlschema.Column{
		col("id", "int", "int(11)", "", false, "", "auto_increment"),
		col("n", "int", "int(11)", "", true, "NULL", ""),
		col("u", "int", "int(10) unsigned", "", true, "NULL", ""),
		col("d", "decimal", "decimal(10,2)", "", true, "NULL", ""),
		col("s", "varchar", "varchar(20)", "utf8mb4", true, "'x'", ""),
		col("c", "char", "char(5)", "utf8mb4", true, "NULL", ""),
		col("e", "enum", "enum('a','b')", "utf8mb4", true, "NULL", ""),
		col("k", "varchar", "varchar(10)", "utf8mb4", true, "NULL", ""),
	}, Indexes: []sqlschema.Index{
		{Name: "PRIMARY", Columns: []string{"id"}, Primary: true, Unique: true},
		{Name: "uk", Columns: []string{"k"}, Unique: true},
	}}
}

func TestAlterKinds(t *testing.T) {
	old := alterOld(t)
	cases := []struct {
		sql  string
		want []string
	}{
		{"ALTER TABLE t ADD COLUMN x INT", []string{EvAddColumn}},
		{"ALTER TABLE t DROP COLUMN n", []string{EvDropColumn}},
		{"ALTER TABLE t ADD COLUMN x INT, DROP COLUMN n", []string{EvAddColumn, EvDropColumn}},
		{"ALTER TABLE t RENAME COLUMN n TO m", []string{EvRenameColumn}},
		{"ALTER TABLE t RENAME INDEX uk TO uk2", []string{EvRenameIndex}},
		{"ALTER TABLE t RENAME TO t2", []string{EvRenameTable}},
		{"ALTER TABLE t DROP INDEX uk", []string{EvDropIndex}},
		{"ALTER TABLE t DROP PRIMARY KEY", []string{EvDropPrimaryKey}},
		{"ALTER TABLE t ALTER COLUMN n SET DEFAULT 3", []string{EvModifyDefaultValue}},
		{"ALTER TABLE t ADD INDEX ix (n)", []string{EvModifyConstraint}},
		{"ALTER TABLE t ADD PRIMARY KEY (n)", []string{EvModifyConstraint, EvAddPrimaryKey}},
		{"ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (n) REFERENCES p (id)", []string{EvModifyConstraint, EvAddForeignKey}},
		{"ALTER TABLE t DROP FOREIGN KEY fk", []string{EvDropForeignKey}},
		{"ALTER TABLE t ENGINE = MyISAM", []string{EvModifyStorageEngine}},
		{"ALTER TABLE t CONVERT TO CHARACTER SET latin1", []string{EvModifyCharset}},
		{"ALTER TABLE t COMMENT = 'x'", []string{EvModifyTableComment}},
		{"ALTER TABLE t DROP PARTITION p1", []string{EvDropTablePartition}},
		{"ALTER TABLE t TRUNCATE PARTITION p1", []string{EvTruncateTablePartition}},
		{"ALTER TABLE t COALESCE PARTITION 2", []string{EvCoalescePartition}},
		{"ALTER TABLE t REMOVE PARTITIONING", []string{EvRemovePartitioning}},
		{"ALTER TABLE t ADD PARTITION (PARTITION p9 VALUES LESS THAN (100))", []string{EvAddTablePartition}},
		// MODIFY / CHANGE COLUMN against the old column, in DM's order.
		{"ALTER TABLE t MODIFY n TINYINT", []string{EvValueRangeDecrease}},
		{"ALTER TABLE t MODIFY n BIGINT", nil},
		{"ALTER TABLE t MODIFY n INT UNSIGNED", []string{EvPrecisionDecrease}},
		{"ALTER TABLE t MODIFY d DECIMAL(12,2)", []string{EvPrecisionDecrease}},
		{"ALTER TABLE t MODIFY d DECIMAL(10,2)", nil},
		{"ALTER TABLE t MODIFY e ENUM('b','a')", []string{EvValueRangeDecrease}},
		{"ALTER TABLE t MODIFY e ENUM('a','b','c')", nil},
		{"ALTER TABLE t MODIFY s VARCHAR(10) DEFAULT 'x'", []string{EvValueRangeDecrease}},
		{"ALTER TABLE t MODIFY s VARCHAR(40) DEFAULT 'x'", nil},
		{"ALTER TABLE t MODIFY s TEXT DEFAULT 'x'", nil}, // DM: a longer string type changes nothing
		{"ALTER TABLE t MODIFY s TEXT", []string{EvModifyDefaultValue}},
		{"ALTER TABLE t MODIFY s CHAR(20) DEFAULT 'x'", []string{EvModifyColumn}},
		{"ALTER TABLE t MODIFY c VARCHAR(5)", []string{EvModifyColumn}},
		{"ALTER TABLE t MODIFY n VARCHAR(20)", []string{EvModifyColumn}},
		{"ALTER TABLE t MODIFY id INT AUTO_INCREMENT PRIMARY KEY", nil},
		{"ALTER TABLE t MODIFY id INT PRIMARY KEY", []string{EvRemoveAutoIncrement}},
		{"ALTER TABLE t MODIFY id INT AUTO_INCREMENT", []string{EvDropPrimaryKey}},
		{"ALTER TABLE t MODIFY k VARCHAR(10)", []string{EvDropUniqueKey}},
		{"ALTER TABLE t MODIFY s VARCHAR(20)", []string{EvModifyDefaultValue}},
		{"ALTER TABLE t MODIFY n INT DEFAULT 5", []string{EvModifyDefaultValue}},
		{"ALTER TABLE t MODIFY s VARCHAR(20) CHARACTER SET latin1 DEFAULT 'x'", []string{EvModifyCharset}},
		{"ALTER TABLE t MODIFY n INT AFTER s", []string{EvModifyColumnsOrder}},
		{"ALTER TABLE t CHANGE n m INT", []string{EvRenameColumn}},
		{"ALTER TABLE t CHANGE n m TINYINT", []string{EvValueRangeDecrease}},
		{"ALTER TABLE t MODIFY nosuch INT", nil},
	}
	p := parser.New()
	for _, c := range cases {
		stmt, err := p.ParseOneStmt(c.sql, "", "")
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		got := AlterKinds(stmt.(*ast.AlterTableStmt), func() *sqlschema.Table { return old })
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: kinds %q, want %q", c.sql, got, c.want)
		}
	}
	// Without the old table a MODIFY has no finer kind (DM: alter table).
	stmt, _ := p.ParseOneStmt("ALTER TABLE t MODIFY n TINYINT", "", "")
	if got := AlterKinds(stmt.(*ast.AlterTableStmt), func() *sqlschema.Table { return nil }); got != nil {
		t.Errorf("no old table: kinds %q", got)
	}
}

// TestSkipDDLKinds: a rule matches a DDL by its statement kind, any of its
// finer kinds, or their class (incompatible ddl changes).
func TestSkipDDLKinds(t *testing.T) {
	f, err := NewEventFilter([]config.FilterRule{
		{SchemaPattern: "a", Events: []string{"drop column"}, Action: config.FilterIgnore},
		{SchemaPattern: "b", Events: []string{"incompatible ddl changes"}, Action: config.FilterIgnore},
		{SchemaPattern: "c", Events: []string{"alter table"}, Action: config.FilterIgnore},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		schema, event string
		kinds         []string
		skip          bool
	}{
		{"a", EvAlterTable, []string{EvAddColumn, EvDropColumn}, true},
		{"a", EvAlterTable, []string{EvAddColumn}, false},
		{"a", EvAlterTable, nil, false},
		{"b", EvAlterTable, []string{EvValueRangeDecrease}, true},
		{"b", EvAlterTable, nil, false},
		{"b", EvDropTable, nil, true}, // DM classes drop table as incompatible
		{"b", EvCreateTable, nil, false},
		{"b", EvInsert, nil, false},
		{"c", EvAlterTable, []string{EvDropColumn}, true},
	}
	for _, c := range cases {
		skip, err := f.SkipDDL(c.schema, "t", c.event, c.kinds, "")
		if err != nil || skip != c.skip {
			t.Errorf("%s %s %q: skip %v (%v), want %v", c.schema, c.event, c.kinds, skip, err, c.skip)
		}
	}
}
