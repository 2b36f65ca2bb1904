package syncer

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// ghostSteps are gh-ost's statements for ALTER of shop.t, in order, with
// its row copy; applyConcurrent stands for the binlog changes gh-ost
// applies to the shadow table itself while it copies.
var ghostCreate = []string{
	"CREATE TABLE `shop`.`_t_ghc` (id BIGINT AUTO_INCREMENT PRIMARY KEY, hint VARCHAR(64) NOT NULL, value VARCHAR(4096) NOT NULL, UNIQUE KEY (hint))",
	"INSERT INTO `shop`.`_t_ghc` (hint, value) VALUES ('state', 'GhostTableMigrated')",
	"CREATE TABLE `shop`.`_t_gho` LIKE `shop`.`t`",
	"ALTER TABLE `shop`.`_t_gho` ADD COLUMN c2 INT NOT NULL DEFAULT 7, ADD INDEX idx_k (k)",
}

var ghostCopyAndCut = []string{
	"INSERT IGNORE INTO `shop`.`_t_gho` (id, k, v) SELECT id, k, v FROM `shop`.`t` WHERE id <= 50",
	"UPDATE `shop`.`t` SET v = 'during' WHERE id = 3",
	"UPDATE `shop`.`_t_gho` SET v = 'during' WHERE id = 3",
	"INSERT INTO `shop`.`t` VALUES (1000, 1, 'new')",
	"INSERT INTO `shop`.`_t_gho` (id, k, v) VALUES (1000, 1, 'new')",
	"INSERT IGNORE INTO `shop`.`_t_gho` (id, k, v) SELECT id, k, v FROM `shop`.`t` WHERE id > 50",
	"RENAME TABLE `shop`.`t` TO `shop`.`_t_del`, `shop`.`_t_gho` TO `shop`.`t`",
	"DROP TABLE IF EXISTS `shop`.`_t_del`",
	"DROP TABLE IF EXISTS `shop`.`_t_ghc`",
	"INSERT INTO `shop`.`t` (id, k, v, c2) VALUES (1001, 2, 'after', 9)",
}

func newOnlineEnv(t *testing.T, task string) *env {
	t.Helper()
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY, k INT, v VARCHAR(20))",
		"INSERT INTO shop.t SELECT seq, seq % 10, CONCAT('v', seq) FROM mysql.seq_1_to_100")
	mariadbtest.MustExec(t, e.dstDB, "CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY, k INT, v VARCHAR(20))",
		"INSERT INTO shop.t SELECT seq, seq % 10, CONCAT('v', seq) FROM mysql.seq_1_to_100",
		"SET GLOBAL log_output = 'TABLE'", "SET GLOBAL general_log = 1")
	return e
}

// targetTables lists the target's tables of shop.
func targetTables(t *testing.T, e *env) string {
	t.Helper()
	rows, err := mariadbtest.QueryRows(context.Background(), e.dstDB, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'shop' ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(rows, " ")
}

// shadowWrites counts the target's statements that name a shadow or
// trash table.
func shadowWrites(t *testing.T, e *env) int {
	t.Helper()
	var n int
	if err := e.dstDB.QueryRow("SELECT COUNT(*) FROM mysql.general_log WHERE command_type IN ('Query', 'Execute') AND " +
		"CONVERT(argument USING utf8mb4) REGEXP '`?shop`?[.]`?_t_(gho|ghc|del)' AND CONVERT(argument USING utf8mb4) NOT LIKE '%dm_meta%'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOnlineDDLGhostSequence: gh-ost's statements on the source: the
// target never sees the shadow or trash tables or their rows, and its t
// gets the ALTER at the cut-over; a restart between the shadow's ALTER and
// the cut-over still applies it.
func TestOnlineDDLGhostSequence(t *testing.T) {
	e := newOnlineEnv(t, "osc")
	cfg, src := e.configs(t, "osc")
	cfg.OnlineDDL = true
	u := newUnit(t, cfg, src)
	r := unittest.Start(u, false, 0)
	mariadbtest.MustExec(t, e.srcDB, ghostCreate...)
	testutil.Eventually(t, syncTimeout, "the shadow's ALTER is recorded", func() error {
		var n int
		if err := e.dstDB.QueryRow("SELECT COUNT(*) FROM dm_meta.osc_onlineddl WHERE real_table = 't' AND stmts LIKE '%c2%'").Scan(&n); err != nil || n != 1 {
			return fmt.Errorf("%d records, %v", n, err)
		}
		return nil
	})
	r.Stop(t)
	u.Kill() // as if killed: the next run replays from its checkpoint

	u2 := newUnit(t, cfg, src)
	defer u2.Close()
	r2 := unittest.Start(u2, false, 0)
	defer r2.Stop(t)
	mariadbtest.MustExec(t, e.srcDB, ghostCopyAndCut...)
	e.waitEqual(t, same("shop.t"), r2)
	if got := targetTables(t, e); got != `"t"|` {
		t.Errorf("target tables of shop: %s, want only t", got)
	}
	var name, create string
	if err := e.dstDB.QueryRow("SHOW CREATE TABLE shop.t").Scan(&name, &create); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(create, "`c2` int(11) NOT NULL DEFAULT 7") || !strings.Contains(create, "KEY `idx_k` (`k`)") {
		t.Errorf("target's t lacks the ALTER:\n%s", create)
	}
	if n := shadowWrites(t, e); n != 0 {
		t.Errorf("the target ran %d statements naming shadow or trash tables", n)
	}
}
