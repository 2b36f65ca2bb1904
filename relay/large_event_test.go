package relay

import (
	"fmt"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// Row events larger than flushSize are passed through to the file in
// pieces; an event larger than a protocol packet (16 MiB) comes in several
// packets, and one whose packet payload is an exact multiple of the packet
// size is followed by an empty packet. The relay stores all of them byte
// for byte, with pending memory bounded by about flushSize.
func TestRelayLargeRowEvents(t *testing.T) {
	src := startSource(t, mariadbtest.Options{FastCommit: true, ExtraConfig: []string{"max_allowed_packet=256M"}})
	src.Exec(t, "CREATE DATABASE db")
	src.Exec(t, "CREATE TABLE db.blobs (id INT PRIMARY KEY, b LONGBLOB NOT NULL)")
	dir := t.TempDir()
	r := newRelay(t, dir, sourceConfig(src))
	rn := startRun(t, r)

	// A row event's size is the row's size plus a constant for this table.
	const probe = 1000
	src.Exec(t, fmt.Sprintf("INSERT INTO db.blobs VALUES (1, REPEAT('p', %d))", probe))
	overhead := -1
	for _, ev := range sourceBinlogs(t, src) {
		if ev.typ == replication.WRITE_ROWS_EVENTv1 || ev.typ == replication.WRITE_ROWS_EVENTv2 {
			overhead = len(ev.raw) - probe
		}
	}
	if overhead < 0 {
		t.Fatal("no row event for the probe row in the source's binlog")
	}
	const packet = 1<<24 - 1 // MaxPayloadLen
	rows := []int{
		flushSize + 1000,            // passed through, in its own transaction
		17 << 20,                    // two packets
		2<<20 + 17,                  // passed through after a multi-packet event
		2*packet - 1 - overhead,     // OK byte + event fill two packets exactly: an empty one follows
		100,                         // small, after it
		flushSize - overhead - 1000, // read whole
	}
	src.Exec(t, fmt.Sprintf("INSERT INTO db.blobs VALUES (2, REPEAT('a', %d))", rows[0]))
	db := src.DB(t)
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range rows[1:] {
		if _, err := tx.ExecContext(t.Context(), fmt.Sprintf("INSERT INTO db.blobs VALUES (%d, REPEAT(CHAR(98 + %d), %d))", i+3, i, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, r, src)
	rn.stop(t)
	sameEvents(t, relayBinlogs(t, dir), sourceBinlogs(t, src))
	checkMariadbBinlog(t, dir)
	if peak := r.pendingPeak.Load(); peak > 2*flushSize {
		t.Errorf("the writer held %d bytes unwritten, want at most about flushSize (%d)", peak, flushSize)
	}
}
