package e2e

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// storedProgramDDL is what a DBA (or pt-online-schema-change) runs on a
// source during replication: triggers, including one that writes another
// replicated table, a procedure that writes rows, a function, an event,
// a view, and their ALTERs and DROPs. None of it may stop a task or a
// stream; the writes the programs make reach the target exactly once, as
// the row events the binlog has of them.
var storedProgramDDL = []string{
	"CREATE TABLE crash.audit (id BIGINT AUTO_INCREMENT PRIMARY KEY, account BIGINT NOT NULL, what VARCHAR(16) NOT NULL)",
	"CREATE DEFINER=`root`@`localhost` TRIGGER crash.accounts_ai AFTER INSERT ON crash.accounts FOR EACH ROW " +
		"INSERT INTO crash.audit (account, what) VALUES (NEW.id, 'insert')",
	"CREATE TRIGGER crash.accounts_bu BEFORE UPDATE ON crash.accounts FOR EACH ROW SET NEW.flags = NEW.flags",
	// The procedure writes only crash.audit: the workload's writers own
	// the other tables' rows (no lock waits between them and the test).
	"CREATE OR REPLACE DEFINER=CURRENT_USER PROCEDURE crash.bump(IN n INT)\nBEGIN\n" +
		"  INSERT INTO crash.audit (account, what) VALUES (-n, 'procedure');\n" +
		"  UPDATE crash.audit SET what = 'bumped' WHERE account = -n;\nEND",
	"CALL crash.bump(1)",
	"CREATE FUNCTION crash.twice(x INT) RETURNS INT DETERMINISTIC RETURN x * 2",
	"INSERT INTO crash.audit (account, what) VALUES (crash.twice(21), 'function')",
	"CREATE EVENT crash.nightly ON SCHEDULE EVERY 1 DAY STARTS CURRENT_TIMESTAMP + INTERVAL 1 DAY DISABLE DO DELETE FROM crash.audit",
	"ALTER EVENT crash.nightly COMMENT 'never runs: the event scheduler is off'",
	"ALTER PROCEDURE crash.bump COMMENT 'bumps balances'",
	"CREATE ALGORITHM=MERGE VIEW crash.rich AS SELECT id, balance FROM crash.accounts WHERE balance > 100",
	"ALTER VIEW crash.rich AS SELECT id FROM crash.accounts",
	"CALL crash.bump(2)",
	"DROP VIEW crash.rich",
	"DROP TRIGGER crash.accounts_bu",
	"DROP PROCEDURE crash.bump",
	"DROP FUNCTION IF EXISTS crash.twice",
	"DROP EVENT crash.nightly",
}

// skippedAtLeast is how many statements the sync unit and the stream must
// report as skipped: every CREATE, ALTER and DROP of storedProgramDDL (a
// trigger, procedure, function, event or view) and the SAVEPOINT.
const skippedAtLeast = 15

// TestStoredProgramsKeepReplicating: issue 23's second defect. Trigger,
// procedure, function, event and view DDL on the source, with relay off and
// on, while a workload writes: the task keeps running without an error,
// every table (the one the trigger writes included) ends equal to the
// source, the target has none of the programs (a trigger there would write
// its rows twice), and a stream on the same source keeps streaming, with
// the trigger's rows in it once and no DDL event for any program.
func TestStoredProgramsKeepReplicating(t *testing.T) {
	for _, relay := range []bool{false, true} {
		t.Run(fmt.Sprintf("relay=%t", relay), func(t *testing.T) {
			r := startReplication(t, replOptions{relay: relay})
			e := &streamEnv{replication: r, relay: relay}
			dir := t.TempDir()
			e.createStream("programs", fileSink(dir), false)
			e.waitStream("programs", time.Minute, "streaming", streamDoc.streaming)

			// The programs are created (and most dropped) before the
			// workload writes: a CREATE TRIGGER waiting for a writer's
			// metadata lock blocks the other writer's next statement, whose
			// row lock the first one waits for (a server-side cycle only
			// lock wait timeouts end), which on a busy core stalled every
			// writer for a minute. Replication runs throughout, and the
			// workload's inserts fire the trigger that remains.
			for _, q := range storedProgramDDL {
				r.src.Exec(t, q)
			}
			savepoint(t, r.srcDB)
			wl := startWorkload(t, r.srcDB, 2)
			wl.waitCommits(t, time.Minute, 200)
			if err := wl.stop(); err != nil {
				t.Fatalf("workload: %v", err)
			}
			r.src.Exec(t, "INSERT INTO crash.audit (account, what) VALUES (-4, 'marker')")

			r.waitCaughtUp(2 * time.Minute)
			testutil.Eventually(t, time.Minute, "crash.audit equal on the target", func() error {
				want, err := checksumTables(r.srcDB, []string{"crash.audit"}, 10*time.Second)
				if err != nil {
					return err
				}
				got, err := checksumTables(r.tgtDB, []string{"crash.audit"}, 10*time.Second)
				if err != nil {
					return err
				}
				if want["crash.audit"] != got["crash.audit"] {
					return fmt.Errorf("CHECKSUM TABLE crash.audit: source %v, target %v", want, got)
				}
				return nil
			})
			var audit, updated int
			if err := r.srcDB.QueryRow("SELECT COUNT(*) FROM crash.audit WHERE what = 'bumped'").Scan(&updated); err != nil {
				t.Fatal(err)
			}
			if err := r.srcDB.QueryRow("SELECT COUNT(*) FROM crash.audit").Scan(&audit); err != nil || audit < 5 {
				t.Fatalf("source crash.audit: %d rows, %v; want the trigger's, procedure's and function's rows", audit, err)
			}
			for _, q := range []string{
				"SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'crash'",
				"SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = 'crash'",
				"SELECT COUNT(*) FROM information_schema.EVENTS WHERE EVENT_SCHEMA = 'crash'",
				"SELECT COUNT(*) FROM information_schema.VIEWS WHERE TABLE_SCHEMA = 'crash'",
			} {
				var n int
				if err := r.tgtDB.QueryRow(q).Scan(&n); err != nil || n != 0 {
					t.Errorf("target: %s = %d, %v; want 0", q, n, err)
				}
			}

			file, pos, _ := r.src.MasterStatus(t)
			end := fmt.Sprintf("%s:%d", file, pos)
			st := waitSubtask(t, r.w, replTask, 30*time.Second, "the subtask runs, counts the skipped statements and checkpoints "+end,
				func(d skippedDoc) bool {
					return d.Stage == "Running" && len(d.Errors) == 0 && d.Progress.SkippedDDLs >= skippedAtLeast &&
						d.Progress.Checkpoint == end
				})
			t.Logf("subtask: %v", st)

			e.waitCaughtUp(time.Minute, "programs")
			sd := e.waitStream("programs", 30*time.Second, "the stream counts the skipped statements", func(d streamDoc) bool {
				return d.streaming() && d.SkippedDDLs >= skippedAtLeast
			})
			t.Logf("stream: %v", sd)
			auditEvents := 0
			for _, ev := range e.readFile(dir, "programs") {
				if ev.Value.DDL != "" && ev.Value.Source.Table != "audit" {
					t.Errorf("the stream delivered a DDL event for a statement that is not replicated: %q", ev.Value.DDL)
				}
				if ev.Value.Source.Table == "audit" && ev.Value.Op == "c" {
					auditEvents++
				}
			}
			if auditEvents != audit || updated != 2 {
				t.Errorf("the stream has %d inserts of crash.audit, the source %d rows (%d bumped, want 2): "+
					"the programs' writes must be in it once", auditEvents, audit, updated)
			}
		})
	}
}

// savepoint commits a transaction with a SAVEPOINT in it: the binlog has
// the SAVEPOINT as a query event inside the transaction, which must not
// count as the transaction's end.
func savepoint(t *testing.T, db *sql.DB) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"INSERT INTO crash.audit (account, what) VALUES (-10, 'savepoint')",
		"SAVEPOINT sp1",
		"INSERT INTO crash.audit (account, what) VALUES (-11, 'savepoint')",
	} {
		if _, err := tx.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, errors.Join(err, tx.Rollback()))
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// skippedDoc is the part of a subtask object TestStoredProgramsKeepReplicating
// reads.
type skippedDoc struct {
	Stage  string `json:"stage"`
	Errors []struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"errors"`
	Progress struct {
		Checkpoint  string `json:"checkpoint"`
		SkippedDDLs uint64 `json:"skipped-ddls"`
	} `json:"progress"`
}

func (d skippedDoc) String() string {
	return fmt.Sprintf("stage %s, errors %v, checkpoint %s, skipped-ddls %d", d.Stage, d.Errors, d.Progress.Checkpoint, d.Progress.SkippedDDLs)
}
