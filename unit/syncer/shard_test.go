package syncer

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha/shardddl"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// shardEnv is one source with three shards (shard_1.t_1, shard_1.t_2,
// shard_2.t_1) routed into merged.t, a target, and an etcd for the locks.
type shardEnv struct {
	*env
	etcd   *etcdtest.Cluster
	cfg    *config.SubTaskConfig
	src    *config.SourceConfig
	shards []string
}

const shardPrefix = "/shardtest"

func newShardEnv(t *testing.T, task string) *shardEnv {
	t.Helper()
	e := &shardEnv{env: newEnv(t, mariadbtest.Options{FastCommit: true}), etcd: etcdtest.Start(t),
		shards: []string{"shard_1.t_1", "shard_1.t_2", "shard_2.t_1"}}
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE shard_1", "CREATE DATABASE shard_2")
	for _, s := range e.shards {
		mariadbtest.MustExec(t, e.srcDB, "CREATE TABLE "+s+" (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL)")
	}
	// The merged table exists on the target, as the load unit creates it.
	mariadbtest.MustExec(t, e.dstDB, "CREATE DATABASE merged", "CREATE TABLE merged.t (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL)")
	e.cfg, e.src = e.configs(t, task)
	e.cfg.ShardMode = config.ShardPessimistic
	e.cfg.BAList = config.BAList{DoDBs: []string{"shard_*"}}
	e.cfg.RouteRules = []config.RouteRule{{SchemaPattern: "shard_*", TablePattern: "t_*", TargetSchema: "merged", TargetTable: "t"}}
	return e
}

// start creates, initialises and starts a sync unit of the task.
func (e *shardEnv) start(t *testing.T) (*Syncer, *unittest.Run) {
	t.Helper()
	return e.startWith(t, e.cfg, e.src)
}

// startWith is start for the subtask of another source.
func (e *shardEnv) startWith(t *testing.T, cfg *config.SubTaskConfig, src *config.SourceConfig) (*Syncer, *unittest.Run) {
	t.Helper()
	u, err := New(cfg, src, nil, NewMetrics(), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := shardddl.New(e.etcd.Client(t), shardPrefix, cfg.Name, cfg.SourceID, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	u.UseShardDDL(c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := u.Init(ctx); err != nil {
		t.Fatal(err)
	}
	return u, unittest.Start(u, false, 0)
}

// union is every shard's rows, sorted, as text.
func (e *shardEnv) union(t *testing.T) []string {
	t.Helper()
	return e.shardRowsOn(t, "*")
}

// waitMerged waits until merged.t holds exactly the union of the shards.
func (e *shardEnv) waitMerged(t *testing.T, r *unittest.Run) {
	t.Helper()
	e.waitMergedOn(t, r, "*")
}

func clip(s string) string {
	if len(s) > 600 {
		return s[:600] + "..."
	}
	return s
}

// alters counts the ALTER TABLE statements the target ran.
func alters(t *testing.T, db *sql.DB) int {
	t.Helper()
	var name string
	var n int
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Com_alter_table'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitShardState waits for the unit's shard-ddl status to satisfy cond.
func waitShardState(t *testing.T, u *Syncer, what string, cond func(*unit.ShardDDLStatus) bool) *unit.ShardDDLStatus {
	t.Helper()
	var st *unit.ShardDDLStatus
	testutil.Eventually(t, syncTimeout, what, func() error {
		st = u.ShardDDL()
		if !cond(st) {
			return fmt.Errorf("shard-ddl %+v", st)
		}
		return nil
	})
	return st
}

// TestShardPessimisticHoldsAndResyncs: a shard that reached an ALTER holds
// its later rows (which use the new column) while the other shards keep
// replicating; once every shard reached it the ALTER runs once on the
// merged table, the held rows are re-synced, and two DDLs back to back
// resolve one after another.
func TestShardPessimisticHoldsAndResyncs(t *testing.T) {
	e := newShardEnv(t, "shardp")
	u, r := e.start(t)
	defer u.Close()
	defer r.Stop(t)

	mariadbtest.MustExec(t, e.srcDB,
		"INSERT INTO shard_1.t_1 VALUES (1, 'a'), (2, 'b')",
		"INSERT INTO shard_1.t_2 VALUES (101, 'c'), (102, 'd')",
		"INSERT INTO shard_2.t_1 VALUES (201, 'e')")
	e.waitMerged(t, r)
	before := alters(t, e.dstDB)

	mariadbtest.MustExec(t, e.srcDB,
		"ALTER TABLE shard_1.t_1 ADD COLUMN c2 INT NOT NULL DEFAULT 0",
		"INSERT INTO shard_1.t_1 VALUES (3, 'held', 7)",
		"UPDATE shard_1.t_1 SET c2 = 8 WHERE id = 1",
		"INSERT INTO shard_1.t_2 VALUES (103, 'flows')",
		"DELETE FROM shard_2.t_1 WHERE id = 201")
	st := waitShardState(t, u, "shard_1.t_1 waits for the other two shards", func(st *unit.ShardDDLStatus) bool {
		return st != nil && st.State == "waiting" && len(st.WaitingFor) == 2
	})
	if st.Lock != "shardp-`merged`.`t`" || len(st.DDLs) != 1 || !strings.Contains(st.DDLs[0], "ADD COLUMN `c2`") {
		t.Errorf("shard-ddl %+v", st)
	}
	// The other shards' rows flow; the held shard's do not.
	testutil.Eventually(t, syncTimeout, "rows of the shards not held are applied", func() error {
		var n int
		if err := e.dstDB.QueryRow("SELECT COUNT(*) FROM merged.t WHERE id IN (103, 201)").Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%d of the rows 103 (inserted), 201 (deleted) on the target", n)
		}
		return nil
	})
	var n int
	if err := e.dstDB.QueryRow("SELECT COUNT(*) FROM merged.t WHERE id = 3").Scan(&n); err != nil || n != 0 {
		t.Fatalf("held row 3 on the target (%d, %v)", n, err)
	}
	if got := alters(t, e.dstDB); got != before {
		t.Fatalf("%d ALTERs ran on the target before every shard reached the DDL", got-before)
	}

	mariadbtest.MustExec(t, e.srcDB,
		"ALTER TABLE shard_1.t_2 ADD COLUMN c2 INT NOT NULL DEFAULT 0",
		"INSERT INTO shard_1.t_2 VALUES (104, 'after', 9)",
		"ALTER TABLE shard_2.t_1 ADD COLUMN c2 INT NOT NULL DEFAULT 0",
		"INSERT INTO shard_2.t_1 VALUES (202, 'after', 10)")
	e.waitMerged(t, r)
	if got := alters(t, e.dstDB); got != before+1 {
		t.Errorf("%d ALTERs ran on the target, want 1", got-before)
	}

	// Two DDLs back to back on every shard.
	for _, s := range e.shards {
		mariadbtest.MustExec(t, e.srcDB,
			"ALTER TABLE "+s+" ADD INDEX idx_c2 (c2)",
			"ALTER TABLE "+s+" MODIFY COLUMN v VARCHAR(40) NOT NULL",
			"INSERT INTO "+s+" SELECT id + 1000, CONCAT(v, '-wider-than-twenty'), c2 FROM "+s+" WHERE id < 1000")
	}
	e.waitMerged(t, r)
	if got := alters(t, e.dstDB); got != before+3 {
		t.Errorf("%d ALTERs ran on the target, want 3", got-before)
	}
	locks, err := shardddl.Locks(context.Background(), e.etcd.Client(t), shardPrefix, e.cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range locks {
		if len(l.DDLs) > 0 {
			t.Errorf("lock left: %+v", l)
		}
	}
	testutil.Eventually(t, syncTimeout, "no lock in status", func() error {
		if st := u.ShardDDL(); st != nil {
			return fmt.Errorf("shard-ddl %+v", st)
		}
		return nil
	})
}

// TestShardPessimisticRestartWhileHeld: the unit stops (as if killed: no
// checkpoint flush) while a shard is held with rows after its DDL; a new
// unit replays from the checkpoint before the DDL, holds the shard again,
// and the merged table ends equal to the union once the others reach it.
func TestShardPessimisticRestartWhileHeld(t *testing.T) {
	e := newShardEnv(t, "shardr")
	u, r := e.start(t)
	mariadbtest.MustExec(t, e.srcDB,
		"INSERT INTO shard_1.t_1 VALUES (1, 'a')",
		"INSERT INTO shard_1.t_2 VALUES (101, 'c')",
		"ALTER TABLE shard_1.t_1 ADD COLUMN c2 INT NOT NULL DEFAULT 0",
		"INSERT INTO shard_1.t_1 VALUES (2, 'held', 5)",
		"INSERT INTO shard_1.t_2 VALUES (102, 'flows')",
		"INSERT INTO shard_2.t_1 VALUES (201, 'flows')")
	waitShardState(t, u, "shard_1.t_1 held", func(st *unit.ShardDDLStatus) bool { return st != nil && st.State == "waiting" })
	testutil.Eventually(t, syncTimeout, "rows after the held DDL of other shards applied", func() error {
		var n int
		if err := e.dstDB.QueryRow("SELECT COUNT(*) FROM merged.t WHERE id IN (102, 201)").Scan(&n); err != nil || n != 2 {
			return fmt.Errorf("%d rows, %v", n, err)
		}
		return nil
	})
	time.Sleep(1500 * time.Millisecond) // past checkpoint-flush-interval: a save would have happened
	r.Stop(t)
	u.Kill() // no final flush

	mariadbtest.MustExec(t, e.srcDB,
		"ALTER TABLE shard_1.t_2 ADD COLUMN c2 INT NOT NULL DEFAULT 0",
		"ALTER TABLE shard_2.t_1 ADD COLUMN c2 INT NOT NULL DEFAULT 0",
		"INSERT INTO shard_2.t_1 VALUES (202, 'after', 3)")
	before := alters(t, e.dstDB)
	u2, r2 := e.start(t)
	defer u2.Close()
	defer r2.Stop(t)
	e.waitMerged(t, r2)
	if got := alters(t, e.dstDB); got != before+1 {
		t.Errorf("%d ALTERs ran on the target after the restart, want 1", got-before)
	}
}

// TestShardPessimisticConflictReplaced: shards that reach different DDLs
// are a conflict on the lock naming both statements, nothing runs on the
// target, and handle-error replace of the differing shard's DDL (without a
// position: the conflict is what the unit is stuck on) resolves it.
func TestShardPessimisticConflictReplaced(t *testing.T) {
	e := newShardEnv(t, "shardc")
	u, r := e.start(t)
	defer u.Close()
	defer r.Stop(t)
	before := alters(t, e.dstDB)
	mariadbtest.MustExec(t, e.srcDB,
		"ALTER TABLE shard_1.t_1 ADD COLUMN c3 INT",
		"ALTER TABLE shard_1.t_2 ADD COLUMN c3 BIGINT",
		"ALTER TABLE shard_2.t_1 ADD COLUMN c3 INT",
		"INSERT INTO shard_1.t_1 VALUES (1, 'a', 1)", "INSERT INTO shard_2.t_1 VALUES (201, 'b', 2)")
	st := waitShardState(t, u, "a conflict", func(st *unit.ShardDDLStatus) bool { return st != nil && st.State == "conflict" })
	if !strings.Contains(st.Conflict, "BIGINT") || !strings.Contains(st.Conflict, "ADD COLUMN `c3` INT") {
		t.Errorf("conflict does not name both statements: %q", st.Conflict)
	}
	if got := alters(t, e.dstDB); got != before {
		t.Fatalf("%d ALTERs ran during the conflict", got-before)
	}
	// The table differs from the first member's DDL; shard_1.t_2 is it
	// (shard_1.t_1 reported first).
	mariadbtest.MustExec(t, e.dstDB, "SELECT 1")
	err := u.HandleError(context.Background(), unit.HandleErrorRequest{Op: unit.HandleErrorReplace,
		SQLs: []string{"ALTER TABLE shard_1.t_2 ADD COLUMN c3 INT"}}) // DM's form: the upstream table
	if err != nil {
		t.Fatal(err)
	}
	mariadbtest.MustExec(t, e.srcDB, "ALTER TABLE shard_1.t_2 MODIFY COLUMN c3 INT", "INSERT INTO shard_1.t_2 VALUES (101, 'c', 3)")
	// The replacement makes the shards agree on c3 INT; the upstream
	// MODIFY back to INT is then the table's next DDL, which the others
	// never reach: unlock it as an operator would.
	testutil.Eventually(t, syncTimeout, "the replaced DDL ran once", func() error {
		if got := alters(t, e.dstDB); got != before+1 {
			return fmt.Errorf("%d ALTERs", got-before)
		}
		return nil
	})
	waitShardState(t, u, "shard_1.t_2 waits at its MODIFY", func(st *unit.ShardDDLStatus) bool {
		return st != nil && st.State == "waiting" && len(st.DDLs) == 1 && strings.Contains(st.DDLs[0], "MODIFY")
	})
	if err := shardddl.Unlock(context.Background(), e.etcd.Client(t), shardPrefix, st.Lock, "", false); err != nil {
		t.Fatal(err)
	}
	e.waitMerged(t, r)
}

// TestTargetReadCommitted: the unit's target sessions run at READ
// COMMITTED (no gap locks between appliers of one merged table), unless
// the target writes a statement binlog, which refuses it.
func TestTargetReadCommitted(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	cfg, src := e.configs(t, "iso")
	u := newUnit(t, cfg, src)
	defer u.Close()
	var iso string
	if err := u.target.QueryRow("SELECT @@tx_isolation").Scan(&iso); err != nil || iso != "READ-COMMITTED" {
		t.Errorf("target session isolation %q (%v), want READ-COMMITTED", iso, err)
	}

	stmt := mariadbtest.Start(t, mariadbtest.Options{Name: "stmt-target", Binlog: true, FastCommit: true,
		ExtraConfig: []string{"binlog_format=STATEMENT"}})
	cfg.TargetDatabase = e.dbConfig(stmt)
	u2 := newUnit(t, cfg, src)
	defer u2.Close()
	if err := u2.target.QueryRow("SELECT @@tx_isolation").Scan(&iso); err != nil || iso != "REPEATABLE-READ" {
		t.Errorf("statement-binlog target: session isolation %q (%v), want the server's REPEATABLE-READ", iso, err)
	}
}
