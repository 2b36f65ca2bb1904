package syncer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/tests/typestest"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// TestColumnTypesRoundTrip replicates rows covering every column type with
// minimum, maximum, NULL, multi-byte and zero values, then updates and
// deletes some, and checks the target equals the source.
func TestColumnTypesRoundTrip(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	cfg, src := e.configs(t, "types")
	// No-key table: rows matched on all columns.
	const nokey = `CREATE TABLE app.nokey (a INT, b VARCHAR(10))`
	// The tables reach the target through the replicated DDL.
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app", typestest.DDL("app"), nokey)

	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)

	mariadbtest.MustExec(t, e.srcDB, typestest.SQLMode)
	mariadbtest.MustExec(t, e.srcDB, typestest.Inserts("app")...)
	mariadbtest.MustExec(t, e.srcDB,
		"INSERT INTO app.nokey VALUES (1, 'a'), (1, 'a'), (2, NULL), (NULL, 'n')",
	)
	mariadbtest.MustExec(t, e.srcDB,
		"UPDATE app.types SET tiu = 254, biu = 18446744073709551614, vc = CONCAT(vc, '-é'), ts = '2001-02-03 04:05:06.7' WHERE id IN (2, 4)",
		"UPDATE app.types SET id = 40 WHERE id = 4",
		"UPDATE app.types SET j = NULL, bl = NULL, e = NULL WHERE id = 5",
		"DELETE FROM app.types WHERE id = 1",
		"UPDATE app.nokey SET b = 'b' WHERE a = 1 LIMIT 1",
		"DELETE FROM app.nokey WHERE a IS NULL",
		"UPDATE app.nokey SET a = 3 WHERE b IS NULL",
	)
	e.waitEqual(t, same("app.types", "app.nokey"), r)
	// Status shows the read location within an idle tick or two.
	var st Status
	testutil.Eventually(t, 5*time.Second, "status shows the GTID set read", func() error {
		if st = u.Status().(Status); st.BinlogGTID == "" {
			return fmt.Errorf("status binlog %q gtid %q", st.Binlog, st.BinlogGTID)
		}
		return nil
	})
	if res := r.Stop(t); !res.IsCanceled || res.Failed() {
		t.Fatalf("Process after cancel = %+v, want canceled without errors", res)
	}
	if st.Inserts != 9 || st.Updates != 6 || st.Deletes != 2 {
		t.Errorf("status counts inserts %d updates %d deletes %d; want 9, 6, 2", st.Inserts, st.Updates, st.Deletes)
	}
	if len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "nokey") {
		t.Errorf("status warnings = %q, want one about app.nokey", st.Warnings)
	}
	if !strings.HasPrefix(st.Binlog, "mariadb-bin.") || st.BinlogGTID == "" {
		t.Errorf("status binlog %q gtid %q", st.Binlog, st.BinlogGTID)
	}
}

// TestEmptyBlobAndPaddedBinaryKey checks two values the binlog shortens: an
// empty BLOB/TEXT must stay empty (not NULL) on the target, and rows keyed by a
// BINARY(n) value ending in 0x00 (stripped in the binlog) must still be found
// by UPDATE and DELETE.
func TestEmptyBlobAndPaddedBinaryKey(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	cfg, src := e.configs(t, "pad")
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app",
		"CREATE TABLE app.bk (k BINARY(4) PRIMARY KEY, b BLOB, x TEXT, v INT)")
	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)
	mariadbtest.MustExec(t, e.srcDB,
		"INSERT INTO app.bk VALUES ('a', '', '', 1), (x'6200', x'00', NULL, 2), (x'63000000', NULL, 'c', 3), ('dd', 'd', 'd', 4)",
		"UPDATE app.bk SET v = 20 WHERE k = x'6200'",
		"UPDATE app.bk SET b = '' WHERE k = x'63'",
		"DELETE FROM app.bk WHERE k = 'dd'")
	e.waitEqual(t, same("app.bk"), r)
	var n int
	if err := e.dstDB.QueryRow("SELECT COUNT(*) FROM app.bk WHERE b = '' AND x = ''").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows with empty BLOB and TEXT on the target: %d, %v; want 1", n, err)
	}
	if res := r.Stop(t); res.Failed() {
		t.Fatalf("sync unit: %+v", res)
	}
}
