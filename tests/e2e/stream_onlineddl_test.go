package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/onlineddl"
	"github.com/dmworker/dm-worker/tests/cdctest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// streamOscTableDDL is crash.osc before the online schema change.
const streamOscTableDDL = "CREATE TABLE %s.osc (id INT NOT NULL PRIMARY KEY, k INT NOT NULL, v VARCHAR(40), KEY (k))"

// TestStreamOnlineDDLGhostKill9 runs gh-ost's statement sequence on the
// source under a stream with online-ddl whose block-allow list names only
// the real table, and kills the worker with SIGKILL once the etcd mirror
// of the checkpoint (written after the meta store) passed the shadow's
// ALTER; the copy, the cut-over and the drops happen while the worker is
// down. The restarted worker delivers the ALTER as one DDL event of
// crash.osc at the cut-over; no event names a shadow or trash table; the
// events, deduplicated on identity and replayed (DDL included) into an
// empty copy, give the source's table.
func TestStreamOnlineDDLGhostKill9(t *testing.T) {
	const rows = 2000
	e := newStreamEnv(t, streamEnvOptions{beforeWorker: func(e *streamEnv) {
		e.src.Exec(t, fmt.Sprintf(streamOscTableDDL, crashDB))
		e.src.Exec(t, fmt.Sprintf("INSERT INTO crash.osc SELECT seq, seq %% 17, CONCAT('v', seq) FROM crash.seq_1_to_%d", rows))
	}})
	dir := t.TempDir()
	const name = "osc"
	e.c.ok("stream", "create", writeFile(t, name+".yaml", fmt.Sprintf(`name: %s
source-id: %s
block-allow-list: {do-tables: [{db-name: %s, tbl-name: osc}]}
snapshot: true
online-ddl: true
format: debezium
sink: {type: file, file: {dir: %q, rotate-size: 1MiB}}
`, name, replSource, crashDB, dir)))
	e.waitStream(name, time.Minute, "streaming", streamDoc.streaming)

	next := rows + 1
	// change writes to crash.osc and, while gh-ost runs, applies the same
	// change to the shadow as gh-ost applies the binlog's.
	change := func(i int, shadow bool, c2 bool) {
		var qs []string
		id := 1 + (i*7919)%(next-1)
		switch i % 4 {
		case 0, 1:
			id = next
			next++
			if c2 {
				qs = append(qs, fmt.Sprintf("INSERT INTO crash.osc (id, k, v, c2) VALUES (%d, %d, 'n%d', %d)", id, id%17, i, i%5))
			} else {
				qs = append(qs, fmt.Sprintf("INSERT INTO crash.osc (id, k, v) VALUES (%d, %d, 'n%d')", id, id%17, i))
			}
		case 2:
			qs = append(qs, fmt.Sprintf("UPDATE crash.osc SET v = 'u%d', k = k + 1 WHERE id = %d", i, id))
		case 3:
			qs = append(qs, fmt.Sprintf("DELETE FROM crash.osc WHERE id = %d", id))
		}
		if shadow && i%4 == 3 {
			qs = append(qs, fmt.Sprintf("DELETE FROM crash._osc_gho WHERE id = %d", id))
		} else if shadow {
			qs = append(qs, fmt.Sprintf("REPLACE INTO crash._osc_gho (id, k, v) SELECT id, k, v FROM crash.osc WHERE id = %d", id))
		}
		execSession(t, e.srcDB, qs...)
	}
	i := 0
	for ; i < 50; i++ {
		change(i, false, false)
	}
	execSession(t, e.srcDB,
		"CREATE /* gh-ost */ TABLE crash._osc_ghc (id BIGINT AUTO_INCREMENT, last_update TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP "+
			"ON UPDATE CURRENT_TIMESTAMP, hint VARCHAR(64) CHARSET ascii NOT NULL, value VARCHAR(4096) CHARSET ascii NOT NULL, "+
			"PRIMARY KEY (id), UNIQUE KEY hint_uidx (hint)) AUTO_INCREMENT = 256",
		"INSERT /* gh-ost */ INTO crash._osc_ghc (id, hint, value) VALUES (NULLIF(2, 0), 'state', 'GhostTableMigrated') "+
			"ON DUPLICATE KEY UPDATE last_update = NOW(), value = VALUES(value)",
		"CREATE /* gh-ost */ TABLE crash._osc_gho LIKE crash.osc",
		"ALTER /* gh-ost */ TABLE crash._osc_gho ADD COLUMN c2 INT NOT NULL DEFAULT 7")
	file, pos, _ := e.src.MasterStatus(t)
	afterAlter := fmt.Sprintf("%s:%d", file, pos)
	const chunk = 200
	top := next - 1
	copyChunk := func(lo int) {
		execSession(t, e.srcDB, fmt.Sprintf("INSERT /* gh-ost */ IGNORE INTO crash._osc_gho (id, k, v) (SELECT id, k, v FROM crash.osc "+
			"FORCE INDEX (PRIMARY) WHERE id >= %d AND id < %d LOCK IN SHARE MODE)", lo, lo+chunk))
		for range 5 {
			change(i, true, false)
			i++
		}
	}
	lo := 0
	for ; lo <= top/2; lo += chunk {
		copyChunk(lo)
	}

	// Killed once the checkpoint saved (meta store, then mirror) passed
	// the shadow's ALTER.
	store := ha.NewStore(e.c.direct, e.c.prefix)
	var saved ha.StreamCheckpoint
	testutil.Eventually(t, time.Minute, "the checkpoint mirror passes the shadow's ALTER at "+afterAlter, func() error {
		cp, _, err := store.GetStreamCheckpoint(t.Context(), replSource, name)
		if err != nil {
			return err
		}
		saved = cp
		if at := fmt.Sprintf("%s:%d", cp.BinlogName, cp.BinlogPos); !cp.SnapshotDone || compareLocation(t, at, afterAlter) < 0 {
			return fmt.Errorf("mirror at %s, snapshot done %v", at, cp.SnapshotDone)
		}
		return nil
	})
	e.killWorker()
	raw, _ := json.Marshal(saved)
	t.Logf("killed with the checkpoint mirror at %s (the shadow's ALTER ends at %s)", raw, afterAlter)

	for ; lo <= top; lo += chunk {
		copyChunk(lo)
	}
	execSession(t, e.srcDB,
		"CREATE /* gh-ost */ TABLE crash._osc_del (id INT AUTO_INCREMENT PRIMARY KEY) ENGINE=InnoDB COMMENT='ghost-cut-over-sentry'",
		"DROP /* gh-ost */ TABLE IF EXISTS crash._osc_del",
		"RENAME /* gh-ost */ TABLE crash.osc TO crash._osc_del, crash._osc_gho TO crash.osc",
		"DROP /* gh-ost */ TABLE IF EXISTS crash._osc_del",
		"DROP /* gh-ost */ TABLE IF EXISTS crash._osc_ghc")
	for range 40 {
		change(i, false, true)
		i++
	}

	e.restartWorker()
	e.waitCaughtUp(2*time.Minute, name)

	dd := cdctest.NewDeduper()
	var events []cdctest.Event
	for _, ev := range e.readFile(dir, name) {
		first, err := dd.Add(ev)
		if err != nil {
			t.Error(err)
		}
		if first {
			events = append(events, ev)
		}
	}
	t.Logf("%d events in the sink, %d unique, %d replayed after the kill", len(events)+dd.Replayed, dd.Unique(), dd.Replayed)

	rules, err := onlineddl.NewRules(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ddlAt := -1
	for n, ev := range events {
		v := ev.Value
		if v.Source.DB != crashDB || v.Source.Table != "osc" || rules.Online(v.Source.Table) {
			t.Errorf("event %d of %s.%s, want only crash.osc: %+v", n, v.Source.DB, v.Source.Table, v)
		}
		if v.Op == "ddl" {
			if ddlAt >= 0 {
				t.Errorf("a second DDL event (%d, first %d): %s", n, ddlAt, v.DDL)
			}
			ddlAt = n
			if want := "ALTER TABLE `crash`.`osc` ADD COLUMN `c2` INT NOT NULL DEFAULT 7"; v.DDL != want {
				t.Errorf("DDL event %q, want %q", v.DDL, want)
			}
			continue
		}
		img := v.After
		if img == nil {
			img = v.Before
		}
		if _, has := img["c2"]; has != (ddlAt >= 0) {
			t.Errorf("row event %d (op %s, DDL event at %d) has c2: %v", n, v.Op, ddlAt, has)
		}
	}
	if ddlAt < 0 || ddlAt == len(events)-1 {
		t.Fatalf("the DDL event of crash.osc is at %d of %d events; want one, with rows after it", ddlAt, len(events))
	}
	replayOSCEvents(t, e, events)
}

// replayOSCEvents applies events in order to an empty copy of crash.osc
// (as it was before the schema change) in copy_osc on the copy instance,
// the DDL events included, and requires the copy to be the source's
// table: the same SHOW CREATE TABLE and CHECKSUM TABLE.
func replayOSCEvents(t *testing.T, e *streamEnv, events []cdctest.Event) {
	t.Helper()
	execSession(t, e.copyDB, "DROP DATABASE IF EXISTS copy_osc", "CREATE DATABASE copy_osc", fmt.Sprintf(streamOscTableDDL, "copy_osc"))
	arg := func(v any) any {
		if n, ok := v.(json.Number); ok {
			return n.String()
		}
		return v
	}
	for n, ev := range events {
		v := ev.Value
		var q string
		var args []any
		switch v.Op {
		case "ddl":
			q = strings.ReplaceAll(v.DDL, "`crash`.", "`copy_osc`.")
		case "d":
			q, args = "DELETE FROM copy_osc.osc WHERE id = ?", []any{arg(v.Before["id"])}
		default:
			var cols, marks []string
			for c, x := range v.After {
				cols, marks, args = append(cols, "`"+c+"`"), append(marks, "?"), append(args, arg(x))
			}
			q = "REPLACE INTO copy_osc.osc (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(marks, ", ") + ")"
		}
		if _, err := e.copyDB.ExecContext(t.Context(), q, args...); err != nil {
			t.Fatalf("replay event %d (%+v): %s: %v", n, v, q, err)
		}
	}
	var n1, src, n2, cp string
	if err := e.srcDB.QueryRow("SHOW CREATE TABLE crash.osc").Scan(&n1, &src); err != nil {
		t.Fatal(err)
	}
	if err := e.copyDB.QueryRow("SHOW CREATE TABLE copy_osc.osc").Scan(&n2, &cp); err != nil {
		t.Fatal(err)
	}
	if src != cp {
		t.Errorf("the replayed copy's table differs:\nsource: %s\ncopy:   %s", src, cp)
	}
	var s1, s2 int64
	var c1, c2 int
	if err := e.srcDB.QueryRow("CHECKSUM TABLE crash.osc").Scan(&n1, &s1); err != nil {
		t.Fatal(err)
	}
	if err := e.copyDB.QueryRow("CHECKSUM TABLE copy_osc.osc").Scan(&n2, &s2); err != nil {
		t.Fatal(err)
	}
	_ = e.srcDB.QueryRow("SELECT COUNT(*) FROM crash.osc").Scan(&c1)
	_ = e.copyDB.QueryRow("SELECT COUNT(*) FROM copy_osc.osc").Scan(&c2)
	if s1 != s2 || c1 != c2 {
		t.Errorf("crash.osc: checksum %d (%d rows) on the source, %d (%d rows) replayed from the events", s1, c1, s2, c2)
	}
	t.Logf("replayed %d events into %d rows", len(events), c2)
}
