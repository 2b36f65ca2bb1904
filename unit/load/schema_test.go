package load

import (
	"testing"

	"github.com/pingcap/tidb/pkg/parser"

	"github.com/dmworker/dm-worker/unit/dumpfile"
)

func TestRenameCreateTable(t *testing.T) {
	target := tn("merged", "all`s")
	tests := []struct{ name, in, want string }{
		{"server text kept byte for byte", "CREATE TABLE `t 1` (\n  `id` int(11) NOT NULL,\n  `j` longtext CHECK (json_valid(`j`)),\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB PAGE_CHECKSUM=1",
			"CREATE TABLE IF NOT EXISTS `merged`.`all``s` (\n  `id` int(11) NOT NULL,\n  `j` longtext CHECK (json_valid(`j`)),\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB PAGE_CHECKSUM=1"},
		{"other forms through the parser", "create table db.`t 1` (id INT PRIMARY KEY)",
			"CREATE TABLE IF NOT EXISTS `merged`.`all``s` (`id` INT PRIMARY KEY)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := renameCreateTable(parser.New(), tt.in, "t 1", target)
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v\nwant %q", got, err, tt.want)
			}
		})
	}
	if _, err := renameCreateTable(parser.New(), "CREATE VIEW v AS SELECT 1", "v", target); err == nil {
		t.Fatal("a view was renamed as a table")
	}
}

func TestLoadColumns(t *testing.T) {
	load, insert, numeric := loadColumns([]dumpfile.Column{
		{Name: "id", Type: "int(11)"}, {Name: "b", Type: "bit(3)", Load: dumpfile.LoadBit}, {Name: "y", Type: "year(4)"}, {Name: "s`", Type: "text"}})
	if want := "(`id`, @v1, @v2, `s```) SET `b` = CAST(@v1 AS UNSIGNED), `y` = CAST(@v2 AS UNSIGNED)"; load != want {
		t.Errorf("LOAD DATA columns %q, want %q", load, want)
	}
	if want := "(`id`, `b`, `y`, `s```)"; insert != want {
		t.Errorf("INSERT columns %q, want %q", insert, want)
	}
	if want := []bool{false, true, true, false}; len(numeric) != 4 || numeric[1] != want[1] || numeric[2] != want[2] || numeric[0] || numeric[3] {
		t.Errorf("numeric %v, want %v", numeric, want)
	}
}
