package dump

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// TestDumpConsistentUnderWrites dumps while a writer inserts and updates
// rows; the dump must hold exactly the transactions committed before the
// snapshot's binlog location.
func TestDumpConsistentUnderWrites(t *testing.T) {
	src := startSource(t)
	checkConsistent(t, src, mariadbtest.SourceUser, mariadbtest.SourcePassword, dumpfile.MethodFlushLock)
}

// TestDumpWithoutReload: a user without RELOAD cannot take FLUSH TABLES
// WITH READ LOCK; the dump falls back to the binlog-snapshot method and is
// still consistent.
func TestDumpWithoutReload(t *testing.T) {
	src := startSource(t)
	src.Exec(t, "CREATE USER 'noreload'@'%' IDENTIFIED BY 'pw'")
	src.Exec(t, "GRANT SELECT, REPLICATION CLIENT ON *.* TO 'noreload'@'%'")
	m := checkConsistent(t, src, "noreload", "pw", dumpfile.MethodBinlogSnapshot)
	if m.LockHeld != 0 {
		t.Errorf("lock held %v with the binlog-snapshot method", m.LockHeld)
	}
}

// op is one committed writer transaction: it inserted row ins (v = 0) and
// added 1 to v of row upd; its commit ends at pos of file.
type op struct {
	file     string
	pos      uint32
	ins, upd int64
}

func checkConsistent(t *testing.T, src *mariadbtest.Instance, user, password, method string) *dumpfile.Manifest {
	t.Helper()
	const initial = 30000
	src.Exec(t, "CREATE DATABASE app")
	src.Exec(t, "CREATE TABLE app.w (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL, pad CHAR(100))")
	src.Exec(t, fmt.Sprintf("INSERT INTO app.w (v, pad) SELECT 0, 'p' FROM app.seq_1_to_%d", initial))

	w := startWriter(t, src, initial)
	testutil.Eventually(t, 30*time.Second, "writer commits", func() error {
		select {
		case err := <-w.done:
			t.Fatalf("writer: %v", err)
		default:
		}
		if n := w.count(); n < 20 {
			return fmt.Errorf("%d commits", n)
		}
		return nil
	})
	cfg, scfg := configs(src, user, password, 4, 500)
	d := newDumper(t, cfg, scfg, t.TempDir())
	m := process(t, d)
	ops := w.stop(t)

	if m.Method != method {
		t.Errorf("method %q, want %q", m.Method, method)
	}
	model := map[int64]int{}
	for id := int64(1); id <= initial; id++ {
		model[id] = 0
	}
	before, after := 0, 0
	for _, o := range ops {
		if o.file != m.Start.Name {
			t.Fatalf("the binlog rotated during the test (%s, snapshot in %s)", o.file, m.Start.Name)
		}
		if o.pos > m.Start.Pos {
			after++
			continue
		}
		before++
		model[o.ins] = 0
		model[o.upd]++
	}
	if before == 0 || after == 0 {
		t.Fatalf("%d writes before the snapshot at %v and %d after: the test proves nothing", before, m.Start, after)
	}
	var want []string
	for id, v := range model {
		want = append(want, fmt.Sprintf("%q|%q|%q|", fmt.Sprint(id), fmt.Sprint(v), "p"))
	}
	slices.Sort(want)
	sameRows(t, "app.w at the snapshot", dumpedRows(t, d.dir, m, "app.w"), want)
	t.Logf("%d writes before the snapshot at %v, %d during/after; %d chunks; lock held %v", before, m.Start, after, m.Chunks(), m.LockHeld)
	return m
}

// writer commits transactions of one insert and one update until stopped,
// recording each with the binlog position after its commit (one writer: the
// position is its commit's end).
type writer struct {
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	ops    []op // guarded by mu
}

func startWriter(t *testing.T, src *mariadbtest.Instance, initial int64) *writer {
	db := src.DB(t)
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := w.run(ctx, db, initial)
		if ctx.Err() != nil {
			err = nil // stopped: the transaction in flight fails in one of several ways
		}
		w.done <- err
	}()
	return w
}

func (w *writer) run(ctx context.Context, db *sql.DB, initial int64) error {
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	// Ids need not be consecutive (INSERT ... SELECT reserves auto-increment
	// values in batches): updates pick among the ids that exist.
	ids := make([]int64, 0, initial+10000)
	for id := int64(1); id <= initial; id++ {
		ids = append(ids, id)
	}
	for ctx.Err() == nil {
		tx, err := c.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, "INSERT INTO app.w (v, pad) VALUES (0, 'p')")
		if err != nil {
			return err
		}
		ins, err := res.LastInsertId()
		if err != nil {
			return err
		}
		upd := ids[rand.IntN(len(ids))]
		if _, err := tx.ExecContext(ctx, "UPDATE app.w SET v = v + 1 WHERE id = ?", upd); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		ids = append(ids, ins)
		o := op{ins: ins, upd: upd}
		var skip1, skip2 sql.NullString
		if err := c.QueryRowContext(ctx, "SHOW MASTER STATUS").Scan(&o.file, &o.pos, &skip1, &skip2); err != nil {
			return err
		}
		w.mu.Lock()
		w.ops = append(w.ops, o)
		w.mu.Unlock()
	}
	return nil
}

func (w *writer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ops)
}

func (w *writer) stop(t *testing.T) []op {
	t.Helper()
	w.cancel()
	if err := <-w.done; err != nil {
		t.Fatalf("writer: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ops
}
