//go:build bench

package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// The sysbench oltp_write_only schema and workload: sbTables tables of sbTableSize rows.
const (
	sbSchema    = "sbtest"
	sbTables    = 8
	sbTableSize = 25000
	// sbWriters is how many connections write concurrently, as sysbench --threads.
	sbWriters = 8
)

func sbTable(n int) string { return fmt.Sprintf("%s.sbtest%d", sbSchema, n) }

// sbTableNames lists every sysbench table.
func sbTableNames() []string {
	out := make([]string, sbTables)
	for i := range out {
		out[i] = sbTable(i + 1)
	}
	return out
}

// sbPrepare returns the statements that create the schema and fill it with the same
// deterministic rows on every server (from the Sequence engine, so no data crosses the wire).
func sbPrepare() []string {
	stmts := []string{"CREATE DATABASE " + sbSchema}
	for i := 1; i <= sbTables; i++ {
		stmts = append(stmts,
			fmt.Sprintf("CREATE TABLE %s (id INT NOT NULL AUTO_INCREMENT, k INT NOT NULL DEFAULT 0, "+
				"c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', PRIMARY KEY (id), KEY k_%d (k)) ENGINE=InnoDB",
				sbTable(i), i),
			fmt.Sprintf("INSERT INTO %s (id, k, c, pad) SELECT seq, (seq * 7919) %% %d + 1, "+
				"LEFT(REPEAT(MD5(seq), 4), 119), LEFT(REPEAT(MD5(-seq), 2), 59) FROM "+sbSchema+".seq_1_to_%d",
				sbTable(i), sbTableSize, sbTableSize))
	}
	return stmts
}

// sbWriteOnly runs oltp_write_only transactions (index update, non-index update, delete and
// re-insert, each by primary key on a random table and id) from sbWriters connections until
// at least rows row changes are committed. It returns the exact number of row changes
// committed, which is the number of row changes in the binlog.
func sbWriteOnly(ctx context.Context, db *sql.DB, rows int64) (int64, error) {
	var done atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, sbWriters)
	for w := range sbWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for done.Load() < rows {
				n, err := sbTxn(ctx, db, rng)
				if err != nil {
					errc <- err
					return
				}
				done.Add(n)
			}
		}()
	}
	wg.Wait()
	close(errc)
	return done.Load(), <-errc
}

// sbTxn runs one transaction and returns the row changes it committed; deadlocks and lock wait
// timeouts are retried.
func sbTxn(ctx context.Context, db *sql.DB, rng *rand.Rand) (int64, error) {
	table := sbTable(1 + rng.IntN(sbTables))
	id := func() int { return 1 + rng.IntN(sbTableSize) }
	del := id()
	stmts := []benchStmt{
		{"UPDATE " + table + " SET k = k + 1 WHERE id = ?", []any{id()}},
		{"UPDATE " + table + " SET c = ? WHERE id = ?", []any{sbString(rng, 120), id()}},
		{"DELETE FROM " + table + " WHERE id = ?", []any{del}},
		{"INSERT INTO " + table + " (id, k, c, pad) VALUES (?, ?, ?, ?)", []any{del, id(), sbString(rng, 120), sbString(rng, 60)}},
	}
	n, err := execRetry(ctx, db, stmts, 10)
	if err != nil {
		return 0, fmt.Errorf("write-only transaction on %s: %w", table, err)
	}
	return n, nil
}

// benchStmt is one statement of a benchmark transaction.
type benchStmt struct {
	q    string
	args []any
}

// execRetry runs stmts as one transaction and returns the row changes it
// committed; a deadlock or lock wait timeout runs it again, at most
// attempts more times.
func execRetry(ctx context.Context, db *sql.DB, stmts []benchStmt, attempts int) (int64, error) {
	for attempt := 0; ; attempt++ {
		n, err := func() (int64, error) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return 0, err
			}
			var n int64
			for _, s := range stmts {
				res, err := tx.ExecContext(ctx, s.q, s.args...)
				if err != nil {
					return 0, errors.Join(err, tx.Rollback())
				}
				affected, err := res.RowsAffected()
				if err != nil {
					return 0, errors.Join(err, tx.Rollback())
				}
				n += affected
			}
			return n, tx.Commit()
		}()
		if err == nil {
			return n, nil
		}
		var myErr *mysql.MySQLError
		if !errors.As(err, &myErr) || (myErr.Number != 1213 && myErr.Number != 1205) || attempt >= attempts {
			return 0, err
		}
	}
}

// sbString is sysbench's random text: groups of 11 digits separated by '-', n-1 characters
// long, as sysbench's c (119 of CHAR(120)) and pad (59 of CHAR(60)) values.
func sbString(rng *rand.Rand, n int) string {
	b := make([]byte, n-1)
	for i := range b {
		if i%12 == 11 {
			b[i] = '-'
		} else {
			b[i] = byte('0' + rng.IntN(10))
		}
	}
	return string(b)
}

// Bulk workload for the relay benchmark: transactions of bulkRowsPerTxn rows of about 400
// bytes each (about 20 kB of binlog per transaction) from bulkWriters connections.
const (
	bulkTable      = "bench.bulk"
	bulkRowsPerTxn = 50
	bulkWriters    = 4
)

func bulkPrepare() []string {
	return []string{
		"CREATE DATABASE bench",
		"CREATE TABLE " + bulkTable + " (id BIGINT NOT NULL PRIMARY KEY, a VARCHAR(200) NOT NULL, b VARCHAR(200) NOT NULL) ENGINE=InnoDB",
	}
}

// bulkFill inserts rows until the source's binlog files hold at least bytes, as reported by
// size (which is called now and then from one writer).
func bulkFill(ctx context.Context, db *sql.DB, bytes int64, size func() (int64, error)) error {
	var next atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, bulkWriters)
	for w := range bulkWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				hi := next.Add(bulkRowsPerTxn)
				q := fmt.Sprintf("INSERT INTO %s SELECT seq, REPEAT(MD5(seq), 6), REPEAT(MD5(seq + 1), 6) FROM bench.seq_%d_to_%d",
					bulkTable, hi-bulkRowsPerTxn+1, hi)
				if _, err := db.ExecContext(ctx, q); err != nil {
					stop.Store(true)
					errc <- fmt.Errorf("bulk insert: %w", err)
					return
				}
				if w == 0 && i%50 == 49 {
					n, err := size()
					if err != nil {
						stop.Store(true)
						errc <- err
						return
					}
					if n >= bytes {
						stop.Store(true)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// since is a stopwatch for log lines.
func since(t0 time.Time) time.Duration { return time.Since(t0).Round(time.Millisecond) }
