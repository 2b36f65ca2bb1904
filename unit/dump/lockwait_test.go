package dump

import (
	"context"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit/dumpfile"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// TestDumpLongQueryFallsBack: a long-running write keeps FLUSH TABLES WITH
// READ LOCK waiting (and other writers with it; MariaDB's FTWRL does not
// wait for reads); past the lock wait the dump gives the lock up and uses
// the binlog-snapshot method instead.
func TestDumpLongQueryFallsBack(t *testing.T) {
	src := startSource(t)
	src.Exec(t, "CREATE DATABASE app")
	src.Exec(t, "CREATE TABLE app.t (id INT PRIMARY KEY)")
	src.Exec(t, "INSERT INTO app.t VALUES (1), (2), (3)")
	db := src.DB(t)
	done := make(chan error, 1)
	go func() {
		_, err := db.ExecContext(context.Background(), "INSERT INTO app.t SELECT 100 + SLEEP(6)")
		done <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "the long query runs", func() bool {
		return src.QueryString(t, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'INSERT INTO app.t SELECT 100%'") == "1"
	})
	cfg, scfg := configs(src, mariadbtest.SourceUser, mariadbtest.SourcePassword, 2, 1)
	d := newDumper(t, cfg, scfg, t.TempDir())
	d.lockWait = time.Second
	began := time.Now()
	m := process(t, d)
	took := time.Since(began)
	if m.Method != dumpfile.MethodBinlogSnapshot || m.Rows() != 3 {
		t.Errorf("method %q rows %d, want %q and 3 (the long insert is not committed)", m.Method, m.Rows(), dumpfile.MethodBinlogSnapshot)
	}
	if took > 4*time.Second {
		t.Errorf("the dump took %v: it waited for the long query instead of giving the lock up", took)
	}
	// A writer is not blocked once the dump gave the lock up.
	src.Exec(t, "INSERT INTO app.t VALUES (4)")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestDumpPauseWhileLockWaits: a pause while FLUSH TABLES WITH READ LOCK
// waits returns at once and withdraws the lock request (the lock session is
// closed; MariaDB notices within a second), so writers do not wait for the
// lock wait to run out.
func TestDumpPauseWhileLockWaits(t *testing.T) {
	src := startSource(t)
	src.Exec(t, "CREATE DATABASE app")
	src.Exec(t, "CREATE TABLE app.t (id INT PRIMARY KEY)")
	db := src.DB(t)
	long := make(chan error, 1)
	go func() {
		_, err := db.ExecContext(context.Background(), "INSERT INTO app.t SELECT 100 + SLEEP(5)")
		long <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "the long insert runs", func() bool {
		return src.QueryString(t, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'INSERT INTO app.t SELECT 100%'") == "1"
	})
	cfg, scfg := configs(src, mariadbtest.SourceUser, mariadbtest.SourcePassword, 2, 10)
	d := newDumper(t, cfg, scfg, t.TempDir())
	d.lockWait = time.Minute
	r := unittest.Start(d, false, runTimeout)
	testutil.WaitFor(t, 10*time.Second, "the dump waits for the lock", func() bool {
		return src.QueryString(t, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'FLUSH TABLES WITH READ LOCK'") == "1"
	})
	paused := time.Now()
	r.Cancel()
	if res := r.Wait(t, runTimeout+30*time.Second); !res.IsCanceled {
		t.Fatalf("Process after cancel = %+v", res)
	}
	src.Exec(t, "INSERT INTO app.t VALUES (1)")
	took := time.Since(paused)
	t.Logf("a writer went through %v after the pause", took)
	if took > 3*time.Second {
		t.Errorf("a writer waited %v after the pause: the lock request was not withdrawn", took)
	}
	if err := <-long; err != nil {
		t.Fatal(err)
	}
}
