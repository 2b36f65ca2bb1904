//go:build bench

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// Environment variables of the relay memory benchmark.
const (
	relayTxnMBEnv = "BENCH_RELAY_TXN_MB" // size of the one large transaction of many row events, MiB (default 512)
	relayRowMBEnv = "BENCH_RELAY_ROW_MB" // size of each single-row event of the large-row transaction, MiB (default 48)
	relayRowCount = 4                    // rows (and row events) of the large-row transaction
	relayRSSLimit = 64 << 20             // the relay's RSS limit whatever the transaction size
	relayMemTable = "bench.mem"
)

// TestRelayLargeTxnMemory pulls, in a child process so that its peak RSS is the relay's own,
// (a) one transaction of BENCH_RELAY_TXN_MB MiB made of many row events and (b) one
// transaction of relayRowCount rows of BENCH_RELAY_ROW_MB MiB each (one row event each, with
// max_allowed_packet raised on the source), and records the peak RSS of each against 64 MiB.
func TestRelayLargeTxnMemory(t *testing.T) {
	txnMB := envInt(t, relayTxnMBEnv, 512)
	rowMB := envInt(t, relayRowMBEnv, 48)
	ctx := t.Context()
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "relay-mem-src", Binlog: true, FastCommit: true,
		MaxBinlogSize: relayMaxBinlog, ExtraConfig: append([]string{"max_allowed_packet=1G"}, serverSettings...)})
	db := src.DB(t)
	execAll(t, ctx, db, "CREATE DATABASE bench",
		"CREATE TABLE "+relayMemTable+" (id BIGINT NOT NULL PRIMARY KEY, b LONGBLOB NOT NULL) ENGINE=InnoDB")

	// (a) rows of 8000 bytes: one row event each (binlog_row_event_max_size is 8 KiB).
	const rowBytes = 8000
	rows := txnMB << 20 / rowBytes
	pullLargeTxn(t, src, "many-row-events", txnMB, fmt.Sprintf(
		"INSERT INTO %s SELECT seq, REPEAT(MD5(seq), %d) FROM bench.seq_1_to_%d", relayMemTable, rowBytes/32, rows))

	// (b) relayRowCount rows of rowMB MiB, one row event each.
	execAll(t, ctx, db, "TRUNCATE TABLE "+relayMemTable)
	pullLargeTxn(t, src, "large-row-events", rowMB, fmt.Sprintf(
		"INSERT INTO %s SELECT seq, REPEAT(MD5(seq), %d) FROM bench.seq_1_to_%d", relayMemTable, rowMB<<20/32, relayRowCount))
}

// pullLargeTxn empties the source's binlog, commits one transaction with insert, and pulls the
// binlog with a relay child; it records the child's peak RSS against relayRSSLimit.
func pullLargeTxn(t *testing.T, src *mariadbtest.Instance, name string, sizeMB int64, insert string) {
	t.Helper()
	ctx := t.Context()
	db := src.DB(t)
	execAll(t, ctx, db, "RESET MASTER")
	began := time.Now()
	execAll(t, ctx, db, insert)
	end := quietEnd(t, src)
	files := binaryLogs(t, db)
	total := totalSize(files)
	var maxRow int64
	if err := db.QueryRowContext(ctx, "SELECT MAX(LENGTH(b)) FROM "+relayMemTable).Scan(&maxRow); err != nil {
		t.Fatalf("largest row of %s: %v", relayMemTable, err)
	}
	t.Logf("%s: one transaction in %d binlog files, %.1f MB, rows of %d bytes, committed in %v; end %s",
		name, len(files), mb(total), maxRow, since(began), end)

	work := t.TempDir()
	dir := filepath.Join(work, "relay")
	params := relayParams{childCommon: childCommon{Timeout: 10 * time.Minute},
		Dir: dir, Host: src.Host(), Port: src.Port(), User: mariadbtest.RootUser, EndName: end.Name, EndPos: end.Pos}
	if p := os.Getenv(profileEnv); p != "" {
		params.CPUProfile = filepath.Join(p, "relay-"+name+".cpu.pprof")
	}
	rep, usage := spawnChild(t, ctx, "relay", params, work)
	if got := dirBinlogBytes(t, dir); got != total {
		t.Fatalf("%s: the relay wrote %d bytes of binlog, the source has %d", name, got, total)
	}
	t.Logf("%s: relay %v (%.1f MB/s), peak RSS %.1f MB, CPU %v", name, rep.Elapsed.Round(time.Millisecond),
		mb(total)/rep.Elapsed.Seconds(), mb(usage.PeakRSS), usage.CPU.Round(time.Millisecond))
	record(t, "relay-large-txn-memory",
		f("case", name), f("txn_MB", mb(total)), f("max_row_MB", mb(maxRow)), f("requested_MiB", sizeMB),
		f("relay_s", rep.Elapsed.Seconds()), f("relay_cpu_s", usage.CPU.Seconds()),
		f("relay_peak_rss_MB", mb(usage.PeakRSS)), f("target", rssVerdict(usage.PeakRSS, relayRSSLimit)))
}
