package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/tests/cdctest"
)

// Issue 23 part 4, stream side: one transaction updating DM_BIGTXN_ROWS rows of
// (INT, INT, VARCHAR(100)) streamed to a file sink by a real dm-worker
// process, the only reader of the source (no subtask: the sync unit's
// direct reader is measured elsewhere), relay off and on. The worker is
// killed with SIGKILL in the middle of the transaction, once its
// checkpoint names a point inside it (freezeWorkerWhen), and started
// again. The file sink's events, deduped on identity as a consumer does,
// must be exactly the transaction's row changes, in binlog order, each
// replay identical to its first delivery; fewer events than were
// acknowledged before the kill may be replayed; and the worker's peak
// RSS (VmHWM) stays within bigTxnRSSLimit.
//
// DM_BIGTXN_ROWS sets the row counts (bigtxn_test.go; default 200000):
// `make test-large` runs 2M and 10M. With DM_BIGTXN_PROFILE_DIR=dir, heap
// profiles of the worker are saved there just before the kill and once
// the restarted worker caught up.
func TestStreamBigTxnSurvivesKill9(t *testing.T) { eachBigTxnCount(t, false, runStreamBigTxn) }

func TestStreamBigTxnWithRelaySurvivesKill9(t *testing.T) { eachBigTxnCount(t, true, runStreamBigTxn) }

func runStreamBigTxn(t *testing.T, relay bool, rows int) {
	e := newStreamEnv(t, streamEnvOptions{relay: relay, beforeWorker: func(e *streamEnv) {
		e.src.Exec(t, "CREATE TABLE crash.big (id INT PRIMARY KEY, a INT NOT NULL, c VARCHAR(100) NOT NULL)")
		for from := 1; from <= rows; from += 100_000 {
			q := fmt.Sprintf("INSERT INTO crash.big SELECT seq, seq %% 1000, RPAD(CONCAT('v-', seq), 100, 'v') FROM crash.seq_%d_to_%d",
				from, min(from+100_000-1, rows))
			if _, err := e.srcDB.ExecContext(t.Context(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}})
	if relay {
		e.w.waitStatus(30*time.Second, "relay runs", func(st workerStatus) bool { return st.Relay.Enabled })
	}
	dir := t.TempDir()
	const name = "bigtxn"
	e.c.ok("stream", "create", writeFile(t, name+".yaml", fmt.Sprintf(`name: %s
source-id: %s
block-allow-list: {do-tables: [{db-name: %s, tbl-name: big}]}
format: debezium
sink: {type: file, file: {dir: %q, rotate-size: 64MiB}}
`, name, replSource, crashDB, dir)))
	e.waitStream(name, time.Minute, "streaming", streamDoc.streaming)
	e.waitCaughtUp(time.Minute, name)

	began := time.Now()
	// Minutes at 10M rows on a loaded machine: a bound of its own.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Minute)
	defer cancel()
	if _, err := e.srcDB.ExecContext(ctx, "UPDATE crash.big SET a = a + 1, c = RPAD(CONCAT('u-', id), 100, 'u')"); err != nil {
		t.Fatalf("the big UPDATE: %v", err)
	}
	t.Logf("UPDATE of %d rows committed in %s", rows, time.Since(began).Round(time.Millisecond))

	// Kill once a quarter of the transaction is acknowledged and the
	// checkpoint mirror names a point inside it. At 200000 rows the worker
	// streams the whole transaction in about a second, the mirror is saved
	// once a second: the worker runs in slices, frozen between them, and
	// is killed while frozen at the first mirror that qualifies. A
	// transaction of millions of rows first runs at full speed to a fifth.
	if rows >= 1_000_000 {
		e.waitStream(name, 30*time.Minute, fmt.Sprintf("a fifth of the %d changes delivered", rows), func(d streamDoc) bool {
			return d.Events >= int64(rows/5)
		})
	}
	e.saveHeapProfile(fmt.Sprintf("relay-%v-%d-before-kill", relay, rows))
	store := ha.NewStore(e.c.direct, e.c.prefix)
	var mid ha.StreamCheckpoint
	e.freezeWorkerWhen(10*time.Minute, "the checkpoint mirror names a point a quarter into the transaction", func() (bool, error) {
		cp, _, err := store.GetStreamCheckpoint(t.Context(), replSource, name)
		if err != nil {
			return false, err
		}
		if cp.Txn == nil || cp.Txn.Events < int64(rows/4) {
			return false, nil
		}
		mid = cp
		return true, nil
	})
	hwm1 := e.workerHWM()
	e.killWorker()
	before, err := countFileSinkLines(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	if before >= rows {
		t.Fatalf("the file sink held all %d changes when the worker was killed; the kill missed the transaction's middle", rows)
	}
	raw, _ := json.Marshal(mid)
	t.Logf("killed with %d of %d changes in the file sink; checkpoint mirror %s", before, rows, raw)

	e.restartWorker()
	e.waitCaughtUp(10*time.Minute, name)
	e.saveHeapProfile(fmt.Sprintf("relay-%v-%d-after-restart", relay, rows))
	hwm2 := e.workerHWM()
	took := time.Since(began)

	dd, chk := cdctest.NewDeduper(), newBigTxnCheck(t, rows)
	events := 0
	err = eachFileSinkEvent(dir, name, func(ev cdctest.Event) error {
		events++
		first, err := dd.Add(ev)
		if first {
			chk.add(ev)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	chk.done()
	t.Logf("relay %v, %d rows: %d events in the sink, %d unique, %d replayed after the kill; "+
		"peak RSS %.1f MiB before the kill, %.1f MiB after the restart; %s from the UPDATE to caught up",
		relay, rows, events, dd.Unique(), dd.Replayed, float64(hwm1)/(1<<20), float64(hwm2)/(1<<20), took.Round(time.Millisecond))
	if dd.Unique() != rows {
		t.Errorf("%d distinct events, want one per updated row: %d", dd.Unique(), rows)
	}
	if dd.Replayed >= before/2 {
		t.Errorf("%d events replayed after the kill, %d were in the sink: the resume did not start inside the transaction", dd.Replayed, before)
	}
	for i, hwm := range []int64{hwm1, hwm2} {
		if hwm > bigTxnRSSLimit {
			t.Errorf("worker %d peak RSS (VmHWM) %.1f MiB, want at most %d MiB", i+1, float64(hwm)/(1<<20), bigTxnRSSLimit>>20)
		}
	}
}

// bigTxnCheck checks, event by event, that the first deliveries of a
// sink are exactly the UPDATE's row changes of the rows ids 1..rows in
// binlog order: one op u event of crash.big per row, with the row's before
// and after images as the INSERT and the UPDATE made them, binlog
// coordinates strictly increasing.
type bigTxnCheck struct {
	t    *testing.T
	seen []bool
	last cdctest.Value
	n    int
	bad  int
}

func newBigTxnCheck(t *testing.T, rows int) *bigTxnCheck {
	return &bigTxnCheck{t: t, seen: make([]bool, rows+1)}
}

// add checks the next first delivery.
func (c *bigTxnCheck) add(ev cdctest.Event) {
	c.t.Helper()
	v := ev.Value
	id, err := numberOf(ev.Key["id"])
	var problem string
	switch {
	case err != nil:
		problem = err.Error()
	case id < 1 || id >= int64(len(c.seen)) || c.seen[id]:
		problem = "a key outside 1..rows or seen before"
	case v.Op != "u" || v.Source.Table != "big":
		problem = "not an update of crash.big"
	case fmt.Sprint(v.After["c"]) != padTo(fmt.Sprintf("u-%d", id), 100, 'u') || fmt.Sprint(v.Before["c"]) != padTo(fmt.Sprintf("v-%d", id), 100, 'v') ||
		fmt.Sprint(v.Before["a"]) != strconv.FormatInt(id%1000, 10) || fmt.Sprint(v.After["a"]) != strconv.FormatInt(id%1000+1, 10):
		problem = "images are not the UPDATE's"
	case c.n > 0 && !coordsAfter(v, c.last):
		problem = fmt.Sprintf("comes after %s:%d:%d", c.last.Source.File, c.last.Source.Pos, c.last.Source.Row)
	}
	c.n++
	c.last = v
	if problem == "" {
		c.seen[id] = true
		return
	}
	if c.bad++; c.bad <= 5 {
		c.t.Errorf("event %d (%s, key %v): %s", c.n, cdctest.Identity(ev), ev.Key, problem)
	}
}

// done reports how many events were wrong in all.
func (c *bigTxnCheck) done() {
	if c.bad > 5 {
		c.t.Errorf("%d events in all are wrong", c.bad)
	}
}

// coordsAfter reports whether v's binlog coordinates come after prev's.
func coordsAfter(v, prev cdctest.Value) bool {
	a, b := v.Source, prev.Source
	switch {
	case a.File != b.File:
		return a.File > b.File
	case a.Pos != b.Pos:
		return a.Pos > b.Pos
	}
	return a.Row > b.Row
}

// numberOf is a JSON number of a decoded event as an int64.
func numberOf(v any) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("key %v is not a number", v)
	}
	return n.Int64()
}

// padTo is MariaDB's RPAD(s, n, pad) for ASCII.
func padTo(s string, n int, pad byte) string {
	if len(s) >= n {
		return s[:n]
	}
	return s + strings.Repeat(string(pad), n-len(s))
}
