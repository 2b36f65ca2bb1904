package stream

import (
	"fmt"
	"testing"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestSnapshotBitKey pages tables keyed by BIT(1), BIT(8) and BIT(64).
// Fill-history used to write a BIT cursor as X'..' of its bytes, which
// MariaDB compares with a BIT column as a double: past 2^53 neighbouring
// values compare equal and the key did not advance. The cursor is now the
// decimal number of its bytes (sqlschema.Keyset), which compares exactly;
// the cursor kept in progress is still the raw bytes.
func TestSnapshotBitKey(t *testing.T) {
	noLeaks(t, sqlLeaks)
	src := mariadbtest.StartSource(t)
	db := sourcePool(t, src, nil)
	ref := sourcePool(t, src, nil)
	src.Exec(t, "CREATE DATABASE snap")
	src.Exec(t, "CREATE TABLE snap.b1 (b BIT(1) NOT NULL PRIMARY KEY, v INT)")
	src.Exec(t, "INSERT INTO snap.b1 VALUES (0, 0), (1, 1)")
	src.Exec(t, "CREATE TABLE snap.b8 (b BIT(8) NOT NULL PRIMARY KEY, v INT)")
	src.Exec(t, "INSERT INTO snap.b8 SELECT seq, seq FROM snap.seq_0_to_255")
	src.Exec(t, "CREATE TABLE snap.b64 (b BIT(64) NOT NULL PRIMARY KEY, v INT)")
	src.Exec(t, "INSERT INTO snap.b64 SELECT 0xFFFFFFFFFFFFFFFF - seq, seq FROM snap.seq_0_to_19")
	src.Exec(t, "INSERT INTO snap.b64 SELECT 0x20000000000000 + seq, seq FROM snap.seq_0_to_9")
	src.Exec(t, "INSERT INTO snap.b64 VALUES (0, -1), (1, -2)")
	tables := map[TableName]int{{"snap", "b1"}: 2, {"snap", "b8"}: 256, {"snap", "b64"}: 32}
	keys := map[TableName][]string{}
	for tn := range tables {
		keys[tn] = []string{"b"}
	}
	for tn, n := range tables {
		for _, chunk := range []int{1, 3, 100} {
			calls, _ := collect(t, db, []TableName{tn}, keys, nil, chunk)
			what := fmt.Sprintf("%s in chunks of %d", tn, chunk)
			equalRows(t, what, rowsOf(calls, tn), reference(t, ref, "SELECT * FROM "+tn.quoted()+" ORDER BY b"))
			checkChunks(t, calls, tn, chunk, n)
			for _, c := range calls {
				for _, r := range c.rows {
					if len(r.Cursor) != 1 || r.Cursor[0] != string(r.Values[0].([]byte)) {
						t.Fatalf("%s: cursor %q of row %q, want the raw bytes of b", what, r.Cursor, r.Values)
					}
				}
			}
		}
	}
}
