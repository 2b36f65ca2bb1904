package stream

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// The events-equal-changes test, shared by the sinks: runEventsEqualChanges
// streams a workload through a task with the sink under test, and
// checkEventsEqualChanges applies what the sink holds to empty copies.

// eventsRun is what runEventsEqualChanges saw of its task.
type eventsRun struct {
	// start is the checkpoint saved before streaming, stop the last one
	// saved (at stop).
	start, stop Checkpoint
	// status is the task's status after it stopped.
	status TaskStatus
}

// eventsTables are the tables of the workload.
var eventsTables = []string{"types", "orders", "pairs"}

// runEventsEqualChanges runs a task of the app schema with sink, streams
// inserts, updates and deletes of every column type, a transaction bigger
// than a batch, changes of a table the block-allow list leaves out and a
// DDL, and stops the task once it acknowledged everything.
func runEventsEqualChanges(t *testing.T, e *taskEnv, sink Sink) eventsRun {
	t.Helper()
	encExec(t, e.root, "CREATE DATABASE app", "CREATE DATABASE other", encodeTypesDDL,
		"CREATE TABLE app.orders (id INT PRIMARY KEY, qty INT NOT NULL, note VARCHAR(50))",
		"CREATE TABLE app.pairs (a INT NOT NULL, b VARCHAR(10) NOT NULL, v INT, UNIQUE KEY ab (a, b))",
		"CREATE TABLE other.skip (id INT PRIMARY KEY)")
	var sv saves
	r := startTask(t, TaskConfig{Stream: taskStream("cdc", false), Source: e.source(), DB: e.db, Sink: sink, Save: sv.save})
	testutil.Eventually(t, taskTimeout, "task streaming", func() error {
		if st := r.task.Status(); st.State != StateStreaming {
			return fmt.Errorf("state %s, err %v", st.State, st.Err)
		}
		return nil
	})
	start := sv.last()
	if start.Location.IsZero() || !start.SnapshotDone {
		t.Fatalf("no start checkpoint saved before streaming: %+v", start)
	}

	encExec(t, e.root, "SET SESSION sql_mode = ''")
	for _, row := range encodeTypesRows {
		encExec(t, e.root, "INSERT INTO app.types VALUES "+row)
	}
	encExec(t, e.root,
		"UPDATE app.types SET vc = CONCAT(IFNULL(vc, ''), '+'), de = 1.5, j = '{\"k\": 1}' WHERE id IN (1, 3)",
		"UPDATE app.types SET id = 10 WHERE id = 4",
		"DELETE FROM app.types WHERE id = 5",
		"INSERT INTO other.skip VALUES (1), (2)",
		"INSERT INTO app.pairs VALUES (1, 'x', 1), (1, 'y', 2), (2, 'x', 3)",
		"UPDATE app.pairs SET v = v * 10 WHERE a = 1",
		"DELETE FROM app.pairs WHERE a = 2")
	// One transaction of 2500 rows: several batches, one checkpoint.
	var vals []string
	for i := 1; i <= 2500; i++ {
		vals = append(vals, fmt.Sprintf("(%d, %d, 'n%d')", i, i%7, i))
	}
	encExec(t, e.root, "BEGIN", "INSERT INTO app.orders VALUES "+strings.Join(vals, ", "),
		"UPDATE app.orders SET qty = qty + 1 WHERE id % 3 = 0", "DELETE FROM app.orders WHERE id % 10 = 0", "COMMIT")
	// The schema of a table comes from the source when its rows are read:
	// the DDL waits until the rows before it are delivered.
	r.waitCaughtUp(t, e)
	// The DDL comes from a session with sql_mode ANSI_QUOTES: the stream
	// parses it in that mode, which its query event carries.
	c, err := e.root.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SET SESSION sql_mode = 'ANSI_QUOTES'", `ALTER TABLE "app"."orders" ADD COLUMN "extra" BIGINT`,
		"SET SESSION sql_mode = DEFAULT"} {
		if _, err := c.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	_ = c.Close()
	encExec(t, e.root, "CREATE TABLE other.skip2 (id INT)",
		"INSERT INTO app.orders VALUES (5001, 1, 'late', 77)", "UPDATE app.orders SET extra = id WHERE id < 20")
	r.waitCaughtUp(t, e)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	return eventsRun{start: start, stop: sv.last(), status: r.task.Status()}
}

// applyEvents applies records in order to empty copies of the workload's
// tables and compares each copy's checksum with the source table's.
func (e *taskEnv) applyEvents(t *testing.T, records []record) {
	t.Helper()
	e.applyRecords(t, eventsTables, records)
	e.sameTables(t, eventsTables...)
}

// checkEventsEqualChanges checks what a sink holds after
// runEventsEqualChanges: records (each key's events in order) applied to
// empty copies reproduce the tables; only app's tables, one DDL event (the
// ALTER), inserts, updates and deletes; a checkpoint past the start with a
// GTID set; the status counts every record once.
func checkEventsEqualChanges(t *testing.T, e *taskEnv, run eventsRun, records []record) {
	t.Helper()
	e.applyEvents(t, records)
	var ddls []string
	ops := map[string]int{}
	for _, rec := range records {
		v := decodeValue(t, rec)
		if v.Source.DB != "app" {
			t.Errorf("event of %s.%s, which the stream does not select: %s", v.Source.DB, v.Source.Table, rec.Value)
		}
		if v.DDL != "" {
			ddls = append(ddls, v.Source.Table+": "+v.DDL)
		}
		ops[v.Op]++
	}
	if len(ddls) != 1 || ddls[0] != `orders: ALTER TABLE "app"."orders" ADD COLUMN "extra" BIGINT` {
		t.Errorf("DDL events %q, want the ALTER of app.orders only", ddls)
	}
	if ops["c"] == 0 || ops["u"] == 0 || ops["d"] == 0 {
		t.Errorf("events by op %v: want inserts, updates and deletes", ops)
	}
	if cp := run.stop; cp.Location.Compare(run.start.Location) <= 0 || cp.Location.GTID == "" {
		t.Errorf("checkpoint saved at stop %+v: want past the start %s, with a GTID set", cp.Location, run.start.Location)
	}
	if st := run.status; st.State != StateStopped || st.Events != int64(len(records)) {
		t.Errorf("status after stop: %+v; want stopped with %d events", st, len(records))
	}
}
