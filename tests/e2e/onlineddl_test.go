package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/ha/shardddl"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// The acceptance tests of online schema changes (issue 26): gh-ost and
// pt-online-schema-change change a table on the source through a shadow
// table while writers keep changing it; a task with `online-ddl: true`
// replicates the writers' changes and, at the cut-over, the tool's ALTER,
// and nothing of the tool's mechanics (shadow and trash tables, their
// rows, the copy, the triggers).

// oscRows is the size of the pt-osc table (the 100k rows).
const oscRows = 100_000

// TestOnlineDDLPtOsc runs the real pt-online-schema-change on a table of
// oscRows rows while two writers change it, with the relay off and on:
// the target's t ends equal to the source's (rows, columns, indexes), the
// target has no `_t_new`/`_t_old` and no triggers, ran the ALTER on t
// once, never ran a statement naming the tool's tables nor an INSERT …
// SELECT, and changed no more rows of t than the writers did.
func TestOnlineDDLPtOsc(t *testing.T) {
	for _, relay := range []bool{false, true} {
		t.Run(fmt.Sprintf("relay=%t", relay), func(t *testing.T) {
			e := startOSC(t, oscOptions{relay: relay, rows: oscRows})
			w := startOSCWriters(t, e.srcDB, 2, oscRows*21/20)
			w.waitMore(t, 30*time.Second, 100)
			before := w.commits.Load()
			out := runPtOSC(t, e.src.Port(), oscDB, "t", oscAlter, 500)
			w.c2.Store(true)
			during := w.commits.Load() - before
			t.Logf("the writers committed %d transactions while pt-online-schema-change ran", during)
			if !strings.Contains(out, "Successfully altered") || !strings.Contains(out, "_t_new") || !strings.Contains(out, "Swapped original and new tables OK") {
				t.Fatalf("pt-online-schema-change did not report a copy through _t_new and a swap:\n%s", out)
			}
			if during < 20 {
				t.Errorf("the writers committed only %d transactions while the tool copied: the triggers were hardly exercised", during)
			}
			w.waitMore(t, 30*time.Second, 100)
			if err := w.stop(); err != nil {
				t.Fatalf("writers: %v", err)
			}
			e.waitEqual(90 * time.Second)
			e.checkClean(w)
			shadow, stmts, cutAt, ok := e.onlineRecord()
			t.Logf("online-DDL record of %s.t: %t shadow %s stmts %s cut at %q", oscDB, ok, shadow, stmts, cutAt)
		})
	}
}

// ghostRows is the size of the gh-ost table.
const ghostRows = 20_000

// TestOnlineDDLGhostSequence issues gh-ost's statements on the source
// (gh-ost is not packaged): its changelog table `_t_ghc`, `_t_gho` LIKE t,
// the ALTER of `_t_gho`, the row copy in chunks by INSERT IGNORE … SELECT
// while the writers' changes of t are applied to `_t_gho` too, its atomic
// cut-over (sentry `_t_del` under LOCK TABLES, RENAME TABLE t TO _t_del,
// _t_gho TO t) and the drops; with the same end checks as pt-osc's. In
// the kill variant the worker is killed with SIGKILL once it recorded the
// ALTER of `_t_gho`, and restarted halfway through the copy: the ALTER
// still runs on t at the cut-over.
func TestOnlineDDLGhostSequence(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%t", kill), func(t *testing.T) {
			e := startOSC(t, oscOptions{rows: ghostRows})
			w := startOSCWriters(t, e.srcDB, 2, ghostRows*21/20)
			w.waitMore(t, 30*time.Second, 100)
			g := &ghost{e: e, w: w}
			g.prepare()
			if kill {
				// Once the checkpoint is past the ALTER, the restarted
				// worker never reads it again: only its record carries it.
				file, pos, _ := e.src.MasterStatus(t)
				afterAlter := fmt.Sprintf("%s:%d", file, pos)
				st := e.waitSubtask(30*time.Second, "the checkpoint passes the ALTER of _t_gho", func(d subtaskDoc) bool {
					return d.syncing() && !locationBefore(d.Progress.Checkpoint, afterAlter)
				})
				shadow, stmts, _, ok := e.onlineRecord()
				if !ok || shadow != "_t_gho" || !strings.Contains(stmts, "c2") {
					t.Fatalf("checkpoint %s past the ALTER (%s), but the record of %s.t is %t %q %s",
						st.Progress.Checkpoint, afterAlter, oscDB, ok, shadow, stmts)
				}
				e.w.signal(t, syscall.SIGKILL)
				if code, err := e.w.wait(10 * time.Second); err != nil || code != -1 {
					t.Fatalf("kill -9 of the worker: exit code %d, %v", code, err)
				}
				t.Logf("killed the worker with SIGKILL at checkpoint %s, past the ALTER of _t_gho (%s), recorded as %s", st.Progress.Checkpoint, afterAlter, stmts)
			}
			g.copyRows(func(done, total int) {
				if kill && done == total/2 {
					e.w = startWorker(t, e.wopts)
					t.Logf("restarted the worker after %d of %d chunks", done, total)
				}
			})
			g.cutOver()
			w.waitMore(t, 30*time.Second, 100)
			if err := w.stop(); err != nil {
				t.Fatalf("writers: %v", err)
			}
			e.waitEqual(90 * time.Second)
			e.checkClean(w)
		})
	}
}

// ghost issues gh-ost's statements on oscDB.t.
type ghost struct {
	e *oscEnv
	w *oscWriters
}

func (g *ghost) exec(q string, args ...any) {
	g.e.t.Helper()
	for attempt := 1; ; attempt++ {
		_, err := g.e.srcDB.Exec(q, args...)
		if err == nil {
			return
		}
		if !oscRetryable(err) || attempt == 50 {
			g.e.t.Fatalf("gh-ost statement %s: %v", q, err)
		}
	}
}

// changelog writes a row of gh-ost's changelog table.
func (g *ghost) changelog(hint, value string) {
	g.e.t.Helper()
	g.exec("INSERT /* gh-ost */ INTO "+oscDB+"._t_ghc (id, hint, value) VALUES (NULLIF(?, 0), ?, ?) "+
		"ON DUPLICATE KEY UPDATE last_update = NOW(), value = VALUES(value)", map[string]int{"heartbeat": 1, "state": 2}[hint], hint, value)
}

// prepare creates the changelog and shadow tables, alters the shadow
// table and makes the writers apply their changes to it.
func (g *ghost) prepare() {
	g.e.t.Helper()
	g.exec("DROP /* gh-ost */ TABLE IF EXISTS " + oscDB + "._t_ghc")
	g.exec("CREATE /* gh-ost */ TABLE " + oscDB + `._t_ghc (
  id BIGINT UNSIGNED AUTO_INCREMENT,
  last_update TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  hint VARCHAR(64) CHARSET ascii NOT NULL,
  value VARCHAR(4096) CHARSET ascii NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY hint_uidx (hint)) AUTO_INCREMENT = 256`)
	g.changelog("state", "GhostTableMigrated")
	g.exec("CREATE /* gh-ost */ TABLE " + oscDB + "._t_gho LIKE " + oscDB + ".t")
	g.exec("ALTER /* gh-ost */ TABLE " + oscDB + "._t_gho " + oscAlter)
	// From here on every change of t reaches _t_gho: no transaction that
	// started without it is in flight.
	g.w.gate.Lock()
	shadow := "_t_gho"
	g.w.mirror.Store(&shadow)
	g.w.gate.Unlock()
	g.changelog("state", "ReadMigrationRangeValues")
}

// copyRows copies t's rows into the shadow table in chunks of 500 ids up
// to the largest id at the start, as gh-ost's row copy, calling after(i,
// n) after the i-th of n chunks; every fourth chunk waits for the writers
// to commit more, so that their changes interleave with the copy.
func (g *ghost) copyRows(after func(done, total int)) {
	g.e.t.Helper()
	var maxID int64
	if err := g.e.srcDB.QueryRow("SELECT MAX(id) FROM "+oscDB+".t WHERE id < ?", oscProbeID).Scan(&maxID); err != nil {
		g.e.t.Fatal(err)
	}
	const chunk = 500
	total := int((maxID + chunk - 1) / chunk)
	start := time.Now()
	for i := range total {
		lo := int64(i)*chunk + 1
		g.exec("INSERT /* gh-ost `"+oscDB+"`.`t` */ IGNORE INTO "+oscDB+"._t_gho (id, k, v, n) "+
			"(SELECT id, k, v, n FROM "+oscDB+".t FORCE INDEX (PRIMARY) WHERE id BETWEEN ? AND ? LOCK IN SHARE MODE)", lo, lo+chunk-1)
		if i%4 == 0 {
			g.changelog("heartbeat", time.Now().Format(time.RFC3339Nano))
			g.w.waitMore(g.e.t, 30*time.Second, 10)
		}
		after(i+1, total)
	}
	// The probe row is beyond the range: gh-ost's range is read at the
	// start of the copy, and the probe row existed then.
	g.exec("INSERT /* gh-ost */ IGNORE INTO "+oscDB+"._t_gho (id, k, v, n) (SELECT id, k, v, n FROM "+oscDB+".t WHERE id = ? LOCK IN SHARE MODE)", oscProbeID)
	g.e.t.Logf("gh-ost copy: %d chunks up to id %d in %s; writers %s", total, maxID, time.Since(start).Round(time.Millisecond), g.w)
}

// cutOver is gh-ost's atomic cut-over: with the writers held (gh-ost has
// applied every event up to the lock), it creates the sentry table
// `_t_del`, locks t and the sentry, issues the RENAME on another
// connection, where it waits for the lock; it drops the sentry and
// unlocks, and the RENAME swaps the tables. The writers then go on with
// the new t (writing c2), and gh-ost drops the old table and its
// changelog.
func (g *ghost) cutOver() {
	t := g.e.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g.w.gate.Lock()
	locked := true
	defer func() {
		if locked {
			g.w.gate.Unlock()
		}
	}()
	g.changelog("state", "AllEventsUpToLockProcessed")
	lockConn, err := g.e.srcDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lockConn.Close()
	renameConn, err := g.e.srcDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer renameConn.Close()
	var renameID int64
	if err := renameConn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&renameID); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE /* gh-ost */ TABLE " + oscDB + "._t_del (id INT AUTO_INCREMENT PRIMARY KEY) ENGINE=InnoDB COMMENT='ghost-cut-over-sentry'",
		"LOCK /* gh-ost */ TABLES " + oscDB + ".t WRITE, " + oscDB + "._t_del WRITE",
	} {
		if _, err := lockConn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	renamed := make(chan error, 1)
	go func() {
		_, err := renameConn.ExecContext(ctx, "RENAME /* gh-ost */ TABLE "+oscDB+".t TO "+oscDB+"._t_del, "+oscDB+"._t_gho TO "+oscDB+".t")
		renamed <- err
	}()
	testutil.Eventually(t, 30*time.Second, "the RENAME waits for the lock", func() error {
		var state sql.NullString
		err := g.e.srcDB.QueryRow("SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = ?", renameID).Scan(&state)
		if err != nil {
			return err
		}
		if !strings.Contains(state.String, "metadata lock") {
			return fmt.Errorf("the RENAME's connection is in state %q", state.String)
		}
		return nil
	})
	for _, q := range []string{"DROP /* gh-ost */ TABLE IF EXISTS " + oscDB + "._t_del", "UNLOCK TABLES"} {
		if _, err := lockConn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := <-renamed; err != nil {
		t.Fatalf("gh-ost's RENAME: %v", err)
	}
	g.w.mirror.Store(nil)
	g.w.c2.Store(true)
	g.w.gate.Unlock()
	locked = false
	t.Logf("gh-ost cut-over done; writers %s", g.w)
	g.exec("DROP /* gh-ost */ TABLE IF EXISTS " + oscDB + "._t_del")
	g.exec("DROP /* gh-ost */ TABLE IF EXISTS " + oscDB + "._t_ghc")
}

// TestOnlineDDLShards runs pt-online-schema-change on each of the eight
// shards of shard_env_test.go, one after the other while writers change
// every shard, in pessimistic and in optimistic shard mode: the merged
// table gets c2 and index k exactly once, equals the union of the shards,
// and the target never saw a tool's table, a trigger or a copy.
func TestOnlineDDLShards(t *testing.T) {
	for _, optimistic := range []bool{false, true} {
		mode := map[bool]string{false: "pessimistic", true: "optimistic"}[optimistic]
		t.Run(mode, func(t *testing.T) {
			e := startShardEnv(t, shardOptions{optimistic: optimistic, onlineDDL: true})
			w := e.startShardWriters(e.shards)
			w.waitMore(t, 30*time.Second, 200)
			last := len(e.shards) - 1
			for i, s := range e.shards {
				runPtOSC(t, e.src[s.src].Port(), s.schema, s.table, oscAlter, 20)
				s.c2.Store(true)
				switch {
				case i == 0 && optimistic:
					e.waitTarget(30*time.Second, "c2 and index k after the first shard's pt-osc", func() error {
						if e.targetColumnType("t", "c2") == "" || !e.targetHasIndex("t", "k") {
							return fmt.Errorf("no c2 or no index k; locks %s", e.locksText())
						}
						return nil
					})
				case i < last && !optimistic:
					e.waitLock(e.lockID, 60*time.Second, fmt.Sprintf("%s reached the cut-over's ALTER", s), func(l shardddl.LockInfo) bool {
						return l.State == shardddl.LockWaiting && hasMember(l.Synced, s) && len(l.Synced) == i+1
					})
					if e.targetColumnType("t", "c2") != "" {
						t.Fatalf("the target has c2 while %d of 8 shards reached the ALTER (pessimistic)", i+1)
					}
				}
				// Different times: the writers go on between two shards.
				w.waitMore(t, 30*time.Second, 30)
			}
			e.waitNoLock(60 * time.Second)
			w.waitMore(t, 30*time.Second, 100)
			if err := w.stop(); err != nil {
				t.Fatalf("shard writers: %v", err)
			}
			e.waitMerged(90*time.Second, nil, shardColumns(true))
			e.checkOnlineMerged()
		})
	}
}

// checkOnlineMerged requires the merged table to have c2 INT NOT NULL
// DEFAULT 7 and index k, added by exactly one ALTER each (the same one or
// two), no other ALTER of it, no other table than the merged ones and no
// trigger in shardDB, and the target's general log (but the worker's meta
// schema) no statement naming a tool's table and no INSERT … SELECT.
func (e *shardEnv) checkOnlineMerged() {
	e.t.Helper()
	if typ := e.targetColumnType("t", "c2"); !strings.EqualFold(typ, "int(11)") {
		e.t.Errorf("the target's c2 is %q, want int(11)", typ)
	}
	if !e.targetHasIndex("t", "k") {
		e.t.Errorf("the target's %s.t has no index k", shardDB)
	}
	alters, lines := e.targetAlters("t")
	addC2 := regexp.MustCompile("(?i)" + wantAddC2)
	addK := regexp.MustCompile("(?i)ADD\\s+(INDEX|KEY)\\s*(`?k`?\\s*)?\\(`?k`?\\)")
	c2, k := 0, 0
	var other []string
	for _, a := range alters {
		m1, m2 := addC2.MatchString(a), addK.MatchString(a)
		if m1 {
			c2++
		}
		if m2 {
			k++
		}
		if !m1 && !m2 {
			other = append(other, a)
		}
	}
	if c2 != 1 || k != 1 || len(other) > 0 {
		e.t.Errorf("the target's ALTERs of %s.t: c2 added %d times, index k %d times (want once each), others %q:\n%s",
			shardDB, c2, k, other, strings.Join(lines, "\n"))
		e.logShardLines()
	}
	e.t.Logf("the target's ALTERs of %s.t: %q", shardDB, alters)
	tables, err := oscTables(e.tgtDB, shardDB)
	if err != nil {
		e.t.Fatal(err)
	}
	if strings.Join(tables, ",") != "t" {
		e.t.Errorf("the target's %s has tables %q, want only t", shardDB, tables)
	}
	if trig, err := oscTriggers(e.tgtDB, shardDB); err != nil || len(trig) > 0 {
		e.t.Errorf("the target's %s has triggers %q (%v)", shardDB, trig, err)
	}
	b, err := os.ReadFile(filepath.Join(e.tgt.Dir(), "data", "general.log"))
	if err != nil {
		e.t.Fatalf("the target's general log: %v", err)
	}
	tool := regexp.MustCompile("(?i)_t_[0-9]+_(new|old)\\b")
	query := regexp.MustCompile("\\s(Query|Execute)\\s+(.*)$")
	write := regexp.MustCompile("(?i)^(INSERT|REPLACE|UPDATE|DELETE)\\b.*\\b" + shardDB + "\\b")
	var bad []string
	writes := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		m := query.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, s := range oscNotMeta(m[2]) {
			switch {
			case tool.MatchString(s) || oscCopy.MatchString(s):
				bad = append(bad, oscClip(s))
			case write.MatchString(s):
				writes++
			}
		}
	}
	if writes == 0 {
		e.t.Errorf("the target's general log shows no write of %s: it does not log the worker", shardDB)
	}
	if len(bad) > 0 {
		e.t.Errorf("the target ran %d statements naming a pt-osc table or copying by INSERT … SELECT, e.g. %q", len(bad), bad[:min(len(bad), 5)])
	}
	e.t.Logf("the target's general log: %d writes of %s, none of the tool's", writes, shardDB)
}

// TestOnlineDDLErrors: online schema changes the worker cannot follow
// pause the subtask with the non-resumable sync-online-ddl, naming the
// tables and the fix, with nothing applied: (a) a rename of a shadow
// table to another table than its real one; (b) a cut-over whose shadow
// table was created and altered before the task's start position, which
// the documented fix (the ALTER on the target by hand, then handle-error
// skip) recovers.
func TestOnlineDDLErrors(t *testing.T) {
	t.Run("rename-shadow-away", func(t *testing.T) {
		e := startOSC(t, oscOptions{rows: 1000})
		defTarget, err := oscShowCreate(e.tgtDB, oscDB, "t")
		if err != nil {
			t.Fatal(err)
		}
		mariadbtest.MustExec(t, e.srcDB,
			"CREATE TABLE "+oscDB+"._t_gho LIKE "+oscDB+".t",
			"ALTER TABLE "+oscDB+"._t_gho ADD COLUMN c2 INT NOT NULL DEFAULT 7",
			"INSERT INTO "+oscDB+"._t_gho (id, k, v, n) SELECT id, k, v, n FROM "+oscDB+".t",
			"UPDATE "+oscDB+".t SET n = n + 1 WHERE id <= 10",
			"RENAME TABLE "+oscDB+"._t_gho TO "+oscDB+".t2",
			"UPDATE "+oscDB+".t SET n = n + 100 WHERE id <= 10")
		st := e.waitOnlineError()
		msg := st.Errors[0].Message
		for _, want := range []string{"`" + oscDB + "`.`_t_gho`", "`" + oscDB + "`.`t2`", "handle-error"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the error does not name %s: %s", want, msg)
			}
		}
		tables, err := oscTables(e.tgtDB, oscDB)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(tables, ",") != "t" {
			t.Errorf("the target's %s has tables %q, want only t", oscDB, tables)
		}
		if def, err := oscShowCreate(e.tgtDB, oscDB, "t"); err != nil || def != defTarget {
			t.Errorf("the target's t changed:\n%s\n(%v), was\n%s", def, err, defTarget)
		}
		// The changes before the RENAME are there, the one after is not.
		e.checkN("the UPDATE before the RENAME only", 1)
	})

	t.Run("started-after-shadow-alter", func(t *testing.T) {
		e := startOSC(t, oscOptions{rows: 1000, before: func(db *sql.DB) {
			mariadbtest.MustExec(t, db,
				"CREATE TABLE "+oscDB+"._t_gho LIKE "+oscDB+".t",
				"ALTER TABLE "+oscDB+"._t_gho "+oscAlter)
		}})
		defTarget, err := oscShowCreate(e.tgtDB, oscDB, "t")
		if err != nil {
			t.Fatal(err)
		}
		mariadbtest.MustExec(t, e.srcDB,
			"INSERT IGNORE INTO "+oscDB+"._t_gho (id, k, v, n) SELECT id, k, v, n FROM "+oscDB+".t",
			"UPDATE "+oscDB+".t SET n = n + 1 WHERE id <= 10",
			"UPDATE "+oscDB+"._t_gho SET n = n + 1 WHERE id <= 10",
			"RENAME TABLE "+oscDB+".t TO "+oscDB+"._t_del, "+oscDB+"._t_gho TO "+oscDB+".t",
			"DROP TABLE "+oscDB+"._t_del",
			"UPDATE "+oscDB+".t SET n = n + 100, c2 = 8 WHERE id <= 10")
		st := e.waitOnlineError()
		msg := st.Errors[0].Message
		for _, want := range []string{"`" + oscDB + "`.`t`", "`" + oscDB + "`.`_t_gho`", "by hand", "handle-error"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the error does not name %s: %s", want, msg)
			}
		}
		tables, err := oscTables(e.tgtDB, oscDB)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(tables, ",") != "t" {
			t.Errorf("the target's %s has tables %q, want only t", oscDB, tables)
		}
		if def, err := oscShowCreate(e.tgtDB, oscDB, "t"); err != nil || def != defTarget {
			t.Errorf("the target's t changed:\n%s\n(%v), was\n%s", def, err, defTarget)
		}
		e.checkN("the UPDATE before the RENAME only", 1)

		// The fix the error names: the tool's ALTER on the target by
		// hand, then skip the cut-over.
		mariadbtest.MustExec(t, e.tgtDB, "ALTER TABLE "+oscDB+".t "+oscAlter)
		e.c.ok("task", "handle-error", oscTask, "skip")
		e.waitSubtask(30*time.Second, "the subtask syncs after handle-error skip", subtaskDoc.syncing)
		w := startOSCWriters(t, e.srcDB, 1, 1100)
		w.c2.Store(true)
		w.waitMore(t, 30*time.Second, 50)
		if err := w.stop(); err != nil {
			t.Fatalf("writers: %v", err)
		}
		e.waitEqual(60 * time.Second)
	})
}

// waitOnlineError waits until the subtask pauses with a non-resumable
// sync-online-ddl error and returns its status; it then requires the
// status to stay so (nothing retries it).
func (e *oscEnv) waitOnlineError() subtaskDoc {
	e.t.Helper()
	st := e.waitSubtask(60*time.Second, "the subtask pauses with sync-online-ddl", func(d subtaskDoc) bool {
		return d.Stage == "Paused" && len(d.Errors) > 0
	})
	if len(st.Errors) != 1 || st.Errors[0].Code != "sync-online-ddl" || st.Errors[0].Resumable {
		e.t.Fatalf("subtask %v, want one non-resumable sync-online-ddl error", st)
	}
	e.t.Logf("the subtask paused: %s", st.Errors[0].Message)
	return st
}

// checkN requires the target's rows 1…10 of t to have n = want (the
// seeded 0 plus the UPDATEs applied) and the other rows n = 0.
func (e *oscEnv) checkN(what string, want int) {
	e.t.Helper()
	var lo, hi, rest int
	if err := e.tgtDB.QueryRow("SELECT MIN(n), MAX(n) FROM "+oscDB+".t WHERE id <= 10").Scan(&lo, &hi); err != nil {
		e.t.Fatal(err)
	}
	if err := e.tgtDB.QueryRow("SELECT COUNT(*) FROM " + oscDB + ".t WHERE id > 10 AND n <> 0").Scan(&rest); err != nil {
		e.t.Fatal(err)
	}
	if lo != want || hi != want || rest != 0 {
		e.t.Errorf("the target's t: n of ids 1…10 between %d and %d, %d other rows changed; want %s (n = %d)", lo, hi, rest, what, want)
	}
}
