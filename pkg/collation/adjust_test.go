package collation

import (
	"slices"
	"strings"
	"testing"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/format"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// upstream: a source whose utf8mb4 default is not the compiled one (as on
// MariaDB 11 with character_set_collations, or MySQL 8).
var upstream = Defaults{Server: "latin1_bin", Charsets: map[string]string{
	"utf8mb4": "utf8mb4_unicode_ci", "latin1": "latin1_swedish_ci", "binary": "binary",
}}

func TestAdjust(t *testing.T) {
	cases := []struct {
		name, in, want string
		unknown        []string
	}{
		{"database with neither", "CREATE DATABASE d",
			"CREATE DATABASE `d` COLLATE = latin1_bin", nil},
		{"database with a charset", "CREATE DATABASE IF NOT EXISTS d CHARACTER SET utf8mb4",
			"CREATE DATABASE IF NOT EXISTS `d` CHARACTER SET = utf8mb4 COLLATE = utf8mb4_unicode_ci", nil},
		{"database as SHOW CREATE DATABASE prints it", "CREATE DATABASE `d` /*!40100 DEFAULT CHARACTER SET latin1 */",
			"CREATE DATABASE `d` CHARACTER SET = latin1 COLLATE = latin1_swedish_ci", nil},
		{"database with a collation", "CREATE DATABASE d COLLATE utf8mb4_bin", "", nil},
		{"database with both", "CREATE DATABASE d CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "", nil},
		{"database with an unknown charset", "CREATE DATABASE d CHARACTER SET gb18030", "", []string{"gb18030"}},
		{"alter database charset", "ALTER DATABASE d CHARACTER SET utf8mb4",
			"ALTER DATABASE `d` CHARACTER SET = utf8mb4 COLLATE = utf8mb4_unicode_ci", nil},
		{"alter database collation", "ALTER DATABASE d COLLATE utf8mb4_bin", "", nil},
		{"alter database other", "ALTER DATABASE d ENCRYPTION = 'Y'", "", nil},
		{"table with neither", "CREATE TABLE t (a varchar(10))", "", nil},
		{"table with a charset", "CREATE TABLE t (a varchar(10)) DEFAULT CHARSET=utf8mb4 ENGINE=InnoDB",
			"CREATE TABLE `t` (`a` VARCHAR(10)) DEFAULT CHARACTER SET = UTF8MB4 DEFAULT COLLATE = UTF8MB4_UNICODE_CI ENGINE = InnoDB", nil},
		{"table with both", "CREATE TABLE t (a varchar(10)) CHARSET=utf8mb4 COLLATE=utf8mb4_bin", "", nil},
		{"columns with a charset", "CREATE TABLE t (a varchar(10) CHARACTER SET latin1, b text CHARACTER SET utf8mb4 NOT NULL, " +
			"c varchar(5) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, d int, e char(1)) COLLATE=latin1_bin",
			"CREATE TABLE `t` (`a` VARCHAR(10) CHARACTER SET LATIN1 COLLATE latin1_swedish_ci,`b` TEXT CHARACTER SET UTF8MB4 COLLATE utf8mb4_unicode_ci NOT NULL," +
				"`c` VARCHAR(5) CHARACTER SET UTF8MB4 COLLATE utf8mb4_bin,`d` INT,`e` CHAR(1)) DEFAULT COLLATE = LATIN1_BIN", nil},
		{"column with an unknown charset", "CREATE TABLE t (a varchar(10) CHARACTER SET ascii)", "", []string{"ascii"}},
		{"like", "CREATE TABLE t2 LIKE t", "", nil},
		{"as select", "CREATE TABLE t2 CHARSET utf8mb4 AS SELECT * FROM t",
			"CREATE TABLE `t2` DEFAULT CHARACTER SET = UTF8MB4 DEFAULT COLLATE = UTF8MB4_UNICODE_CI AS SELECT * FROM `t`", nil},
		{"convert to", "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4",
			"ALTER TABLE `t` CONVERT TO CHARACTER SET UTF8MB4 COLLATE UTF8MB4_UNICODE_CI", nil},
		{"convert to with collation", "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "", nil},
		{"alter default charset", "ALTER TABLE t DEFAULT CHARSET = latin1",
			"ALTER TABLE `t` CHARACTER SET LATIN1 COLLATE LATIN1_SWEDISH_CI", nil},
		{"add, modify and change column", "ALTER TABLE t ADD COLUMN x varchar(3) CHARACTER SET utf8mb4, " +
			"MODIFY y varchar(3) CHARACTER SET latin1 COLLATE latin1_bin, CHANGE z z2 text CHARACTER SET latin1, ADD INDEX (x)",
			"ALTER TABLE `t` ADD COLUMN `x` VARCHAR(3) CHARACTER SET UTF8MB4 COLLATE utf8mb4_unicode_ci, " +
				"MODIFY COLUMN `y` VARCHAR(3) CHARACTER SET LATIN1 COLLATE latin1_bin, CHANGE COLUMN `z` `z2` TEXT CHARACTER SET LATIN1 COLLATE latin1_swedish_ci, ADD INDEX(`x`)", nil},
		{"charset default", "ALTER TABLE t CONVERT TO CHARACTER SET DEFAULT", "", nil},
		{"other statements", "DROP DATABASE d", "", nil},
	}
	p := parser.New()
	for _, c := range cases {
		node, err := p.ParseOneStmt(c.in, "", "")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		changed, unknown := upstream.Adjust(node)
		if changed != (c.want != "") || !slices.Equal(unknown, c.unknown) {
			t.Errorf("%s: changed %v unknown %v, want %v %v", c.name, changed, unknown, c.want != "", c.unknown)
			continue
		}
		if !changed {
			continue
		}
		var b strings.Builder
		if err := node.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err != nil {
			t.Fatalf("%s: restore: %v", c.name, err)
		}
		if !strings.EqualFold(b.String(), c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, b.String(), c.want)
		}
		// The restored text parses and asks for nothing more.
		again, err := p.ParseOneStmt(b.String(), "", "")
		if err != nil {
			t.Fatalf("%s: reparse %q: %v", c.name, b.String(), err)
		}
		if changed, _ := upstream.Adjust(again); changed {
			t.Errorf("%s: the adjusted statement is adjusted again", c.name)
		}
	}
}

// TestAdjustWithoutServer: a CREATE DATABASE with neither is left alone
// when the server's collation is not known.
func TestAdjustWithoutServer(t *testing.T) {
	node, err := parser.New().ParseOneStmt("CREATE DATABASE d", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if changed, _ := (Defaults{Charsets: upstream.Charsets}).Adjust(node); changed {
		t.Error("changed without a server collation")
	}
}
