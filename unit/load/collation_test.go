package load

import (
	"fmt"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/collation"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// TestLoadCollations: with collation_compatible strict, the dumped
// CREATE DATABASE and CREATE TABLE that leave collations out (as MySQL 5.7
// prints them, or any server whose defaults differ from the target's) get
// the source's defaults the dump recorded; loose leaves the target's own
// defaults. The recorded source makes utf8mb4_unicode_ci utf8mb4's default
// and latin1_bin latin1's (MariaDB 11's character_set_collations can), and
// its collation_server is latin1_bin; the target has MariaDB's defaults.
func TestLoadCollations(t *testing.T) {
	e := newEnv(t, false)
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE cdb CHARACTER SET utf8mb4", "CREATE DATABASE cdb2",
		"CREATE TABLE cdb.t (id INT PRIMARY KEY, a VARCHAR(10), b VARCHAR(10) CHARACTER SET latin1) CHARSET utf8mb4",
		"INSERT INTO cdb.t VALUES (1, 'Aa', 'x')",
		"CREATE TABLE cdb2.u (id INT PRIMARY KEY, a VARCHAR(10)) CHARSET utf8mb4 COLLATE utf8mb4_bin",
		// MariaDB-only syntax the parser cannot read (INVISIBLE): strict
		// keeps the server's text, which names every collation.
		"CREATE TABLE cdb2.inv (id INT PRIMARY KEY, a VARCHAR(10) CHARACTER SET latin1, h INT INVISIBLE)",
		"INSERT INTO cdb2.inv (id, a, h) VALUES (1, 'x', 7)")
	source := &collation.Defaults{Server: "latin1_bin", Charsets: map[string]string{
		"utf8mb4": "utf8mb4_unicode_ci", "latin1": "latin1_bin"}}
	dump := func(t *testing.T, task string, recorded *collation.Defaults) string {
		dir := t.TempDir()
		m := e.dumpTables(t, dir, task, "dump-"+task, 0, tn("cdb", "t"), tn("cdb2", "u"), tn("cdb2", "inv"))
		// As MySQL 5.7 prints them: no collation where it is the
		// character set's default, none for a database with neither.
		m.Schemas[0].CreateSQL = "CREATE DATABASE `cdb` /*!40100 DEFAULT CHARACTER SET utf8mb4 */"
		m.Schemas[1].CreateSQL = "CREATE DATABASE `cdb2`"
		m.Tables[0].CreateSQL = "CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  `a` varchar(10) DEFAULT NULL,\n" +
			"  `b` varchar(10) CHARACTER SET latin1 DEFAULT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
		m.Collations = recorded
		if err := dumpfile.WriteManifest(dir, m); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, tc := range []struct {
		mode                         string
		cdb, cdb2, table, colA, colB string
		tableU                       string
	}{
		{config.CollationStrict, "utf8mb4_unicode_ci", "latin1_bin", "utf8mb4_unicode_ci", "utf8mb4_unicode_ci", "latin1_bin", "utf8mb4_bin"},
		{config.CollationLoose, "utf8mb4_general_ci", "utf8mb4_general_ci", "utf8mb4_general_ci", "utf8mb4_general_ci", "latin1_swedish_ci", "utf8mb4_bin"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cfg, src := e.configs(tc.mode, config.ModeFull, 2)
			cfg.CollationCompatible = tc.mode
			cfg.RouteRules = []config.RouteRule{
				{SchemaPattern: "cdb", TargetSchema: tc.mode + "_cdb"}, {SchemaPattern: "cdb2", TargetSchema: tc.mode + "_cdb2"}}
			requireOK(t, process(t, newLoader(t, cfg, src, dump(t, tc.mode, source), nil)))
			for _, c := range []struct{ q, want string }{
				{fmt.Sprintf("SELECT DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '%s_cdb'", tc.mode), tc.cdb},
				{fmt.Sprintf("SELECT DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '%s_cdb2'", tc.mode), tc.cdb2},
				{fmt.Sprintf("SELECT TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = '%s_cdb' AND TABLE_NAME = 't'", tc.mode), tc.table},
				{fmt.Sprintf("SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '%s_cdb' AND TABLE_NAME = 't' AND COLUMN_NAME = 'a'", tc.mode), tc.colA},
				{fmt.Sprintf("SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '%s_cdb' AND TABLE_NAME = 't' AND COLUMN_NAME = 'b'", tc.mode), tc.colB},
				{fmt.Sprintf("SELECT TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = '%s_cdb2' AND TABLE_NAME = 'u'", tc.mode), tc.tableU},
			} {
				if got := e.dst.QueryString(t, c.q); got != c.want {
					t.Errorf("%s: %q, want %q", c.q, got, c.want)
				}
			}
			if n := queryInt(t, e.dstDB, fmt.Sprintf("SELECT COUNT(*) FROM %s_cdb.t", tc.mode)); n != 1 {
				t.Errorf("%d rows loaded, want 1", n)
			}
			if got := e.dst.QueryString(t, fmt.Sprintf("SELECT CONCAT(a, h) FROM %s_cdb2.inv", tc.mode)); got != "x7" {
				t.Errorf("the table with an invisible column holds %q, want x7", got)
			}
		})
	}
	t.Run("strict without recorded collations", func(t *testing.T) {
		cfg, src := e.configs("unrecorded", config.ModeFull, 2)
		cfg.CollationCompatible = config.CollationStrict
		cfg.RouteRules = []config.RouteRule{{SchemaPattern: "cdb*", TargetSchema: "never"}}
		requireError(t, process(t, newLoader(t, cfg, src, dump(t, "unrecorded", nil), nil)), CodeLoadDump, "does not record the source's default collations")
		if n := queryInt(t, e.dstDB, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'never'"); n != 0 {
			t.Error("the refused load created the database")
		}
	})
}
