package syncer

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// TestForeignKeyGroupCost measures what applying a foreign key group on
// one worker costs (DM_FK_BENCH=1; docs/design.md, Foreign keys): the same
// parent and child tables and changes, replicated once into a target
// without the key (row-key parallelism) and once into one with it (one
// worker, the source's checks, no compaction), caught up from the binlog.
func TestForeignKeyGroupCost(t *testing.T) {
	if os.Getenv("DM_FK_BENCH") == "" {
		t.Skip("set DM_FK_BENCH=1 to measure")
	}
	const rows = 20000
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	mariadbtest.MustExec(t, e.dstDB, "CREATE DATABASE plain", "CREATE DATABASE fk",
		"CREATE TABLE plain.p (id INT PRIMARY KEY, v INT)", "CREATE TABLE plain.c (id INT PRIMARY KEY, p INT, v INT, INDEX (p))",
		"CREATE TABLE fk.p (id INT PRIMARY KEY, v INT)",
		"CREATE TABLE fk.c (id INT PRIMARY KEY, p INT, v INT, FOREIGN KEY (p) REFERENCES fk.p (id) ON DELETE CASCADE)")
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE plain", "CREATE DATABASE fk",
		"CREATE TABLE plain.p (id INT PRIMARY KEY, v INT)", "CREATE TABLE plain.c (id INT PRIMARY KEY, p INT, v INT, INDEX (p))",
		"CREATE TABLE fk.p (id INT PRIMARY KEY, v INT)",
		"CREATE TABLE fk.c (id INT PRIMARY KEY, p INT, v INT, FOREIGN KEY (p) REFERENCES fk.p (id) ON DELETE CASCADE)")
	file, pos, _ := e.src.MasterStatus(t)
	for _, db := range []string{"plain", "fk"} {
		for i := 0; i < rows; i += 100 {
			var pv, cv []string
			for j := i; j < i+100; j++ {
				pv = append(pv, fmt.Sprintf("(%d,0)", j))
				cv = append(cv, fmt.Sprintf("(%d,%d,0)", j, j))
			}
			mariadbtest.MustExec(t, e.srcDB, "INSERT INTO "+db+".p VALUES "+strings.Join(pv, ","),
				"INSERT INTO "+db+".c VALUES "+strings.Join(cv, ","),
				fmt.Sprintf("UPDATE %s.c SET v = v + 1 WHERE id >= %d AND id < %d", db, i, i+100))
		}
		// Deleting parents removes their children by cascade on the source
		// (fk) and by explicit deletes (plain), the same rows either way.
		mariadbtest.MustExec(t, e.srcDB, fmt.Sprintf("DELETE FROM %s.c WHERE id %% 10 = 0 AND '%s' = 'plain'", db, db),
			fmt.Sprintf("DELETE FROM %s.p WHERE id %% 10 = 0", db))
	}
	for _, db := range []string{"plain", "fk"} {
		cfg, src := e.configs(t, "cost_"+db)
		cfg.Meta = config.Meta{BinlogName: file, BinlogPos: pos}
		cfg.BAList = config.BAList{DoDBs: []string{db}}
		cfg.Syncer.WorkerCount, cfg.Syncer.Batch = 8, 100
		u := newUnit(t, cfg, src)
		began := time.Now()
		r := unittest.Start(u, false, 0)
		e.waitEqual(t, same(db+".p", db+".c"), r)
		took := time.Since(began)
		r.Stop(t)
		u.Close()
		st := u.Status().(Status)
		t.Logf("FK_COST %s: %d row changes in %s (%.0f/s), %d batches", db, st.Inserts+st.Updates+st.Deletes,
			took.Round(10*time.Millisecond), float64(st.Inserts+st.Updates+st.Deletes)/took.Seconds(), st.Batches)
	}
}
