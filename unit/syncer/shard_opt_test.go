package syncer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha/shardddl"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/unittest"
)

func newOptShardEnv(t *testing.T, task string, strict bool) *shardEnv {
	t.Helper()
	e := newShardEnv(t, task)
	e.cfg.ShardMode, e.cfg.StrictOptimisticShardMode = config.ShardOptimistic, strict
	// The unit computes schemas with ALTERs of scratch tables on the
	// target: count the merged table's from the general log.
	mariadbtest.MustExec(t, e.dstDB, "SET GLOBAL log_output = 'TABLE'", "SET GLOBAL general_log = 1")
	return e
}

// mergedAlters counts the ALTER TABLE statements the target ran on
// merged.t.
func mergedAlters(t *testing.T, e *shardEnv) int {
	t.Helper()
	var n int
	if err := e.dstDB.QueryRow("SELECT COUNT(*) FROM mysql.general_log WHERE command_type = 'Query' AND " +
		"CONVERT(argument USING utf8mb4) REGEXP '^ALTER TABLE `?merged`?[.]`?t`? '").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// shardRowsOn is every shard's rows on cols, sorted, as text.
func (e *shardEnv) shardRowsOn(t *testing.T, cols string) []string {
	t.Helper()
	var all []string
	for _, s := range e.shards {
		rows, err := mariadbtest.QueryRows(context.Background(), e.srcDB, "SELECT "+cols+" FROM "+s)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, rows...)
	}
	slices.Sort(all)
	return all
}

// waitMergedOn waits until merged.t holds exactly the shards' rows on cols.
func (e *shardEnv) waitMergedOn(t *testing.T, r *unittest.Run, cols string) {
	t.Helper()
	testutil.Eventually(t, syncTimeout, "merged.t equals the union of the shards on "+cols, func() error {
		select {
		case res := <-r.Done:
			r.Done <- res
			t.Fatalf("the unit stopped: %+v", res)
		default:
		}
		want := e.shardRowsOn(t, cols)
		got, err := mariadbtest.QueryRows(context.Background(), e.dstDB, "SELECT "+cols+" FROM merged.t")
		if err != nil {
			return err
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("merged.t has %d rows, the shards %d\ntarget: %s\nshards: %s", len(got), len(want),
				clip(strings.Join(got, " | ")), clip(strings.Join(want, " | ")))
		}
		return nil
	})
}

// targetHasColumn reports whether merged.t has col.
func (e *shardEnv) targetHasColumn(t *testing.T, col string) bool {
	t.Helper()
	var n int
	if err := e.dstDB.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'merged' AND TABLE_NAME = 't' "+
		"AND COLUMN_NAME = ?", col).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// TestShardOptimisticAddAndDrop: DML flows on every shard while ADD
// COLUMN reaches the merged table with the first shard (the others' rows
// get NULL) and DROP COLUMN with the last; each runs once on the target.
func TestShardOptimisticAddAndDrop(t *testing.T) {
	e := newOptShardEnv(t, "shardo", false)
	u, r := e.start(t)
	defer u.Close()
	defer r.Stop(t)
	mariadbtest.MustExec(t, e.srcDB,
		"INSERT INTO shard_1.t_1 VALUES (1, 'a')", "INSERT INTO shard_1.t_2 VALUES (101, 'b')", "INSERT INTO shard_2.t_1 VALUES (201, 'c')")
	e.waitMergedOn(t, r, "id, v")
	before := mergedAlters(t, e)

	// The first shard adds c2: the target gets it at once, the others
	// keep writing rows without it.
	mariadbtest.MustExec(t, e.srcDB,
		"ALTER TABLE shard_1.t_1 ADD COLUMN c2 INT NULL",
		"INSERT INTO shard_1.t_1 VALUES (2, 'with-c2', 7)",
		"UPDATE shard_1.t_1 SET c2 = 8 WHERE id = 1",
		"INSERT INTO shard_1.t_2 VALUES (102, 'without')",
		"INSERT INTO shard_2.t_1 VALUES (202, 'without')")
	testutil.Eventually(t, syncTimeout, "the target has c2 and the first shard's values", func() error {
		rows, err := mariadbtest.QueryRows(context.Background(), e.dstDB, "SELECT id, c2 FROM merged.t WHERE id IN (1, 2, 102, 202) ORDER BY id")
		if err != nil {
			return err
		}
		if want := []string{`"1"|"8"|`, `"2"|"7"|`, `"102"|NULL|`, `"202"|NULL|`}; !slices.Equal(rows, want) {
			return fmt.Errorf("rows %q, want %q", rows, want)
		}
		return nil
	})
	if got := mergedAlters(t, e); got != before+1 {
		t.Fatalf("%d ALTERs ran for the first shard's ADD COLUMN, want 1", got-before)
	}
	if st := u.ShardDDL(); st != nil && st.State == "waiting" {
		t.Errorf("a table is held in optimistic mode: %+v", st)
	}
	// The others add it too: nothing more runs.
	mariadbtest.MustExec(t, e.srcDB,
		"ALTER TABLE shard_1.t_2 ADD COLUMN c2 INT NULL", "INSERT INTO shard_1.t_2 VALUES (103, 'x', 9)",
		"ALTER TABLE shard_2.t_1 ADD COLUMN c2 INT NULL", "INSERT INTO shard_2.t_1 VALUES (203, 'y', 10)")
	e.waitMergedOn(t, r, "id, v, c2")
	if got := mergedAlters(t, e); got != before+1 {
		t.Fatalf("%d ALTERs ran once every shard added c2, want 1", got-before)
	}

	// DROP COLUMN: the target keeps c2 until the last shard dropped it.
	mariadbtest.MustExec(t, e.srcDB,
		"ALTER TABLE shard_1.t_1 DROP COLUMN c2", "INSERT INTO shard_1.t_1 VALUES (4, 'dropped')",
		"ALTER TABLE shard_1.t_2 DROP COLUMN c2", "INSERT INTO shard_1.t_2 VALUES (104, 'dropped')",
		"INSERT INTO shard_2.t_1 VALUES (204, 'kept', 11)")
	e.waitMergedOn(t, r, "id, v")
	if !e.targetHasColumn(t, "c2") {
		t.Fatal("the target dropped c2 before the last shard did")
	}
	if got := mergedAlters(t, e); got != before+1 {
		t.Fatalf("%d ALTERs ran before the last shard dropped c2, want 1", got-before)
	}
	mariadbtest.MustExec(t, e.srcDB, "ALTER TABLE shard_2.t_1 DROP COLUMN c2", "INSERT INTO shard_2.t_1 VALUES (205, 'last')")
	e.waitMergedOn(t, r, "id, v")
	testutil.Eventually(t, syncTimeout, "the target drops c2 with the last shard", func() error {
		if e.targetHasColumn(t, "c2") {
			return fmt.Errorf("merged.t still has c2")
		}
		return nil
	})
	if got := mergedAlters(t, e); got != before+2 {
		t.Errorf("%d ALTERs ran in all, want 2", got-before)
	}
	locks, err := shardddl.Locks(context.Background(), e.etcd.Client(t), shardPrefix, e.cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) != 0 {
		t.Errorf("locks left: %+v", locks)
	}
}

// TestShardOptimisticRestartReplays: the unit stops without a final
// checkpoint after DDLs it reported and ran; the new unit replays them from
// the older checkpoint with the schemas it stored (no DDL runs twice, no
// schema is taken from the source's newer state) and goes on.
func TestShardOptimisticRestartReplays(t *testing.T) {
	e := newOptShardEnv(t, "shardor", false)
	u, r := e.start(t)
	mariadbtest.MustExec(t, e.srcDB,
		"INSERT INTO shard_1.t_1 VALUES (1, 'a')",
		"ALTER TABLE shard_1.t_1 ADD COLUMN c2 INT NULL",
		"INSERT INTO shard_1.t_1 VALUES (2, 'b', 5)",
		"ALTER TABLE shard_1.t_1 ADD COLUMN c3 INT NULL",
		"INSERT INTO shard_1.t_1 VALUES (3, 'c', 6, 7)",
		"INSERT INTO shard_2.t_1 VALUES (201, 'd')")
	testutil.Eventually(t, syncTimeout, "c3 on the target", func() error {
		if !e.targetHasColumn(t, "c3") {
			return fmt.Errorf("no c3 yet")
		}
		return nil
	})
	r.Stop(t)
	u.Kill() // no final flush: the checkpoint may be before the DDLs
	before := mergedAlters(t, e)
	mariadbtest.MustExec(t, e.srcDB,
		"ALTER TABLE shard_1.t_2 ADD COLUMN c2 INT NULL", "INSERT INTO shard_1.t_2 VALUES (101, 'e', 8)")
	u2, r2 := e.start(t)
	defer u2.Close()
	defer r2.Stop(t)
	e.waitMergedOn(t, r2, "id, v")
	rows, err := mariadbtest.QueryRows(context.Background(), e.dstDB, "SELECT id, c2, c3 FROM merged.t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`"1"|NULL|NULL|`, `"2"|"5"|NULL|`, `"3"|"6"|"7"|`, `"101"|"8"|NULL|`, `"201"|NULL|NULL|`}; !slices.Equal(rows, want) {
		t.Errorf("merged.t %q, want %q", rows, want)
	}
	if got := mergedAlters(t, e); got != before {
		t.Errorf("%d ALTERs ran after the restart, want none", got-before)
	}
}

// TestShardOptimisticConflictPauses: in strict mode a change to another
// type ladder stops the unit with the non-resumable shard-ddl-conflict
// error, nothing is applied; handle-error replace with a compatible
// statement resolves it on the next run.
func TestShardOptimisticConflictPauses(t *testing.T) {
	e := newOptShardEnv(t, "shardoc", true)
	u, r := e.start(t)
	defer u.Close()
	mariadbtest.MustExec(t, e.srcDB, "INSERT INTO shard_1.t_1 VALUES (1, 'a')", "INSERT INTO shard_2.t_1 VALUES (201, 'b')")
	e.waitMergedOn(t, r, "id, v")
	before := mergedAlters(t, e)
	mariadbtest.MustExec(t, e.srcDB,
		"ALTER TABLE shard_1.t_1 MODIFY COLUMN v INT NOT NULL",
		"INSERT INTO shard_1.t_1 VALUES (2, 42)",
		"INSERT INTO shard_2.t_1 VALUES (202, 'c')")
	res := r.Wait(t, syncTimeout)
	if !res.Failed() || res.Errors[0].Code != CodeShardDDLConflict || res.Errors[0].Resumable {
		t.Fatalf("result %+v, want the non-resumable %s", res, CodeShardDDLConflict)
	}
	if msg := res.Errors[0].Message; !strings.Contains(msg, "shard_1") || !strings.Contains(msg, "MODIFY") {
		t.Errorf("conflict message does not name the table and statement: %s", msg)
	}
	if got := mergedAlters(t, e); got != before {
		t.Fatalf("%d ALTERs ran for a conflicting DDL", got-before)
	}
	if st := u.ShardDDL(); st == nil || st.State != "conflict" || !strings.Contains(st.Conflict, "MODIFY") {
		t.Errorf("shard-ddl of the paused unit: %+v, want its conflict", st)
	}
	if err := u.HandleError(context.Background(), unit.HandleErrorRequest{Op: unit.HandleErrorReplace,
		SQLs: []string{"ALTER TABLE merged.t MODIFY COLUMN v VARCHAR(40) NOT NULL"}}); err != nil {
		t.Fatal(err)
	}
	r2 := unittest.Start(u, true, 0)
	defer r2.Stop(t)
	testutil.Eventually(t, syncTimeout, "the replacement ran and the rows after it merged", func() error {
		rows, err := mariadbtest.QueryRows(context.Background(), e.dstDB, "SELECT id, v FROM merged.t ORDER BY id")
		if err != nil {
			return err
		}
		if want := []string{`"1"|"a"|`, `"2"|"42"|`, `"201"|"b"|`, `"202"|"c"|`}; !slices.Equal(rows, want) {
			return fmt.Errorf("rows %q, want %q", rows, want)
		}
		return nil
	})
	if st := u.ShardDDL(); st != nil {
		t.Errorf("shard-ddl after the conflict was replaced: %+v", st)
	}
	var typ string
	if err := e.dstDB.QueryRow("SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'merged' AND TABLE_NAME = 't' " +
		"AND COLUMN_NAME = 'v'").Scan(&typ); err != nil || typ != "varchar(40)" {
		t.Errorf("merged.t.v is %q (%v), want varchar(40)", typ, err)
	}
	if got := mergedAlters(t, e); got != before+1 {
		t.Errorf("%d ALTERs ran, want 1", got-before)
	}
}

// TestShardOptimisticTableLeaves: the last shard that still has a column
// the others dropped is dropped itself; the group's join loses the column
// and a table of this source, with no DDL of its own at hand, owns and
// runs the DROP COLUMN on the merged table.
func TestShardOptimisticTableLeaves(t *testing.T) {
	e := newOptShardEnv(t, "shardol", false)
	u, r := e.start(t)
	defer u.Close()
	defer r.Stop(t)
	for _, s := range e.shards {
		mariadbtest.MustExec(t, e.srcDB, "ALTER TABLE "+s+" ADD COLUMN c2 INT NULL")
	}
	mariadbtest.MustExec(t, e.srcDB,
		"INSERT INTO shard_1.t_1 VALUES (1, 'a', 1)", "INSERT INTO shard_1.t_2 VALUES (101, 'b', 2)",
		"ALTER TABLE shard_1.t_2 DROP COLUMN c2", "ALTER TABLE shard_2.t_1 DROP COLUMN c2",
		"INSERT INTO shard_2.t_1 VALUES (201, 'c')")
	e.waitMergedOn(t, r, "id, v")
	if !e.targetHasColumn(t, "c2") {
		t.Fatal("the target dropped c2 while shard_1.t_1 has it")
	}
	before := mergedAlters(t, e)
	mariadbtest.MustExec(t, e.srcDB, "DROP TABLE shard_1.t_1", "INSERT INTO shard_1.t_2 VALUES (102, 'd')")
	testutil.Eventually(t, syncTimeout, "the target drops c2 once its last holder left", func() error {
		if e.targetHasColumn(t, "c2") {
			return fmt.Errorf("merged.t still has c2")
		}
		return nil
	})
	if got := mergedAlters(t, e); got != before+1 {
		t.Errorf("%d ALTERs ran, want 1", got-before)
	}
	// The dropped shard's rows stay in the merged table.
	testutil.Eventually(t, syncTimeout, "the rows after the drop merged", func() error {
		rows, err := mariadbtest.QueryRows(context.Background(), e.dstDB, "SELECT id, v FROM merged.t ORDER BY id")
		if err != nil {
			return err
		}
		if want := []string{`"1"|"a"|`, `"101"|"b"|`, `"102"|"d"|`, `"201"|"c"|`}; !slices.Equal(rows, want) {
			return fmt.Errorf("merged.t %q, want %q", rows, want)
		}
		return nil
	})
}

// TestShardOptimisticTwoSources: two units, one per source (shard_1 and
// shard_2 of one server, split by their block-allow lists), coordinate
// through etcd while writers change every shard and the shards' DDLs come
// close together: each change of the joined schema runs once on the
// merged table, and it ends equal to the union.
func TestShardOptimisticTwoSources(t *testing.T) {
	e := newOptShardEnv(t, "shardo2", false)
	cfg2, src2 := *e.cfg, *e.src
	cfg2.SourceID, src2.SourceID = "mysql-02", "mysql-02"
	e.cfg.BAList = config.BAList{DoDBs: []string{"shard_1"}}
	cfg2.BAList = config.BAList{DoDBs: []string{"shard_2"}}
	u1, r1 := e.start(t)
	defer u1.Close()
	defer r1.Stop(t)
	u2, r2 := e.startWith(t, &cfg2, &src2)
	defer u2.Close()
	defer r2.Stop(t)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, len(e.shards))
	for i, s := range e.shards {
		go func() {
			var err error
			for n := 1; ctx.Err() == nil && err == nil; n++ {
				_, err = e.srcDB.Exec("INSERT INTO "+s+" (id, v) VALUES (?, 'w')", i*100000+n)
				if err == nil && n%3 == 0 {
					_, err = e.srcDB.Exec("UPDATE "+s+" SET v = 'u' WHERE id = ?", i*100000+n-1)
				}
			}
			done <- err
		}()
	}
	before := mergedAlters(t, e)
	for _, ddl := range []string{"ADD COLUMN c2 INT NULL", "ADD COLUMN c3 VARCHAR(10) NULL", "DROP COLUMN c2"} {
		for _, s := range e.shards {
			mariadbtest.MustExec(t, e.srcDB, "ALTER TABLE "+s+" "+ddl)
		}
	}
	stop()
	for range e.shards {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	mariadbtest.MustExec(t, e.srcDB, "UPDATE shard_1.t_1 SET c3 = 'x'", "UPDATE shard_2.t_1 SET c3 = 'y'")
	testutil.Eventually(t, syncTimeout, "both units caught up", func() error {
		for _, r := range []*unittest.Run{r1, r2} {
			select {
			case res := <-r.Done:
				r.Done <- res
				t.Fatalf("a unit stopped: %+v", res)
			default:
			}
		}
		want := e.shardRowsOn(t, "id, v, c3")
		got, err := mariadbtest.QueryRows(context.Background(), e.dstDB, "SELECT id, v, c3 FROM merged.t")
		if err != nil {
			return err
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("merged.t has %d rows, the shards %d", len(got), len(want))
		}
		return nil
	})
	if e.targetHasColumn(t, "c2") {
		t.Error("the target kept c2 after every shard dropped it")
	}
	if got := mergedAlters(t, e); got != before+3 {
		t.Errorf("%d ALTERs ran on the merged table, want 3 (ADD c2, ADD c3, DROP c2)", got-before)
	}
}
