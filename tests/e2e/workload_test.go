package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// crashDB is the source database the replication tests write and the task
// replicates (and nothing else).
const crashDB = "crash"

// crashTable is one table of the workload: its DDL and the ORDER BY of its
// primary key for the row-by-row comparison.
type crashTable struct {
	name, orderBy, ddl string
}

// crashTables have a single-column primary key, a composite primary key and
// an AUTO_INCREMENT key beside a UNIQUE key, over a mix of column types
// (signed/unsigned integers, DECIMAL, DOUBLE, FLOAT, ENUM, BIT, DATE,
// DATETIME(6), TIMESTAMP(3), utf8mb4 text, binary, JSON, NULLs).
var crashTables = []crashTable{{
	name:    "accounts",
	orderBy: "id",
	ddl: `CREATE TABLE crash.accounts (
  id BIGINT NOT NULL PRIMARY KEY,
  owner VARCHAR(64) CHARACTER SET utf8mb4 NOT NULL,
  balance DECIMAL(16,4) NOT NULL,
  ratio DOUBLE NULL,
  flags TINYINT UNSIGNED NOT NULL,
  kind ENUM('basic','gold','platinum') NOT NULL,
  opened DATE NULL,
  touched DATETIME(6) NOT NULL,
  note TEXT CHARACTER SET utf8mb4 NULL,
  raw VARBINARY(32) NULL)`,
}, {
	name:    "order_items",
	orderBy: "order_id, line",
	ddl: `CREATE TABLE crash.order_items (
  order_id INT UNSIGNED NOT NULL,
  line SMALLINT NOT NULL,
  sku CHAR(12) NOT NULL,
  qty MEDIUMINT NOT NULL,
  price DECIMAL(10,2) NOT NULL,
  weight FLOAT NULL,
  shipped TIMESTAMP(3) NULL DEFAULT NULL,
  PRIMARY KEY (order_id, line))`,
}, {
	name:    "users",
	orderBy: "id",
	ddl: `CREATE TABLE crash.users (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  email VARCHAR(100) NOT NULL,
  name VARCHAR(50) CHARACTER SET utf8mb4 NOT NULL,
  score BIGINT NOT NULL,
  active BIT(1) NOT NULL,
  profile JSON NULL,
  UNIQUE KEY uk_email (email))`,
}}

// Key spaces of the workload: small, so that writers keep hitting rows and
// keys that other transactions just inserted, changed or deleted.
const (
	accountIDs = 400
	orderIDs   = 120
	orderLines = 6
	emails     = 200
)

// workload writes small random transactions of INSERT/UPDATE/DELETE to
// crashTables from several goroutines until stop. Key collisions between
// writers (duplicate key, deadlock, lock wait timeout) roll the transaction
// back and are counted; any other error ends that writer and is returned by
// stop.
type workload struct {
	db    *sql.DB
	seed  uint64
	stopc chan struct{}
	wg    sync.WaitGroup

	commits, rollbacks atomic.Int64

	once sync.Once
	mu   sync.Mutex
	errs []error // guarded by mu
}

// startWorkload starts writers goroutines on db; stop (also run in
// t.Cleanup) ends them.
func startWorkload(t *testing.T, db *sql.DB, writers int) *workload {
	t.Helper()
	w := &workload{db: db, seed: uint64(time.Now().UnixNano()), stopc: make(chan struct{})}
	t.Logf("workload: %d writers, seed %d", writers, w.seed)
	for i := range writers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.writer(rand.New(rand.NewPCG(w.seed, uint64(i))))
		}()
	}
	t.Cleanup(func() {
		if err := w.stop(); err != nil {
			t.Errorf("workload: %v", err)
		}
	})
	return w
}

// stop ends the writers after their current transaction, waits for them and
// returns their errors. Later calls return the same.
func (w *workload) stop() error {
	w.once.Do(func() { close(w.stopc) })
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(w.errs...)
}

// waitCommits waits up to d until the writers committed n transactions; a
// timeout prints the counts reached.
func (w *workload) waitCommits(t *testing.T, d time.Duration, n int64) {
	t.Helper()
	testutil.Eventually(t, d, fmt.Sprintf("the workload commits %d transactions", n), func() error {
		if w.commits.Load() < n {
			return errors.New(w.String())
		}
		return nil
	})
}

func (w *workload) String() string {
	return fmt.Sprintf("%d commits, %d rollbacks on key collisions", w.commits.Load(), w.rollbacks.Load())
}

func (w *workload) writer(rng *rand.Rand) {
	for {
		select {
		case <-w.stopc:
			return
		default:
		}
		// Each transaction is bounded; stop waits for the current one,
		// so no statement is cut off by a cancelled context.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := w.txn(ctx, rng)
		cancel()
		switch {
		case err == nil:
			w.commits.Add(1)
		case collision(err):
			w.rollbacks.Add(1)
		default:
			w.mu.Lock()
			w.errs = append(w.errs, err)
			w.mu.Unlock()
			return
		}
		// Pace the writers so the target, which commits durably, can keep
		// up within the tests' deadlines.
		select {
		case <-w.stopc:
			return
		case <-time.After(time.Duration(rng.IntN(4)) * time.Millisecond):
		}
	}
}

// collision reports whether err is a conflict between concurrent writers
// on the same keys, which the workload expects and rolls back.
func collision(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1062, // ER_DUP_ENTRY
		1213, // ER_LOCK_DEADLOCK
		1205: // ER_LOCK_WAIT_TIMEOUT
		return true
	}
	return false
}

// txn runs one transaction of 1 to 4 random statements.
func (w *workload) txn(ctx context.Context, rng *rand.Rand) error {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	for range 1 + rng.IntN(4) {
		q, args := randomStatement(rng)
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return errors.Join(fmt.Errorf("%s: %w", q, err), tx.Rollback())
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// randomStatement returns one random change of one of crashTables.
func randomStatement(rng *rand.Rand) (string, []any) {
	switch rng.IntN(3) {
	case 0:
		return accountStatement(rng)
	case 1:
		return orderItemStatement(rng)
	default:
		return userStatement(rng)
	}
}

func accountStatement(rng *rand.Rand) (string, []any) {
	id := 1 + rng.Int64N(accountIDs)
	switch op := rng.IntN(20); {
	case op < 8:
		// Half of the inserts are upserts, which become updates when the
		// key exists.
		return "INSERT INTO crash.accounts (id, owner, balance, ratio, flags, kind, opened, touched, note, raw) " +
				"VALUES (?, ?, ?, ?, ?, ?, ?, NOW(6), ?, ?)" + upsert(rng, "balance = balance + VALUES(balance), note = VALUES(note)"),
			[]any{id, fmt.Sprintf("owner-%d-ü", id), decimalText(rng, 1e8, 4), nullable(rng, rng.NormFloat64()*1e3),
				rng.IntN(256), randomKind(rng), nullable(rng, randomDate(rng)), nullable(rng, randomText(rng)), nullable(rng, randomBytes(rng))}
	case op < 13:
		return "UPDATE crash.accounts SET balance = balance + ?, touched = NOW(6), note = ?, flags = flags ^ 1 WHERE id = ?",
			[]any{decimalText(rng, 1e3, 4), nullable(rng, randomText(rng)), id}
	case op < 16:
		// One rows event with several rows.
		return "UPDATE crash.accounts SET ratio = ?, kind = ?, raw = ? WHERE id BETWEEN ? AND ?",
			[]any{nullable(rng, rng.Float64()), randomKind(rng), nullable(rng, randomBytes(rng)), id, id + 8}
	case op < 19:
		return "DELETE FROM crash.accounts WHERE id = ?", []any{id}
	default:
		return "DELETE FROM crash.accounts WHERE id BETWEEN ? AND ?", []any{id, id + 3}
	}
}

func orderItemStatement(rng *rand.Rand) (string, []any) {
	order, line := 1+rng.IntN(orderIDs), 1+rng.IntN(orderLines)
	switch op := rng.IntN(20); {
	case op < 9:
		return "INSERT INTO crash.order_items (order_id, line, sku, qty, price, weight, shipped) " +
				"VALUES (?, ?, ?, ?, ?, ?, IF(?, NOW(3), NULL))" + upsert(rng, "qty = qty + VALUES(qty), sku = VALUES(sku)"),
			[]any{order, line, fmt.Sprintf("SKU-%06d", rng.IntN(1e6)), 1 + rng.IntN(100), decimalText(rng, 1e5, 2),
				nullable(rng, float32(rng.Float64()*100)), rng.IntN(2) == 0}
	case op < 14:
		return "UPDATE crash.order_items SET qty = qty + ?, price = ?, weight = ? WHERE order_id = ? AND line = ?",
			[]any{1 + rng.IntN(10), decimalText(rng, 1e5, 2), nullable(rng, float32(rng.Float64()*100)), order, line}
	case op < 17:
		// Moves the row to another primary key.
		return "UPDATE crash.order_items SET line = ?, shipped = NOW(3) WHERE order_id = ? AND line = ?",
			[]any{1 + rng.IntN(orderLines), order, line}
	case op < 19:
		return "DELETE FROM crash.order_items WHERE order_id = ? AND line = ?", []any{order, line}
	default:
		return "DELETE FROM crash.order_items WHERE order_id = ?", []any{order}
	}
}

func userStatement(rng *rand.Rand) (string, []any) {
	email := randomEmail(rng)
	switch op := rng.IntN(20); {
	case op < 8:
		return "INSERT INTO crash.users (email, name, score, active, profile) VALUES (?, ?, ?, ?, ?)" +
				upsert(rng, "name = VALUES(name), score = score DIV 3, profile = VALUES(profile)"),
			[]any{email, randomText(rng), rng.Int64() - rng.Int64(), rng.IntN(2),
				nullable(rng, fmt.Sprintf(`{"n":%d,"tags":["a","ß"],"ok":%t}`, rng.IntN(1000), rng.IntN(2) == 0))}
	case op < 12:
		// Moves a row to another unique key, which may have been deleted
		// from another row just before.
		return "UPDATE crash.users SET email = ? WHERE email = ?", []any{randomEmail(rng), email}
	case op < 16:
		return "UPDATE crash.users SET score = score DIV 2 + ?, name = ?, active = NOT active WHERE email = ?",
			[]any{rng.IntN(1000), randomText(rng), email}
	default:
		return "DELETE FROM crash.users WHERE email = ?", []any{email}
	}
}

// upsert returns, one time in two, an ON DUPLICATE KEY UPDATE clause with
// set.
func upsert(rng *rand.Rand, set string) string {
	if rng.IntN(2) == 0 {
		return ""
	}
	return " ON DUPLICATE KEY UPDATE " + set
}

// nullable returns nil one time in five, else v.
func nullable(rng *rand.Rand, v any) any {
	if rng.IntN(5) == 0 {
		return nil
	}
	return v
}

// decimalText is a random decimal in (-limit, limit) with scale digits.
func decimalText(rng *rand.Rand, limit float64, scale int) string {
	return fmt.Sprintf("%.*f", scale, (rng.Float64()*2-1)*limit)
}

func randomKind(rng *rand.Rand) string {
	return []string{"basic", "gold", "platinum"}[rng.IntN(3)]
}

func randomDate(rng *rand.Rand) string {
	return time.Date(1990+rng.IntN(40), time.Month(1+rng.IntN(12)), 1+rng.IntN(28), 0, 0, 0, 0, time.UTC).Format(time.DateOnly)
}

func randomEmail(rng *rand.Rand) string {
	return fmt.Sprintf("user-%03d@example.com", rng.IntN(emails))
}

// randomText is short text with multi-byte characters, quotes and
// backslashes.
func randomText(rng *rand.Rand) string {
	parts := []string{"alpha", "ünïcödé", "✓", "😀", `quote'"`, `back\slash`, "tab\t", "漢字"}
	var b strings.Builder
	for range 1 + rng.IntN(4) {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	return b.String()
}

// randomBytes is up to 32 arbitrary bytes, NUL and 0xFF included.
func randomBytes(rng *rand.Rand) []byte {
	b := make([]byte, rng.IntN(33))
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return b
}
