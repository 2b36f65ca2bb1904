package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/ha/shardddl"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// The acceptance tests of optimistic shard merge (issue 25): the cluster of
// shard_test.go with `shard-mode: optimistic`. DML flows on every shard
// while the shards change their schema one by one; the target gets a
// change of the members' joined schema as soon as the join changes: an
// added column, a widened type, an added index at the first shard, a
// dropped column at the last.

// DDLs of the optimistic scenarios, as the shards run them (%s is the
// table) and as the target's general log must show each exactly once.
const (
	optAddC2  = "ALTER TABLE %s ADD COLUMN c2 INT NULL"
	optDropD  = "ALTER TABLE %s DROP COLUMN d"
	wantDropD = "DROP\\s+(COLUMN\\s+)?`?d`?(\\s|$)"

	// optConflictDDL moves c2 (INT on the other shards) to another type
	// ladder: a conflict; optReplace is the operator's compatible
	// replacement, a widening.
	optConflictDDL = "ALTER TABLE %s MODIFY COLUMN c2 VARCHAR(20)"
	optWidenC2     = "ALTER TABLE %s MODIFY COLUMN c2 BIGINT"
	optReplace     = "ALTER TABLE " + shardDB + ".t MODIFY COLUMN c2 BIGINT"
	wantWidenC2    = "MODIFY\\s+(COLUMN\\s+)?`?c2`?\\s+BIGINT\\b"

	// optColumns are the shards' columns besides shardTableDDL's in the
	// under-load scenarios: d, nullable, for the DROP COLUMN.
	optColumns = "d INT NULL"

	// optDropMarkerID is an id (of each shard) outside what the writers
	// touch, next to shardMarkerID: the marker rows of the DROP COLUMN
	// rollout.
	optDropMarkerID = shardKeySpace + 102
)

// TestShardOptimisticUnderLoad: writers change every shard while ADD
// COLUMN c2 reaches the shards one by one: the target has c2 after the
// first, and the rows of altered and unaltered shards keep coming (c2 set
// and NULL); then DROP COLUMN d: the target keeps d until the last shard
// dropped it; then ADD INDEX and a widening MODIFY COLUMN, both on the
// target at the first shard. Each target DDL runs once and the target
// ends equal to the union of the shards.
func TestShardOptimisticUnderLoad(t *testing.T) {
	e := startShardEnv(t, shardOptions{all: true, seedRows: 20, optimistic: true, extraColumns: optColumns})
	runShardOptimistic(t, e, optKills{})
}

// TestShardOptimisticKillWorker: the same under kill -9: of the worker
// that ran the target's ADD COLUMN, right after a third shard of the
// eight ran it (restarted two shards later), and of the last shard's
// worker during the DROP COLUMN rollout, after five shards dropped d
// (restarted once the last one did, so the restarted worker decides and
// runs the DROP): same end state, each DDL still once.
func TestShardOptimisticKillWorker(t *testing.T) {
	e := startShardEnv(t, shardOptions{optimistic: true, extraColumns: optColumns})
	runShardOptimistic(t, e, optKills{add: true, drop: true})
}

// optKills choose the kills of runShardOptimistic.
type optKills struct {
	add  bool // kill the first shard's worker when 3 of 8 shards ran ADD COLUMN
	drop bool // kill the last shard's worker when 5 of 8 shards ran DROP COLUMN
}

func runShardOptimistic(t *testing.T, e *shardEnv, kills optKills) {
	w := e.startShardWriters(e.shards)
	w.waitMore(t, 30*time.Second, 200)
	last := len(e.shards) - 1
	dead, restartAt := -1, -1 // the worker killed and not yet restarted; at which shard it restarts
	phase := time.Now()

	// ADD COLUMN, one shard at a time.
	for i, s := range e.shards {
		e.alter(s, optAddC2)
		s.c2.Store(true)
		switch {
		case i == restartAt:
			e.restart(dead)
			dead, restartAt = -1, -1
		case kills.add && i+1 == killAfter:
			// Right after the DDL: the worker may or may not have
			// reported it; its replay must either way.
			dead, restartAt = e.shards[0].src, i+2
			t.Logf("ADD COLUMN on %d of 8 shards: killing %s's worker, which ran it on the target", i+1, e.shards[0])
			e.kill(dead)
		}
		if i == 0 {
			e.waitTarget(30*time.Second, "c2 after the first shard's ADD COLUMN", func() error {
				if typ := e.targetColumnType("t", "c2"); typ == "" {
					return fmt.Errorf("no c2; locks %s", e.locksText())
				}
				return nil
			})
			e.checkFirstAdded(s)
		} else if i < last && s.src != dead {
			e.waitLock(e.lockID, 30*time.Second, fmt.Sprintf("%s ran ADD COLUMN, nothing outstanding", s), func(l shardddl.LockInfo) bool {
				return l.Mode == shardddl.ModeOptimistic && l.State == shardddl.LockUnsynced && hasMember(l.Synced, s) &&
					len(l.Synced) <= i+1
			})
		}
		w.waitMore(t, 30*time.Second, 20)
		time.Sleep(rolloutPause)
	}
	e.waitNoLock(60 * time.Second)
	if typ := e.targetColumnType("t", "c2"); !strings.HasPrefix(strings.ToLower(typ), "int") {
		t.Errorf("the target's c2 is %q after every shard added it as INT", typ)
	}
	t.Logf("ADD COLUMN rolled out in %s", time.Since(phase).Round(time.Millisecond))
	w.waitMore(t, 30*time.Second, 100)
	phase = time.Now()

	// DROP COLUMN d, one shard at a time: the target keeps d until the
	// last.
	for i, s := range e.shards {
		e.alter(s, optDropD)
		switch {
		case i == restartAt:
			e.restart(dead)
			dead, restartAt = -1, -1
		case kills.drop && i+1 == 5:
			// Once the DDL is decided: the replay must see it so.
			e.waitDropDecided(s)
			dead, restartAt = e.shards[last].src, last
			t.Logf("DROP COLUMN on %d of 8 shards: killing %s's worker, the last shard's", i+1, e.shards[last])
			e.kill(dead)
		}
		if i == last {
			break
		}
		if s.src != dead {
			e.waitDropDecided(s)
		}
		if typ := e.targetColumnType("t", "d"); typ == "" {
			e.dumpState()
			t.Fatalf("the target lost d while %d of 8 shards dropped it", i+1)
		}
		if i == 1 {
			e.checkDropHalf(e.shards[0], e.shards[3])
		}
		w.waitMore(t, 30*time.Second, 20)
		time.Sleep(rolloutPause)
	}
	e.waitTarget(60*time.Second, "no d after the last shard's DROP COLUMN", func() error {
		if typ := e.targetColumnType("t", "d"); typ != "" {
			return fmt.Errorf("d %s; locks %s", typ, e.locksText())
		}
		return nil
	})
	e.waitNoLock(30 * time.Second)
	t.Logf("DROP COLUMN rolled out in %s", time.Since(phase).Round(time.Millisecond))
	w.waitMore(t, 30*time.Second, 100)
	phase = time.Now()

	// ADD INDEX and MODIFY COLUMN v VARCHAR(64) back to back on each
	// shard: both on the target at the first shard, whose writer then
	// writes values only the widened column holds.
	for i, s := range e.shards {
		e.alter(s, ddlAddIndex)
		e.alter(s, ddlWidenV)
		s.wide.Store(true)
		if i == 0 {
			e.waitTarget(30*time.Second, "idx_c2 and v VARCHAR(64) after the first shard's DDLs", func() error {
				if !e.targetHasIndex("t", "idx_c2") {
					return fmt.Errorf("no idx_c2; locks %s", e.locksText())
				}
				if typ := e.targetColumnType("t", "v"); !strings.EqualFold(typ, "varchar(64)") {
					return fmt.Errorf("v %s; locks %s", typ, e.locksText())
				}
				return nil
			})
		}
		if i < last {
			w.waitMore(t, 30*time.Second, 20)
			time.Sleep(rolloutPause)
		}
	}
	t.Logf("ADD INDEX and MODIFY COLUMN rolled out in %s", time.Since(phase).Round(time.Millisecond))
	w.waitMore(t, 30*time.Second, 100)
	if err := w.stop(); err != nil {
		t.Fatalf("shard writers: %v", err)
	}
	t.Logf("writers stopped after %d commits", w.commits.Load())

	e.waitMerged(90*time.Second, nil, shardColumns(true))
	e.waitNoLock(30 * time.Second)
	if !e.targetHasIndex("t", "idx_c2") {
		t.Errorf("the target's %s.t has no index idx_c2", shardDB)
	}
	e.checkAltersOnce("t", wantAddC2, wantDropD, wantAddIndex, wantWidenV)
	e.checkSettled()
}

// waitTarget waits up to d until cond holds of the target, and fails with
// both subtasks' status and the locks when it does not.
func (e *shardEnv) waitTarget(d time.Duration, what string, cond func() error) {
	e.t.Helper()
	start := time.Now()
	if err := testutil.Poll(d, cond); err != nil {
		e.dumpState()
		e.t.Fatalf("the target's %s.t has not %s within %s: %v", shardDB, what, d, err)
	}
	e.t.Logf("the target's %s.t has %s within %s", shardDB, what, time.Since(start).Round(time.Millisecond))
}

// checkFirstAdded runs once the target has c2 and s is the only shard
// that added it: the lock is listed as optimistic and unsynced, with s its
// only synced member (the seven others lack the joined schema's c2); a row
// written to s with c2 and rows written to shards that lack it, of both
// sources, all reach the target (c2 set, NULL): no shard's DML is held.
func (e *shardEnv) checkFirstAdded(s *shardTable) {
	e.t.Helper()
	l := e.waitLock(e.lockID, 30*time.Second, "the first shard's ADD COLUMN ran, the others lack c2", func(l shardddl.LockInfo) bool {
		return l.State == shardddl.LockUnsynced
	})
	if l.Mode != shardddl.ModeOptimistic || l.Target != "`"+shardDB+"`.`t`" || !slices.Equal(l.Synced, []shardddl.MemberTable{s.member()}) ||
		len(l.Unsynced) != len(e.shards)-1 {
		e.t.Errorf("lock after the first shard's ADD COLUMN = %s; want mode optimistic, target `%s`.`t`, synced [%s], 7 unsynced",
			lockText(l), shardDB, s)
	}
	if st, err := e.subtask(s.src); err == nil {
		e.t.Logf("%s's subtask after the first ADD COLUMN: %v", e.wopts[s.src].name, st)
	}
	// One shard of the same source, one of the other.
	others := []*shardTable{e.shards[slices.IndexFunc(e.shards, func(o *shardTable) bool { return o != s && o.src == s.src })],
		e.shards[slices.IndexFunc(e.shards, func(o *shardTable) bool { return o.src != s.src })]}
	e.exec(s, fmt.Sprintf("INSERT INTO %s (id, k, v, n, c2) VALUES (%d, %d, 'added', 0, 4242)", s.name(), s.id(shardMarkerID), s.k))
	want := map[int64]string{s.id(shardMarkerID): "4242"}
	for _, o := range others {
		e.exec(o, fmt.Sprintf("INSERT INTO %s (id, k, v, n) VALUES (%d, %d, 'not-added', 0)", o.name(), o.id(shardMarkerID), o.k))
		want[o.id(shardMarkerID)] = "NULL"
	}
	e.waitMarkers(want, "c2", fmt.Sprintf("the rows of %s (with c2) and of %s, %s (without) reach the target", s, others[0], others[1]))
}

// waitDropDecided waits until s's DROP COLUMN d is decided and nothing is
// outstanding: s differs from the joined schema, which keeps d for the
// shards that have it.
func (e *shardEnv) waitDropDecided(s *shardTable) {
	e.t.Helper()
	e.waitLock(e.lockID, 30*time.Second, fmt.Sprintf("%s ran DROP COLUMN d, nothing outstanding", s), func(l shardddl.LockInfo) bool {
		return l.Mode == shardddl.ModeOptimistic && l.State == shardddl.LockUnsynced && hasMember(l.Unsynced, s)
	})
}

// checkDropHalf writes a row to dropped, a shard that dropped d, and one
// with d set to kept, a shard that has d: both reach the target, which
// keeps d, with d NULL and set.
func (e *shardEnv) checkDropHalf(dropped, kept *shardTable) {
	e.t.Helper()
	e.exec(dropped, fmt.Sprintf("INSERT INTO %s (id, k, v, n, c2) VALUES (%d, %d, 'dropped', 0, 1)", dropped.name(), dropped.id(optDropMarkerID), dropped.k))
	e.exec(kept, fmt.Sprintf("INSERT INTO %s (id, k, v, n, c2, d) VALUES (%d, %d, 'kept', 0, 2, 99)", kept.name(), kept.id(optDropMarkerID), kept.k))
	e.waitMarkers(map[int64]string{dropped.id(optDropMarkerID): "NULL", kept.id(optDropMarkerID): "99"}, "d",
		fmt.Sprintf("the rows of %s (without d) and %s (with d) reach the target", dropped, kept))
}

// waitMarkers waits up to 30 s until the target has the rows of the ids
// of want, with col as want says ("NULL" for NULL).
func (e *shardEnv) waitMarkers(want map[int64]string, col, what string) {
	e.t.Helper()
	var ids, wantRows []string
	for id, v := range want {
		ids = append(ids, fmt.Sprint(id))
		if v != "NULL" {
			v = fmt.Sprintf("%q", v)
		}
		wantRows = append(wantRows, fmt.Sprintf("%q|%s|", fmt.Sprintf("%012d", id), v)) // as readRows writes them
	}
	slices.Sort(wantRows)
	q := fmt.Sprintf("SELECT LPAD(id, 12, '0'), %s FROM %s.t WHERE id IN (%s) ORDER BY id", col, shardDB, strings.Join(ids, ", "))
	var got []string
	if err := testutil.Poll(30*time.Second, func() error {
		var err error
		got, err = readRows(e.tgtDB, q)
		if err != nil {
			return err
		}
		if !slices.Equal(got, wantRows) {
			return fmt.Errorf("rows %q, want %q", got, wantRows)
		}
		return nil
	}); err != nil {
		e.dumpState()
		e.t.Fatalf("not within 30s: %s: %v", what, err)
	}
}

// TestShardOptimisticConflict: in strict optimistic mode every shard has
// c2 INT and one runs MODIFY COLUMN c2 VARCHAR(20), another type ladder:
// its worker pauses the subtask with the non-resumable shard-ddl-conflict
// naming the table and the statement, dmctl lists the conflict, nothing
// reaches the target, and the other source keeps replicating. handle-error
// replace with MODIFY COLUMN c2 BIGINT, a widening, resumes it: the target
// gets c2 BIGINT (once), the shard's rows written since merge, and once
// the other shards widened c2 too the lock is gone.
func TestShardOptimisticConflict(t *testing.T) {
	e := startShardEnv(t, shardOptions{optimistic: true, strict: true, extraColumns: "c2 INT NULL"})
	var second []*shardTable
	for _, s := range e.shards {
		s.c2.Store(true)
		if s.src == 1 {
			second = append(second, s)
		}
	}
	w := e.startShardWriters(second)
	w.waitMore(t, 30*time.Second, 50)

	a := e.shards[0] // mysql-01 shard_1.t_1
	e.alter(a, optConflictDDL)
	e.exec(a, fmt.Sprintf("INSERT INTO %s (id, k, v, n, c2) VALUES (%d, %d, 'after-conflict', 0, '77')", a.name(), a.id(shardMarkerID), a.k))
	st := e.waitSubtask(a.src, 30*time.Second, "the subtask pauses with shard-ddl-conflict", func(st shardSubtask) bool {
		for _, er := range st.Errors {
			if er.Code == "shard-ddl-conflict" {
				return st.Stage == "Paused"
			}
		}
		return false
	})
	t.Logf("%s: %v", e.wopts[a.src].name, st)
	for _, er := range st.Errors {
		if er.Code != "shard-ddl-conflict" {
			continue
		}
		if er.Resumable {
			t.Errorf("the shard-ddl-conflict error is resumable: %+v", er)
		}
		for _, want := range []string{"`?shard_1`?\\.`?t_1`?", "VARCHAR\\(20\\)"} {
			if !regexp.MustCompile("(?i)" + want).MatchString(er.Message) {
				t.Errorf("the shard-ddl-conflict error does not name %q: %q", want, er.Message)
			}
		}
	}
	if err := testutil.Poll(10*time.Second, func() error {
		st, err := e.subtask(a.src)
		if err != nil {
			return err
		}
		if d := st.ShardDDL; d == nil || d.Lock != e.lockID || d.State != "conflict" {
			return fmt.Errorf("subtask %v", st)
		}
		return nil
	}); err != nil {
		t.Errorf("the paused subtask has no shard-ddl object of lock %s in state conflict within 10s: %v", e.lockID, err)
	}
	l := e.waitLock(e.lockID, 30*time.Second, "the conflict is listed", func(l shardddl.LockInfo) bool {
		return l.State == shardddl.LockConflict
	})
	if l.Mode != shardddl.ModeOptimistic || !regexp.MustCompile("(?i)VARCHAR\\(20\\)").MatchString(l.Conflict) ||
		!regexp.MustCompile("(?i)`?shard_1`?\\.`?t_1`?").MatchString(l.Conflict) {
		t.Errorf("lock %s; want mode optimistic and a conflict naming %s and its VARCHAR(20)", lockText(l), a)
	}
	if r := e.c.ok("shard-ddl-lock", shardTask); !strings.Contains(r.stdout, "conflict") || !strings.Contains(r.stdout, "optimistic") {
		t.Errorf("dmctl shard-ddl-lock does not show the optimistic lock's conflict:\n%s", r.stdout)
	}

	// The other source replicates meanwhile; the paused one does not.
	w.waitMore(t, 30*time.Second, 100)
	if err := w.stop(); err != nil {
		t.Fatalf("shard writers: %v", err)
	}
	e.waitMerged(60*time.Second, second, shardColumns(true))
	if typ := e.targetColumnType("t", "c2"); !strings.HasPrefix(strings.ToLower(typ), "int") {
		t.Fatalf("the target's c2 is %q while the shard's MODIFY COLUMN conflicts, want the int it had", typ)
	}
	if alters, _ := e.targetAlters("t"); len(alters) > 0 {
		t.Fatalf("the target ran %q while the shard's DDL conflicts", alters)
	}
	var n int
	if err := e.tgtDB.QueryRow("SELECT COUNT(*) FROM "+shardDB+".t WHERE id = ?", a.id(shardMarkerID)).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the target has %d rows of %s written after its conflicting DDL (%v), want none", n, a, err)
	}
	if st, err := e.subtask(a.src); err != nil || st.Stage != "Paused" {
		t.Fatalf("%s's subtask after the other source's rows merged: %v %v; want still Paused", e.wopts[a.src].name, st, err)
	}
	if st, err := e.subtask(1 - a.src); err != nil || st.Stage != "Running" || len(st.Errors) > 0 {
		t.Errorf("%s's subtask while the other conflicts: %v %v; want Running without errors", e.wopts[1-a.src].name, st, err)
	}

	// The replacement is written for the merged table.
	e.c.ok("task", "handle-error", shardTask, "replace", "--source", shardSources[a.src], "--sql", optReplace)
	e.waitSubtask(a.src, 30*time.Second, "the subtask syncs again after handle-error replace", func(st shardSubtask) bool {
		return st.Stage == "Running" && st.Unit == "Sync" && len(st.Errors) == 0
	})
	e.waitTarget(30*time.Second, "c2 BIGINT after handle-error replace", func() error {
		if typ := e.targetColumnType("t", "c2"); !strings.HasPrefix(strings.ToLower(typ), "bigint") {
			return fmt.Errorf("c2 %q; locks %s", typ, e.locksText())
		}
		return nil
	})
	// Every shard writes again, the replaced one's c2 values as text.
	w = e.startShardWriters(e.shards)
	w.waitMore(t, 30*time.Second, 100)
	for _, s := range e.shards[1:] {
		e.alter(s, optWidenC2)
		time.Sleep(rolloutPause / 5)
	}
	w.waitMore(t, 30*time.Second, 100)
	if err := w.stop(); err != nil {
		t.Fatalf("shard writers: %v", err)
	}
	e.waitMerged(60*time.Second, nil, shardColumns(true))
	e.waitNoLock(30 * time.Second)
	if typ := e.targetColumnType("t", "c2"); !strings.HasPrefix(strings.ToLower(typ), "bigint") {
		t.Errorf("the target's c2 is %q, want bigint", typ)
	}
	e.checkAltersOnce("t", wantWidenC2)
	e.checkSettled()
}
