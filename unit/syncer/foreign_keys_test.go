package syncer

import (
	"fmt"
	"hash/maphash"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/rowimage"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// TestGroupStatements: changes of foreign key group tables keep their
// order one statement each (inserts of one table aside), under the source
// session's foreign_key_checks, and safe mode never deletes a row to
// rewrite it.
func TestGroupStatements(t *testing.T) {
	parent := &tableInfo{Table: &rowimage.Table{Source: tableName{Schema: "s", Table: "p"}, Target: tableName{Schema: "db", Table: "p"}, Columns: []string{"id", "v"}, Binary: []bool{false, false}, Key: []int{0}, Uniques: [][]int{{0}}}, fkGroup: "db.c"}
	child := &tableInfo{Table: &rowimage.Table{Source: tableName{Schema: "s", Table: "c"}, Target: tableName{Schema: "db", Table: "c"}, Columns: []string{"id", "p"}, Binary: []bool{false, false}, Key: []int{0}, Uniques: [][]int{{0}}}, fkGroup: "db.c"}
	plain := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "x"}, Columns: []string{"id"}, Binary: []bool{false}, Key: []int{0}, Uniques: [][]int{{0}}}, compact: true}
	row := func(v ...any) []any { return v }
	const (
		save    = "SET @dm_saved_foreign_key_checks=@@session.foreign_key_checks, foreign_key_checks="
		restore = "SET foreign_key_checks=@dm_saved_foreign_key_checks"
	)
	tests := []struct {
		name    string
		changes []*change
		want    []string
	}{
		{"checks on: in order, deletes not merged, inserts of one table merged", []*change{
			{kind: kindInsert, table: parent, after: row(int64(1), int64(0)), fkChecks: true},
			{kind: kindInsert, table: parent, after: row(int64(2), int64(0)), fkChecks: true},
			{kind: kindInsert, table: child, after: row(int64(1), int64(1)), fkChecks: true},
			{kind: kindDelete, table: child, before: row(int64(1), int64(1)), fkChecks: true},
			{kind: kindDelete, table: parent, before: row(int64(1), int64(0)), fkChecks: true},
			{kind: kindDelete, table: parent, before: row(int64(2), int64(0)), fkChecks: true},
			{kind: kindInsert, table: plain, after: row(int64(9))},
		}, []string{
			"INSERT INTO `db`.`x` (`id`) VALUES (?)",
			save + "1",
			"INSERT INTO `db`.`p` (`id`,`v`) VALUES (?,?),(?,?)",
			"INSERT INTO `db`.`c` (`id`,`p`) VALUES (?,?)",
			"DELETE FROM `db`.`c` WHERE `id`=? LIMIT 1",
			"DELETE FROM `db`.`p` WHERE `id`=? LIMIT 1",
			"DELETE FROM `db`.`p` WHERE `id`=? LIMIT 1",
			restore,
		}},
		{"the session's setting follows the source's", []*change{
			{kind: kindDelete, table: parent, before: row(int64(1), int64(0)), fkChecks: false},
			{kind: kindUpdate, table: parent, before: row(int64(2), int64(0)), after: row(int64(3), int64(0)), fkChecks: true},
		}, []string{
			save + "0",
			"DELETE FROM `db`.`p` WHERE `id`=? LIMIT 1",
			"SET foreign_key_checks=1",
			"UPDATE `db`.`p` SET `id`=?,`v`=? WHERE `id`=? LIMIT 1",
			restore,
		}},
		{"safe mode with checks on: upserts, a moved key, DELETE IGNORE", []*change{
			{kind: kindInsert, table: child, after: row(int64(1), int64(1)), fkChecks: true, safe: true},
			{kind: kindUpdate, table: parent, before: row(int64(2), int64(0)), after: row(int64(2), int64(5)), fkChecks: true, safe: true},
			{kind: kindUpdate, table: parent, before: row(int64(2), int64(5)), after: row(int64(3), int64(5)), fkChecks: true, safe: true},
			{kind: kindDelete, table: parent, before: row(int64(3), int64(5)), fkChecks: true, safe: true},
		}, []string{
			save + "1",
			"INSERT IGNORE INTO `db`.`c` (`id`,`p`) VALUES (?,?) ON DUPLICATE KEY UPDATE `p`=VALUES(`p`)",
			"INSERT IGNORE INTO `db`.`p` (`id`,`v`) VALUES (?,?) ON DUPLICATE KEY UPDATE `v`=VALUES(`v`)",
			"DELETE IGNORE FROM `db`.`p` WHERE `id`=? AND EXISTS (SELECT 1 FROM (SELECT 1 FROM `db`.`p` WHERE `id`=? LIMIT 1) AS dm_moved)",
			"UPDATE IGNORE `db`.`p` SET `id`=?,`v`=? WHERE `id`=? LIMIT 1",
			"INSERT IGNORE INTO `db`.`p` (`id`,`v`) VALUES (?,?) ON DUPLICATE KEY UPDATE `v`=VALUES(`v`)",
			"DELETE IGNORE FROM `db`.`p` WHERE `id`=? LIMIT 1",
			restore,
		}},
		{"safe mode with checks off: REPLACE cascades nothing", []*change{
			{kind: kindUpdate, table: parent, before: row(int64(2), int64(0)), after: row(int64(3), int64(0)), safe: true},
		}, []string{
			save + "0",
			"DELETE FROM `db`.`p` WHERE `id`=? LIMIT 1",
			"REPLACE INTO `db`.`p` (`id`,`v`) VALUES (?,?)",
			restore,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, s := range statements(tt.changes) {
				got = append(got, s.sql)
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("statements:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestGroupCausality: every change of a group has the group's one key, so
// the dispatcher keeps a parent's and its children's changes on one worker.
func TestGroupCausality(t *testing.T) {
	seed := maphash.MakeSeed()
	a := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "p"}, Key: []int{0}, Uniques: [][]int{{0}}}, fkGroup: "db.c"}
	b := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "c"}, Key: []int{0}, Uniques: [][]int{{0}}}, fkGroup: "db.c"}
	other := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "q"}, Key: []int{0}, Uniques: [][]int{{0}}}, fkGroup: "db.q"}
	keys := func(c *change) []uint64 { k, _ := causalityKeys(nil, c, seed, nil); return k }
	ka := keys(&change{kind: kindInsert, table: a, after: []any{int64(1)}})
	kb := keys(&change{kind: kindDelete, table: b, before: []any{int64(2)}})
	ko := keys(&change{kind: kindInsert, table: other, after: []any{int64(1)}})
	if len(ka) != 1 || len(kb) != 1 || ka[0] != kb[0] {
		t.Errorf("keys of one group's changes %v and %v, want one shared key", ka, kb)
	}
	if len(ko) != 1 || ko[0] == ka[0] {
		t.Errorf("another group's key %v equals %v", ko, ka)
	}
}

func locAt(name string, pos uint32) binlog.Location { return binlog.Location{Name: name, Pos: pos} }

// TestWarnsOfMissingCascade: a child table whose ON DELETE CASCADE key the
// routed target table lacks gets a status warning naming the table and
// the constraint; a child whose target has the key does not.
func TestWarnsOfMissingCascade(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE shop",
		"CREATE TABLE shop.p (id INT PRIMARY KEY)",
		"CREATE TABLE shop.c (id INT PRIMARY KEY, p INT, CONSTRAINT c_parent FOREIGN KEY (p) REFERENCES shop.p (id) ON DELETE CASCADE)",
		"CREATE TABLE shop.ok (id INT PRIMARY KEY, p INT, CONSTRAINT ok_parent FOREIGN KEY (p) REFERENCES shop.p (id) ON DELETE CASCADE)")
	mariadbtest.MustExec(t, e.dstDB, "CREATE DATABASE shop",
		"CREATE TABLE shop.p (id INT PRIMARY KEY)",
		"CREATE TABLE shop.c_copy (id INT PRIMARY KEY, p INT)",
		"CREATE TABLE shop.ok (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES shop.p (id) ON DELETE CASCADE)")
	cfg, src := e.configs(t, "fkwarn")
	cfg.BAList = config.BAList{DoDBs: []string{"shop"}}
	cfg.RouteRules = []config.RouteRule{{SchemaPattern: "shop", TablePattern: "c", TargetSchema: "shop", TargetTable: "c_copy"}}
	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)
	defer r.Stop(t)
	var warnings []string
	testutil.Eventually(t, 30*time.Second, "a warning about shop.c", func() error {
		warnings = u.Status().(Status).Warnings
		for _, w := range warnings {
			if strings.Contains(w, "`shop`.`c`") && strings.Contains(w, "`c_parent`") && strings.Contains(w, "`shop`.`c_copy`") &&
				strings.Contains(w, "ON DELETE CASCADE") {
				return nil
			}
		}
		return fmt.Errorf("warnings %q", warnings)
	})
	for _, w := range warnings {
		if strings.Contains(w, "ok_parent") {
			t.Errorf("warning about a key the target has: %s", w)
		}
	}
	t.Logf("warnings: %q", warnings)
}
