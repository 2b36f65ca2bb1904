package syncer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// workloadRows is the number of row changes of the mixed workload: the
// issue's 200k row changes plus DDL.
const workloadRows = 200000

// workload writes random transactions of inserts, updates (also of the
// primary and unique keys) and deletes to tables of the form
// (id INT PRIMARY KEY, u INT UNIQUE, v VARCHAR, n BIGINT).
type workload struct {
	db     *sql.DB
	tables []string
	nextID atomic.Int64
	rows   atomic.Int64 // row changes written
}

const workloadTable = "(id INT PRIMARY KEY, u INT NULL UNIQUE, v VARCHAR(64), n BIGINT UNSIGNED, d DECIMAL(12,3), ts DATETIME(3))"

// workloadTablePK is workloadTable without the second unique key, so its
// batches are compacted (see compact.go).
const workloadTablePK = "(id INT PRIMARY KEY, u INT NULL, v VARCHAR(64), n BIGINT UNSIGNED, d DECIMAL(12,3), ts DATETIME(3), KEY (u))"

// txn runs one random transaction of a few statements.
func (w *workload) txn(ctx context.Context, rng *rand.Rand) error {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	n := 1 + rng.IntN(8)
	for i := 0; i < n; i++ {
		table := w.tables[rng.IntN(len(w.tables))]
		var q string
		var args []any
		switch op := rng.IntN(10); {
		case op < 5:
			id := w.nextID.Add(1)
			q = "INSERT INTO " + table + " (id, u, v, n, d, ts) VALUES (?, ?, ?, ?, ?, NOW(3))"
			args = []any{id, id * 7, fmt.Sprintf("v%d-é", id), uint64(rng.Int64()), float64(rng.IntN(1e6)) / 1000}
		case op < 8:
			id := 1 + rng.Int64N(max(w.nextID.Load(), 1))
			q = "UPDATE " + table + " SET v = ?, n = n + 1, d = d * 2 WHERE id = ?"
			args = []any{fmt.Sprintf("up%d", rng.IntN(1000)), id}
		case op < 9:
			id := 1 + rng.Int64N(max(w.nextID.Load(), 1))
			// Move the row to a new primary and unique key.
			nid := w.nextID.Add(1)
			q = "UPDATE " + table + " SET id = ?, u = ? WHERE id = ?"
			args = []any{nid, nid * 7, id}
		default:
			id := 1 + rng.Int64N(max(w.nextID.Load(), 1))
			q = "DELETE FROM " + table + " WHERE id = ?"
			args = []any{id}
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return errors.Join(err, tx.Rollback())
		}
		affected, _ := res.RowsAffected()
		w.rows.Add(affected)
	}
	return tx.Commit()
}

// run writes until rows row changes are written or ctx is done, from
// several goroutines.
func (w *workload) run(ctx context.Context, rows int64, writers int) error {
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for ctx.Err() == nil && w.rows.Load() < rows {
				if err := w.txn(ctx, rng); err != nil {
					if ctx.Err() != nil {
						return
					}
					deadlock := dbconn.IsLockConflict(err) || dbconn.ErrorNumber(err) == 1062 // ER_DUP_ENTRY
					if !deadlock {
						errc <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// TestMixedWorkloadWithDDL replicates a concurrent workload interleaved
// with DDL (add/drop column, add index, rename, truncate) across binlog
// rotations, and checks target == source. t1 has a second unique key (its
// changes apply in order), t2 and t3 only a primary key (compacted).
func TestMixedWorkloadWithDDL(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true, MaxBinlogSize: 1 << 20})
	cfg, src := e.configs(t, "mixed")
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app",
		"CREATE TABLE app.t1 "+workloadTable, "CREATE TABLE app.t2 "+workloadTablePK, "CREATE TABLE app.t3 "+workloadTablePK)
	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)
	defer r.Stop(t)

	w := &workload{db: e.srcDB, tables: []string{"app.t1", "app.t2", "app.t3"}}
	ctx := context.Background()
	phase := func(rows int64) {
		t.Helper()
		if err := w.run(ctx, w.rows.Load()+rows, 4); err != nil {
			t.Fatalf("workload: %v", err)
		}
	}
	per := int64(workloadRows / 4)
	phase(per)
	mariadbtest.MustExec(t, e.srcDB, "ALTER TABLE app.t1 ADD COLUMN extra VARCHAR(20) DEFAULT 'x'", "ALTER TABLE app.t2 ADD INDEX idx_n (n)")
	phase(per)
	mariadbtest.MustExec(t, e.srcDB, "ALTER TABLE app.t1 DROP COLUMN extra", "RENAME TABLE app.t3 TO app.t3_renamed",
		"CREATE TABLE app.t3 LIKE app.t3_renamed")
	phase(per)
	mariadbtest.MustExec(t, e.srcDB, "TRUNCATE TABLE app.t2")
	w.tables = append(w.tables, "app.t3_renamed")
	phase(per)
	e.waitEqual(t, same("app.t1", "app.t2", "app.t3", "app.t3_renamed"), r)
	st := u.Status().(Status)
	if st.DDLs < 6 || st.Transactions == 0 || st.Batches == 0 {
		t.Errorf("status %+v: want >= 6 DDLs, some transactions and batches", st)
	}
	t.Logf("replicated %d row changes: %+v", w.rows.Load(), st)
}
