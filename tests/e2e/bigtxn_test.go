package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/cdctest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// Issue 23's acceptance, sync side: one transaction of many rows, read
// straight from the source or through the relay, keeps the worker within
// bigTxnRSSLimit, and a kill -9 in the middle of applying it neither loses
// nor duplicates a row, in a table with a primary key or without any key.

const (
	// bigTxnRowsEnv sets the rows of each large transaction of the sync
	// and stream tests (comma-separated, one run per count); the default
	// keeps `make test` short, `make test-large` runs 2M and 10M.
	bigTxnRowsEnv  = "DM_BIGTXN_ROWS"
	bigTxnRowsDflt = 200000
	// bigTxnRSSLimit bounds the worker's peak RSS whatever the size: the
	// unit holds bounded queues, not transactions.
	bigTxnRSSLimit = 256 << 20
	// bigTxnProfileEnv names a directory for heap profiles of the worker,
	// taken before each kill and at the end.
	bigTxnProfileEnv = "DM_BIGTXN_PROFILE_DIR"
	bigTxnKeyed      = crashDB + ".big"
	bigTxnNoKey      = crashDB + ".big_nokey"
)

// TestSyncLargeTransaction replicates, straight from the source, one
// INSERT ... SELECT of N rows into a keyed and N into a key-less table (one
// transaction) and one UPDATE of the N keyed rows (another), killing the
// worker with SIGKILL in the middle of applying each.
func TestSyncLargeTransaction(t *testing.T) { eachBigTxnCount(t, false, testSyncLargeTransaction) }

// TestSyncLargeTransactionWithRelay is TestSyncLargeTransaction through the
// relay.
func TestSyncLargeTransactionWithRelay(t *testing.T) {
	eachBigTxnCount(t, true, testSyncLargeTransaction)
}

func testSyncLargeTransaction(t *testing.T, relay bool, n int) {
	r := startReplication(t, replOptions{relay: relay,
		syncer: "{worker-count: 4, batch: 100, checkpoint-flush-interval: 1}"})
	r.src.Exec(t, "CREATE TABLE "+bigTxnKeyed+" (id INT NOT NULL PRIMARY KEY, k INT NOT NULL, c VARCHAR(100) NOT NULL)")
	r.src.Exec(t, "CREATE TABLE "+bigTxnNoKey+" (id INT, k INT, c VARCHAR(100))")
	testutil.Eventually(t, 30*time.Second, "the large transaction tables exist on the target", func() error {
		_, err := r.bigCounts()
		return err
	})

	// A stream of the keyed table on the same worker: synced and streamed
	// at once, within one RSS bound.
	e := &streamEnv{replication: r, relay: relay}
	sinkDir := t.TempDir()
	r.c.ok("stream", "create", writeFile(t, "bigcdc.yaml", fmt.Sprintf(`name: bigcdc
source-id: %s
block-allow-list: {do-tables: [{db-name: %s, tbl-name: big}]}
format: debezium
sink: %s
`, replSource, crashDB, fileSink(sinkDir))))
	e.waitStream("bigcdc", time.Minute, "streaming", streamDoc.streaming)

	began := time.Now()
	r.srcTxn(fmt.Sprintf("INSERT INTO %s SELECT seq, seq, RPAD(MD5(seq), 100, '-') FROM %s.seq_1_to_%d", bigTxnKeyed, crashDB, n),
		fmt.Sprintf("INSERT INTO %s SELECT seq, seq, RPAD(MD5(seq), 100, '-') FROM %s.seq_1_to_%d", bigTxnNoKey, crashDB, n))
	r.srcTxn(fmt.Sprintf("UPDATE %s SET k = k + 1, c = RPAD(SHA1(id), 100, '+')", bigTxnKeyed))
	t.Logf("source: 2 transactions of %d + %d inserts and %d updates committed in %s", n, n, n,
		time.Since(began).Round(time.Millisecond))

	var peaks []int64
	// Kill 1: the key-less table's rows are being applied.
	r.waitSubtask(r.bigTimeout(n), "the sync unit applies the key-less table's rows", func(d subtaskDoc) bool {
		return d.syncing() && d.Progress.Inserts >= uint64(n)+uint64(n)/2
	})
	peaks = append(peaks, r.killBig("in the INSERT ... SELECT", func(c bigCounts) bool { return c.noKey > 0 && c.noKey < n }))
	r.restartWorker()
	// Kill 2: the update is being applied.
	r.waitSubtask(r.bigTimeout(n), "the sync unit applies the update", func(d subtaskDoc) bool {
		return d.syncing() && d.Progress.Updates >= uint64(n)/2
	})
	peaks = append(peaks, r.killBig("in the UPDATE", func(c bigCounts) bool { return c.updated > 0 && c.updated < n }))
	r.restartWorker()

	r.waitBigEqual(n, r.bigTimeout(n))
	t.Logf("target equal to the source %s after the source committed", time.Since(began).Round(time.Millisecond))
	// A marker row after them: the stream's checkpoint moves at commits,
	// and this one ends where the source's binlog ends.
	r.src.Exec(t, fmt.Sprintf("INSERT INTO %s VALUES (%d, 0, 'marker')", bigTxnKeyed, n+1))
	endFile, endPos, _ := r.src.MasterStatus(t)
	waitBigStream(e, sinkDir, 2*n+1, fmt.Sprintf("%s:%d", endFile, endPos), r.bigTimeout(n))
	t.Logf("stream holds the %d row changes of %s %s after the source committed", 2*n+1, bigTxnKeyed,
		time.Since(began).Round(time.Millisecond))
	peaks = append(peaks, r.bigPeak("at the end"))
	for i, p := range peaks {
		t.Logf("worker process %d: peak RSS %.1f MiB", i+1, float64(p)/(1<<20))
		if p > bigTxnRSSLimit {
			t.Errorf("worker process %d: peak RSS %.1f MiB, above %d MiB (relay %v, %d rows per transaction)",
				i+1, float64(p)/(1<<20), bigTxnRSSLimit>>20, relay, n)
		}
	}
}

// waitBigStream waits up to d until stream bigcdc's checkpoint reaches end
// ("file:pos", the source's position after the large transactions), then
// requires its file sink in dir to hold want distinct row events (deduped
// on identity, every replay equal to its first delivery), and no more.
func waitBigStream(e *streamEnv, dir string, want int, end string, d time.Duration) {
	e.t.Helper()
	e.waitStream("bigcdc", d, "the checkpoint reaches "+end, func(s streamDoc) bool {
		return s.streaming() && !locationBefore(s.Checkpoint, end)
	})
	testutil.Eventually(e.t, time.Minute, fmt.Sprintf("%d distinct row events in the sink", want), func() error {
		dd, rows := cdctest.NewDeduper(), 0
		err := eachFileSinkEvent(dir, "bigcdc", func(ev cdctest.Event) error {
			first, err := dd.Add(ev)
			if first && ev.Value.DDL == "" {
				rows++
			}
			return err
		})
		if err != nil {
			return err
		}
		if rows != want {
			return fmt.Errorf("%d distinct row events (%d replayed), want %d", rows, dd.Replayed, want)
		}
		return nil
	})
}

// locationBefore reports whether binlog location a ("file:pos") comes
// before b; an empty a does.
func locationBefore(a, b string) bool {
	af, ap, _ := strings.Cut(a, ":")
	bf, bp, _ := strings.Cut(b, ":")
	if af != bf {
		return af < bf // mariadb-bin.000002 < mariadb-bin.000010: fixed-width numbers
	}
	an, _ := strconv.Atoi(ap)
	bn, _ := strconv.Atoi(bp)
	return an < bn
}

// eachBigTxnCount runs test once per row count of DM_BIGTXN_ROWS (default
// bigTxnRowsDflt), as a subtest.
func eachBigTxnCount(t *testing.T, relay bool, test func(t *testing.T, relay bool, rows int)) {
	counts := []int{bigTxnRowsDflt}
	if s := os.Getenv(bigTxnRowsEnv); s != "" {
		counts = nil
		for _, part := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(part))
			if err != nil || n < 10_000 {
				t.Fatalf("%s=%q: want row counts of at least 10000, comma-separated", bigTxnRowsEnv, s)
			}
			counts = append(counts, n)
		}
	}
	for _, n := range counts {
		t.Run(fmt.Sprintf("rows=%d", n), func(t *testing.T) { test(t, relay, n) })
	}
}

// bigTimeout bounds each wait of the test: generous for a shared two-core
// machine (about 2,000 row changes a second at the least).
func (r *replication) bigTimeout(n int) time.Duration {
	return time.Minute + time.Duration(n/2000)*time.Second
}

// srcTxn runs queries in one source transaction.
func (r *replication) srcTxn(queries ...string) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), 30*time.Minute)
	defer cancel()
	tx, err := r.srcDB.BeginTx(ctx, nil)
	if err != nil {
		r.t.Fatalf("source: begin: %v", err)
	}
	for _, q := range queries {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			r.t.Fatalf("source: %s: %v (rollback: %v)", q, err, tx.Rollback())
		}
	}
	if err := tx.Commit(); err != nil {
		r.t.Fatalf("source: commit: %v", err)
	}
}

// bigCounts is what the target holds of the large transactions.
type bigCounts struct {
	keyed, noKey int // rows
	updated      int // keyed rows the UPDATE changed
}

// bigCounts counts the large transaction tables' rows on the target.
func (r *replication) bigCounts() (bigCounts, error) {
	ctx, cancel := context.WithTimeout(r.t.Context(), time.Minute)
	defer cancel()
	var c bigCounts
	err := r.tgtDB.QueryRowContext(ctx, fmt.Sprintf("SELECT (SELECT COUNT(*) FROM %s), (SELECT COUNT(*) FROM %s), "+
		"(SELECT COUNT(*) FROM %s WHERE k = id + 1)", bigTxnKeyed, bigTxnNoKey, bigTxnKeyed)).Scan(&c.keyed, &c.noKey, &c.updated)
	return c, err
}

// killBig reads the worker's peak RSS, kills it with SIGKILL and checks
// with mid that the target holds part of the transaction being applied
// (so the kill hit it in the middle); it returns the peak RSS.
func (r *replication) killBig(what string, mid func(bigCounts) bool) int64 {
	r.t.Helper()
	peak := r.bigPeak(what)
	st, _ := r.subtask()
	r.killWorker()
	c, err := r.bigCounts()
	if err != nil {
		r.t.Fatalf("target counts after the kill %s: %v", what, err)
	}
	r.t.Logf("kill %s: peak RSS %.1f MiB; target %d keyed rows (%d updated), %d key-less rows; subtask %v",
		what, float64(peak)/(1<<20), c.keyed, c.updated, c.noKey, st)
	if !mid(c) {
		r.t.Fatalf("the kill %s did not hit the transaction being applied: target %+v", what, c)
	}
	return peak
}

// bigPeak reads the current worker's peak RSS (VmHWM) and, with
// DM_BIGTXN_PROFILE_DIR set, saves its heap profile there (named after
// when).
func (r *replication) bigPeak(when string) int64 {
	r.t.Helper()
	r.saveHeapProfile(fmt.Sprintf("%s-%s", r.t.Name(), strings.ReplaceAll(when, " ", "-")))
	return r.workerHWM()
}

// workerHWM is VmHWM (peak RSS) of the current worker process in bytes.
func (r *replication) workerHWM() int64 { return r.workerStatus("VmHWM") }

// workerStatus is a size line (VmRSS, VmHWM, ...) of the current worker
// process's /proc status, in bytes.
func (r *replication) workerStatus(key string) int64 {
	r.t.Helper()
	n, err := testutil.ProcStatusBytes(strconv.Itoa(r.w.pid), key)
	if err != nil {
		r.t.Fatalf("%s of dm-worker: %v", key, err)
	}
	return n
}

// saveHeapProfile saves the worker's heap profile as <label>.heap.pprof in
// the directory DM_BIGTXN_PROFILE_DIR names, when it is set.
func (r *replication) saveHeapProfile(label string) {
	r.t.Helper()
	dir := os.Getenv(bigTxnProfileEnv)
	if dir == "" {
		return
	}
	res, err := httpDo(http.MethodGet, r.w.url("/debug/pprof/heap"), "")
	if err != nil || res.code != http.StatusOK {
		r.t.Fatalf("GET /debug/pprof/heap: %v %d", err, res.code)
	}
	file := filepath.Join(dir, strings.ReplaceAll(label, "/", "-")+".heap.pprof")
	if err := os.WriteFile(file, []byte(res.body), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.t.Logf("heap profile saved to %s", file)
}

// waitBigEqual waits up to d until, with n rows per transaction, the large transaction tables (and
// crashTables) have the same CHECKSUM TABLE on the target as on the source,
// and checks the row counts (a duplicate of a key-less row would show).
func (r *replication) waitBigEqual(n int, d time.Duration) {
	r.t.Helper()
	names := []string{bigTxnKeyed, bigTxnNoKey}
	for _, tb := range crashTables {
		names = append(names, crashDB+"."+tb.name)
	}
	want, err := checksumTables(r.srcDB, names, time.Minute)
	if err != nil {
		r.t.Fatalf("source checksums: %v", err)
	}
	testutil.Eventually(r.t, d, "the target has the source's checksums", func() error {
		got, err := checksumTables(r.tgtDB, names, time.Minute)
		if err != nil {
			return err
		}
		var diff []string
		for name, sum := range want {
			if got[name] != sum {
				diff = append(diff, fmt.Sprintf("%s: source %v, target %v", name, sum.String, got[name].String))
			}
		}
		if len(diff) > 0 {
			c, _ := r.bigCounts()
			return fmt.Errorf("%s; target %+v", strings.Join(diff, "; "), c)
		}
		return nil
	})
	c, err := r.bigCounts()
	if err != nil {
		r.t.Fatal(err)
	}
	if c.keyed != n || c.noKey != n || c.updated != n {
		r.t.Errorf("target holds %+v, want %d rows in each table, all updated", c, n)
	}
}
