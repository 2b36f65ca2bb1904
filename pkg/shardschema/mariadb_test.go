package shardschema

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}

// TestDiffOnMariaDB: the statements Diff writes run on a real MariaDB and
// leave the target with exactly the joined schema of the shards, read back
// through sqlschema, while shards change one by one.
func TestDiffOnMariaDB(t *testing.T) {
	inst := mariadbtest.Start(t, mariadbtest.Options{Name: "shardschema", FastCommit: true})
	db := inst.DB(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	exec := func(qs ...string) {
		t.Helper()
		for _, q := range qs {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	const create = " (id INT NOT NULL PRIMARY KEY, a INT, d INT, KEY ia (a))"
	exec("CREATE DATABASE up", "CREATE DATABASE down",
		"CREATE TABLE up.t1"+create, "CREATE TABLE up.t2"+create, "CREATE TABLE down.t"+create)
	read := func(schema, name string) *sqlschema.Table {
		t.Helper()
		tb, err := sqlschema.ReadTable(ctx, db, schema, name)
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	joined := read("down", "t")

	// step changes the shards, joins their schemas, runs the diff on the
	// target and checks the target is the join.
	step := func(name string, want []string, ddls ...string) {
		t.Helper()
		exec(ddls...)
		next, err := Join(joined, []Member{{"t1", read("up", "t1")}, {"t2", read("up", "t2")}})
		if err != nil {
			t.Fatalf("%s: Join: %v", name, err)
		}
		changes, err := Diff(joined, next, "down", "t")
		if err != nil {
			t.Fatalf("%s: Diff: %v", name, err)
		}
		stmts := Statements(changes)
		if len(stmts) != len(want) {
			t.Fatalf("%s: statements %q, want %d like %q", name, stmts, len(want), want)
		}
		for i := range want {
			if stmts[i] != want[i] {
				t.Errorf("%s: statement %d\n got %s\nwant %s", name, i, stmts[i], want[i])
			}
		}
		exec(stmts...)
		got := read("down", "t")
		if !Equal(got, next) {
			t.Fatalf("%s: target after %q is\n %+v\nnot the join\n %+v", name, stmts, got, next)
		}
		for _, c := range changes {
			if !c.AppliedTo(got) {
				t.Errorf("%s: %s does not read as applied to the target", name, c.SQL)
			}
		}
		joined = next
	}
	const alter = "ALTER TABLE `down`.`t` "
	step("first shard adds and widens",
		[]string{alter + "ADD COLUMN `n` int(11) NOT NULL DEFAULT 0 FIRST",
			alter + "ADD COLUMN `v` varchar(20) CHARACTER SET utf8mb4 NULL DEFAULT 'it''s' AFTER `a`",
			alter + "MODIFY COLUMN `a` bigint(20) NULL DEFAULT NULL",
			alter + "ADD INDEX `iv` (`v`)"},
		"ALTER TABLE up.t1 ADD COLUMN v VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT 'it''s' AFTER a, MODIFY a BIGINT, ADD INDEX iv (v), ADD COLUMN n INT NOT NULL DEFAULT 0 FIRST")
	step("second shard drops d, adds an enum", []string{alter + "ADD COLUMN `e` enum('x','y''z') CHARACTER SET utf8mb4 NOT NULL DEFAULT 'x' AFTER `a`"},
		"ALTER TABLE up.t2 DROP COLUMN d, ADD COLUMN e ENUM('x','y''z') NOT NULL DEFAULT 'x'")
	// Rows of a shard without a column get its default on the target.
	exec("INSERT INTO down.t (id, a, d) VALUES (1, 1, 1)")
	var n int
	var v sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT n, v FROM down.t WHERE id = 1").Scan(&n, &v); err != nil || n != 0 || v.String != "it's" {
		t.Errorf("defaults of a row without n and v: %d %q, %v", n, v.String, err)
	}
	step("second shard catches up: nothing to run", nil,
		"ALTER TABLE up.t2 ADD COLUMN v VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT 'it''s' AFTER a, MODIFY a BIGINT, ADD INDEX iv (v), ADD COLUMN n INT NOT NULL DEFAULT 0 FIRST")
	step("last shard drops d", []string{alter + "DROP COLUMN `d`"}, "ALTER TABLE up.t1 DROP COLUMN d")
	step("index dropped by one stays", nil, "ALTER TABLE up.t1 DROP INDEX iv")
	step("index dropped by the last goes", []string{alter + "DROP INDEX `iv`"}, "ALTER TABLE up.t2 DROP INDEX iv")
	step("NOT NULL relaxed at the first", []string{alter + "MODIFY COLUMN `n` int(11) NULL DEFAULT 0"}, "ALTER TABLE up.t1 MODIFY n INT NULL DEFAULT 0")
}
