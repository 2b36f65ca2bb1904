package e2e

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/ha/shardddl"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// The acceptance tests of pessimistic shard merge (issue 25): eight shards
// on two sources merged into shard_db.t by real dm-worker processes that
// coordinate each DDL through etcd, driven by dmctl.

// DDLs of the under-load scenario, as the shards run them (%s is the
// table) and as the target's general log must show each exactly once.
const (
	ddlAddC2    = "ALTER TABLE %s ADD COLUMN c2 INT"
	ddlAddIndex = "ALTER TABLE %s ADD INDEX idx_c2 (c2)"
	ddlWidenV   = "ALTER TABLE %s MODIFY COLUMN v VARCHAR(64) NOT NULL"

	wantAddC2    = "ADD\\s+(COLUMN\\s+)?`?c2`?\\s"
	wantAddIndex = "ADD\\s+(INDEX|KEY)\\s+`?idx_c2`?"
	wantWidenV   = "MODIFY\\s+(COLUMN\\s+)?`?v`?\\s+VARCHAR\\(64\\)"
)

// rolloutPause spaces the shards' DDLs, so that a lock stays half synced
// for seconds while the writers keep going; it paces the scenario and
// synchronises nothing (the waits on the lock do).
const rolloutPause = 250 * time.Millisecond

// TestShardPessimisticUnderLoad: writers change every shard while ADD
// COLUMN reaches the shards one by one (the altered ones writing c2), then
// ADD INDEX and MODIFY COLUMN back to back on each; the lock waits for
// every member, each DDL runs once on the target, the held DML is
// re-synced and the target ends equal to the union of the shards.
func TestShardPessimisticUnderLoad(t *testing.T) {
	e := startShardEnv(t, shardOptions{all: true, seedRows: 20})
	runShardUnderLoad(t, e, shardKills{})
}

// TestShardPessimisticKillOwnerAndMember: the same under kill -9, of the
// lock owner's worker while ADD COLUMN is half synced (restarted once every
// shard ran it, so the lock is decided with the owner back), and of a
// non-owner's worker while ADD INDEX is half synced (restarted two shards
// later): same end state, each DDL still once.
func TestShardPessimisticKillOwnerAndMember(t *testing.T) {
	e := startShardEnv(t, shardOptions{})
	runShardUnderLoad(t, e, shardKills{owner: true, member: true})
}

// shardKills choose the kills of runShardUnderLoad.
type shardKills struct {
	owner  bool // kill the owner's worker when ADD COLUMN has 3 of 8 members
	member bool // kill a non-owner's worker when ADD INDEX has 3 of 8 members
}

// killAfter is how many shards reached a DDL when a kill happens.
const killAfter = 3

func runShardUnderLoad(t *testing.T, e *shardEnv, kills shardKills) {
	w := e.startShardWriters(e.shards)
	w.waitMore(t, 30*time.Second, 200)
	comBefore := e.comAlterTable()
	dead := -1 // the worker killed and not yet restarted
	phase := time.Now()

	// ADD COLUMN, one shard at a time.
	for i, s := range e.shards {
		e.alter(s, ddlAddC2)
		s.c2.Store(true)
		if i == len(e.shards)-1 {
			break
		}
		if s.src != dead {
			l := e.waitLock(e.lockID, 30*time.Second, fmt.Sprintf("%s reached ADD COLUMN, the lock waits", s), func(l shardddl.LockInfo) bool {
				return hasMember(l.Synced, s) && len(l.Unsynced) > 0 && l.State == shardddl.LockWaiting
			})
			if i == 0 {
				e.checkFirstWaiting(s, l)
			}
			if i == 1 {
				e.checkHeldAndFree(e.shards[0], e.shards[6])
			}
			if got := e.targetColumnType("t", "c2"); got != "" {
				t.Fatalf("the target has c2 (%s) while %d of 8 shards ran ADD COLUMN; lock %s", got, i+1, lockText(l))
			}
			if kills.owner && i+1 == killAfter {
				dead = sourceIndex(t, l.Owner)
				t.Logf("ADD COLUMN half synced (%d of 8): killing the owner %s's worker", i+1, l.Owner)
				e.kill(dead)
			}
		}
		w.waitMore(t, 30*time.Second, 20)
		time.Sleep(rolloutPause)
	}
	if dead >= 0 {
		e.restart(dead)
		dead = -1
	}
	e.waitColumn("c2", 60*time.Second)
	t.Logf("ADD COLUMN rolled out and ran on the target in %s", time.Since(phase).Round(time.Millisecond))
	w.waitMore(t, 30*time.Second, 100)
	phase = time.Now()

	// ADD INDEX and MODIFY COLUMN back to back on each shard: two locks in
	// a row, the second decided after the first is gone.
	restartAt := -1
	for i, s := range e.shards {
		e.alter(s, ddlAddIndex)
		e.alter(s, ddlWidenV)
		s.wide.Store(true)
		if i == restartAt {
			e.restart(dead)
			dead = -1
		}
		if i == len(e.shards)-1 {
			break
		}
		if s.src != dead {
			l := e.waitLock(e.lockID, 30*time.Second, fmt.Sprintf("%s reached ADD INDEX, the lock waits", s), func(l shardddl.LockInfo) bool {
				return hasMember(l.Synced, s) && len(l.Unsynced) > 0 && strings.Contains(strings.Join(l.DDLs, ";"), "idx_c2")
			})
			if kills.member && i+1 == killAfter {
				owner := sourceIndex(t, l.Owner)
				dead = 1 - owner
				restartAt = i + 2
				t.Logf("ADD INDEX half synced (%d of 8): killing the non-owner %s's worker", i+1, shardSources[dead])
				e.kill(dead)
			}
		}
		w.waitMore(t, 30*time.Second, 20)
		time.Sleep(rolloutPause)
	}
	t.Logf("ADD INDEX and MODIFY COLUMN rolled out in %s", time.Since(phase).Round(time.Millisecond))
	w.waitMore(t, 30*time.Second, 100)
	if err := w.stop(); err != nil {
		t.Fatalf("shard writers: %v", err)
	}
	t.Logf("writers stopped after %d commits", w.commits.Load())

	e.waitMerged(90*time.Second, nil, shardColumns(true))
	e.waitNoLock(30 * time.Second)
	if typ := e.targetColumnType("t", "v"); !strings.EqualFold(typ, "varchar(64)") {
		t.Errorf("the target's v is %q, want varchar(64)", typ)
	}
	if !e.targetHasIndex("t", "idx_c2") {
		t.Errorf("the target's %s.t has no index idx_c2", shardDB)
	}
	e.checkAltersOnce("t", wantAddC2, wantAddIndex, wantWidenV)
	t.Logf("Com_alter_table of the target grew by %d during the DDLs (its meta statements included)", e.comAlterTable()-comBefore)
	e.checkSettled()
}

// TestShardPessimisticKillOwnerAfterDDL: under load, ADD COLUMN and then
// MODIFY COLUMN reach every shard; each time the owner's worker is killed
// after the DDL ran on the target and before it recorded that in etcd
// (Done), and started again: it owns a lock whose outcome etcd does not
// know (DESIGN.md §5: no DDL runs twice). ADD COLUMN sent again fails
// (duplicate column: the kill came after the column showed on the
// target), so the general log may show it twice; MODIFY COLUMN sent again
// succeeds, so only a check of the target keeps it to once. Same end
// state.
func TestShardPessimisticKillOwnerAfterDDL(t *testing.T) {
	// The freezes starve the workers; a longer lease keeps them bound.
	e := startShardEnv(t, shardOptions{workerArgs: []string{"--keepalive-ttl", "10s"}})
	w := e.startShardWriters(e.shards)
	w.waitMore(t, 30*time.Second, 100)
	for _, step := range []struct {
		ddl, lockHas string
		applied      func() bool
		done         func(*shardTable)
	}{
		{ddlAddC2, "c2", func() bool { return e.targetColumnType("t", "c2") != "" }, func(s *shardTable) { s.c2.Store(true) }},
		{ddlWidenV, "MODIFY", func() bool { return strings.EqualFold(e.targetColumnType("t", "v"), "varchar(64)") },
			func(s *shardTable) { s.wide.Store(true) }},
	} {
		// The workers run freely until seven shards reported; the freezes
		// begin with the last shard's DDL, so they last only as long as
		// the decision and the owner's run.
		for i, s := range e.shards {
			if i == len(e.shards)-1 {
				e.waitLock(e.lockID, 60*time.Second, "seven shards reached "+step.lockHas, func(l shardddl.LockInfo) bool {
					return len(l.Synced) == len(e.shards)-1 && strings.Contains(strings.Join(l.DDLs, ";"), step.lockHas)
				})
			}
			e.alter(s, step.ddl)
			step.done(s)
		}
		e.killOwnerExecuting(step.lockHas, step.applied, 60*time.Second)
		e.waitNoLock(60 * time.Second)
		w.waitMore(t, 30*time.Second, 100)
	}
	if err := w.stop(); err != nil {
		t.Fatalf("shard writers: %v", err)
	}
	e.waitMerged(90*time.Second, nil, shardColumns(true))
	e.checkAlters("t", alterCount{re: wantAddC2, min: 1, max: 2}, alterCount{re: wantWidenV, min: 1, max: 1})
	e.checkSettled()
}

// checkFirstWaiting requires the status of the worker of s, the first
// shard that reached ADD COLUMN, to say it waits on the lock for the seven
// others, and the lock to list it as owner.
func (e *shardEnv) checkFirstWaiting(s *shardTable, l shardddl.LockInfo) {
	e.t.Helper()
	if l.Owner != shardSources[s.src] || len(l.Synced) != 1 || len(l.Unsynced) != len(e.shards)-1 || l.Mode != "pessimistic" ||
		l.Target != "`"+shardDB+"`.`t`" || len(l.DDLs) != 1 {
		e.t.Errorf("lock after the first shard's ADD COLUMN = %s; want owner %s, 1 synced, 7 unsynced, mode pessimistic, target `%s`.`t`, one DDL",
			lockText(l), shardSources[s.src], shardDB)
	}
	e.waitSubtask(s.src, 20*time.Second, "shard-ddl says the subtask waits for the others", func(st shardSubtask) bool {
		d := st.ShardDDL
		if d == nil || d.Lock != e.lockID || d.State != "waiting" || len(d.DDLs) != 1 {
			return false
		}
		// It waits for the tables of the other source too.
		for _, wf := range d.WaitingFor {
			if wf.Source != shardSources[s.src] {
				return true
			}
		}
		return false
	})
}

// killOwnerExecuting runs both workers in slices of 20 ms, frozen with
// SIGSTOP for 100 ms after each, and reads the lock from etcd while they
// are frozen. At a freeze at which the lock whose DDLs contain ddl is
// executing, it waits (the workers still frozen) up to a second for the
// DDL to show on the target: an ALTER the owner sent completes on the
// server while its client is frozen. Once it shows, the owner is frozen
// after the DDL ran and before it recorded Done: it kills the owner's
// worker with SIGKILL there and starts it again. An owner frozen before
// it sent the DDL gets another slice. A lock seen done (or gone) first is
// logged as missed: the owner ran it and recorded it within one slice.
func (e *shardEnv) killOwnerExecuting(ddl string, applied func() bool, d time.Duration) {
	e.t.Helper()
	const stepRun, stepFrozen = 20 * time.Millisecond, 100 * time.Millisecond
	deadline := time.Now().Add(d)
	thaw := func() {
		for _, w := range e.w {
			w.thaw(e.t)
		}
	}
	for {
		for _, w := range e.w {
			w.freeze(e.t)
		}
		l, found, err := e.directLock(ddl)
		switch {
		case err != nil:
		case found && l.State == shardddl.LockExecuting:
			if testutil.Poll(time.Second, func() error {
				if !applied() {
					return errors.New("not on the target")
				}
				return nil
			}) == nil {
				owner := sourceIndex(e.t, l.Owner)
				e.t.Logf("lock of %s executing, its DDL on the target, Done not recorded: killing its owner %s's worker", ddl, l.Owner)
				e.kill(owner)
				thaw()
				e.restart(owner)
				return
			}
		case found && l.State == shardddl.LockDone, !found && applied():
			thaw()
			e.t.Logf("missed the lock of %s executing (seen %q): no kill", ddl, l.State)
			return
		}
		if time.Now().After(deadline) {
			thaw()
			e.dumpState()
			e.t.Fatalf("the lock of %s was not seen executing with its DDL run within %s (last error: %v)", ddl, d, err)
		}
		time.Sleep(stepFrozen)
		thaw()
		time.Sleep(stepRun)
	}
}

// directLock reads, from etcd directly, the lock of shardTask whose DDLs
// contain ddl.
func (e *shardEnv) directLock(ddl string) (shardddl.LockInfo, bool, error) {
	ctx, cancel := context.WithTimeout(e.t.Context(), 5*time.Second)
	defer cancel()
	locks, err := shardddl.Locks(ctx, e.c.direct, e.c.prefix, shardTask)
	if err != nil {
		return shardddl.LockInfo{}, false, err
	}
	for _, l := range locks {
		if l.ID == e.lockID && strings.Contains(strings.Join(l.DDLs, ";"), ddl) {
			return l, true, nil
		}
	}
	return shardddl.LockInfo{}, false, nil
}

// checkHeldAndFree writes a row into held, a shard that reached ADD
// COLUMN (its lock undecided), then one into free, a shard of the same
// source that has not: free's row reaches the target (tables outside the
// lock keep replicating), held's does not (its DML after the DDL is held).
// The rows' ids are outside the writers' key space; they stay in both.
func (e *shardEnv) checkHeldAndFree(held, free *shardTable) {
	e.t.Helper()
	if held.src != free.src || !held.c2.Load() || free.c2.Load() {
		e.t.Fatalf("checkHeldAndFree(%s, %s): want two shards of one source, the first altered, the second not", held, free)
	}
	heldID, freeID := held.id(shardMarkerID), free.id(shardMarkerID)
	e.exec(held, fmt.Sprintf("INSERT INTO %s (id, k, v, n, c2) VALUES (%d, %d, 'held', 0, 1)", held.name(), heldID, held.k))
	e.exec(free, fmt.Sprintf("INSERT INTO %s (id, k, v, n) VALUES (%d, %d, 'free', 0)", free.name(), freeID, free.k))
	testutil.Eventually(e.t, 30*time.Second, fmt.Sprintf("%s's row written after %s's reaches the target while the lock waits", free, held), func() error {
		var n int
		if err := e.tgtDB.QueryRow("SELECT COUNT(*) FROM "+shardDB+".t WHERE id = ?", freeID).Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%d rows with id %d", n, freeID)
		}
		return nil
	})
	var n int
	if err := e.tgtDB.QueryRow("SELECT COUNT(*) FROM "+shardDB+".t WHERE id = ?", heldID).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	if n != 0 {
		e.t.Fatalf("%s's row %d, written after its ADD COLUMN, is on the target while the lock waits", held, heldID)
	}
	if l, ok := e.lock(e.lockID); !ok || l.State != shardddl.LockWaiting {
		e.t.Fatalf("the lock is no longer waiting after 2 of 8 shards reached ADD COLUMN: %s", e.locksText())
	}
}

// waitColumn waits up to d until the target's shardDB.t has col.
func (e *shardEnv) waitColumn(col string, d time.Duration) {
	e.t.Helper()
	start := time.Now()
	if err := testutil.Poll(d, func() error {
		if e.targetColumnType("t", col) == "" {
			return fmt.Errorf("no column %s", col)
		}
		return nil
	}); err != nil {
		e.dumpState()
		e.t.Fatalf("the target's %s.t has no column %s %s after the last shard's DDL", shardDB, col, d)
	}
	e.t.Logf("the target's %s.t has %s %s after the last shard's DDL", shardDB, col, time.Since(start).Round(time.Millisecond))
}

// checkSettled requires both subtasks to sync without errors and without a
// shard-ddl object (no lock involves them).
func (e *shardEnv) checkSettled() {
	e.t.Helper()
	for i := range e.w {
		e.waitSubtask(i, 20*time.Second, "syncs without errors, no lock involves it", func(st shardSubtask) bool {
			return st.Stage == "Running" && st.Unit == "Sync" && len(st.Errors) == 0 && st.ShardDDL == nil
		})
	}
}

// TestShardPessimisticMismatchedDDL: one shard adds c3 INT, another c3
// BIGINT. The lock is a conflict naming both statements, in dmctl and in
// both subtasks' status, nothing reaches the target, unlock refuses to
// decide it; handle-error replace makes the second shard's DDL the INT
// one, and once the other shards ran it the target has c3 INT (once) and
// every row, the second shard's BIGINT values included.
func TestShardPessimisticMismatchedDDL(t *testing.T) {
	e := startShardEnv(t, shardOptions{})
	for _, s := range e.shards {
		e.exec(s, fmt.Sprintf("INSERT INTO %s (id, k, v, n) VALUES (%d, %d, 'before', 0)", s.name(), s.id(0), s.k))
	}
	e.waitMerged(30*time.Second, nil, shardColumns(false))

	// a reaches its DDL first, so b is the member that differs from the
	// lock's first DDL: the one handle-error replace without a position
	// acts on.
	a, b := e.shards[0], e.shards[1] // mysql-01 and mysql-02 shard_1.t_1
	e.alter(a, "ALTER TABLE %s ADD COLUMN c3 INT")
	e.waitLock(e.lockID, 30*time.Second, "the first shard reached ADD COLUMN c3 INT", func(l shardddl.LockInfo) bool {
		return hasMember(l.Synced, a)
	})
	e.alter(b, "ALTER TABLE %s ADD COLUMN c3 BIGINT")
	for _, s := range []*shardTable{a, b} {
		e.exec(s, fmt.Sprintf("INSERT INTO %s (id, k, v, n, c3) VALUES (%d, %d, 'held', 0, 7)", s.name(), s.id(1), s.k))
	}
	l := e.waitLock(e.lockID, 30*time.Second, "a conflict of the two shards' DDLs", func(l shardddl.LockInfo) bool {
		return l.State == shardddl.LockConflict
	})
	t.Logf("conflict: %s", l.Conflict)
	for _, want := range []string{shardSources[0], shardSources[1], "`?c3`?\\W+INT\\b", "`?c3`?\\W+BIGINT\\b"} {
		if !regexp.MustCompile("(?i)" + want).MatchString(l.Conflict) {
			t.Errorf("the lock's conflict does not name %q: %q", want, l.Conflict)
		}
	}
	for i := range e.w {
		st := e.waitSubtask(i, 20*time.Second, "shard-ddl shows the conflict", func(st shardSubtask) bool {
			return st.ShardDDL != nil && st.ShardDDL.Lock == e.lockID && st.ShardDDL.State == "conflict"
		})
		t.Logf("%s: %v", e.wopts[i].name, st)
	}
	if r := e.c.ok("shard-ddl-lock", shardTask); !strings.Contains(r.stdout, "conflict") {
		t.Errorf("dmctl shard-ddl-lock does not show the conflict:\n%s", r.stdout)
	}
	if typ := e.targetColumnType("t", "c3"); typ != "" {
		t.Fatalf("the target has c3 %s while the shards' DDLs conflict", typ)
	}
	if alters, _ := e.targetAlters("t"); len(alters) > 0 {
		t.Fatalf("the target ran %q while the shards' DDLs conflict", alters)
	}
	var held int
	if err := e.tgtDB.QueryRow("SELECT COUNT(*) FROM "+shardDB+".t WHERE id IN (?, ?)", a.id(1), b.id(1)).Scan(&held); err != nil || held != 0 {
		t.Fatalf("the target has %d of the rows the conflicting shards wrote after their DDLs (%v), want none", held, err)
	}
	r := e.c.run("shard-ddl-lock", "unlock", e.lockID)
	if r.code == 0 || !strings.Contains(r.stderr, "handle-error") {
		t.Errorf("shard-ddl-lock unlock of a conflict: exit %d, want 1 with a hint at handle-error\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	// The replacement is written for the merged table (docs/operations.md,
	// "Merging shards"), as the other members' DDLs reach the lock.
	e.c.ok("task", "handle-error", shardTask, "replace", "--source", shardSources[b.src],
		"--sql", "ALTER TABLE "+shardDB+".t ADD COLUMN c3 INT")
	e.waitLock(e.lockID, 30*time.Second, "the conflict is gone after handle-error replace", func(l shardddl.LockInfo) bool {
		return l.State == shardddl.LockWaiting && l.Conflict == "" && hasMember(l.Synced, a) && hasMember(l.Synced, b)
	})
	for _, s := range e.shards[2:] {
		e.alter(s, "ALTER TABLE %s ADD COLUMN c3 INT")
	}
	e.waitNoLock(60 * time.Second)
	e.waitMerged(60*time.Second, nil, shardColumns(false)+", c3")
	if typ := e.targetColumnType("t", "c3"); !strings.HasPrefix(strings.ToLower(typ), "int") {
		t.Errorf("the target's c3 is %q, want int", typ)
	}
	e.checkAltersOnce("t", "ADD\\s+(COLUMN\\s+)?`?c3`?\\s+INT\\b")
	e.checkSettled()
}

// exec runs q on the source of s.
func (e *shardEnv) exec(s *shardTable, q string) {
	e.t.Helper()
	if _, err := e.srcDB[s.src].Exec(q); err != nil {
		e.t.Fatalf("%s: %s: %v", s, q, err)
	}
}

// TestShardPessimisticSourceWithoutTable: group shard_db.u has tables on
// the first source only; its lock waits for those two tables, never for
// the second source, and resolves when both reached the DDL. The task
// says `is-sharding: true`, DM's older spelling of pessimistic mode.
func TestShardPessimisticSourceWithoutTable(t *testing.T) {
	e := startShardEnv(t, shardOptions{uTables: true, isSharding: true})
	uLock := shardddl.LockID(shardTask, shardddl.Table{Schema: shardDB, Name: "u"})
	src := e.srcDB[0]
	u1, u2 := "shard_1.u_1", "shard_2.u_1"
	exec := func(q string) {
		t.Helper()
		if _, err := src.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("INSERT INTO " + u1 + " VALUES (1, 1)")
	exec("INSERT INTO " + u2 + " VALUES (1001, 1)")

	exec("ALTER TABLE " + u1 + " ADD COLUMN b INT")
	exec("INSERT INTO " + u1 + " VALUES (2, 2, 20)")
	l := e.waitLock(uLock, 30*time.Second, "shard_1.u_1 reached the DDL", func(l shardddl.LockInfo) bool {
		return len(l.Synced) == 1
	})
	wantUnsynced := []shardddl.MemberTable{{Source: shardSources[0], Table: "`shard_2`.`u_1`"}}
	if l.State != shardddl.LockWaiting || !slices.Equal(l.Unsynced, wantUnsynced) {
		t.Errorf("lock %s; want it waiting for %v only (the second source has no table of the group)", lockText(l), wantUnsynced)
	}
	if _, ok := e.lock(e.lockID); ok {
		t.Errorf("a lock of %s.t is listed though no shard of it ran a DDL: %s", shardDB, e.locksText())
	}
	exec("ALTER TABLE " + u2 + " ADD COLUMN b INT")
	exec("INSERT INTO " + u2 + " VALUES (1002, 2, 30)")
	e.waitNoLock(30 * time.Second)

	want, err := readRows(src, "SELECT * FROM (SELECT * FROM "+u1+" UNION ALL SELECT * FROM "+u2+") AS x ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = testutil.Poll(30*time.Second, func() error {
		got, err = readRows(e.tgtDB, "SELECT * FROM "+shardDB+".u ORDER BY id")
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("rows differ:\n%s", diffRows(want, got, 5))
		}
		return nil
	})
	if err != nil {
		e.dumpState()
		t.Fatalf("the target's %s.u is not the union of shard_1.u_1 and shard_2.u_1: %v", shardDB, err)
	}
	e.checkAltersOnce("u", "ADD\\s+(COLUMN\\s+)?`?b`?\\s")
	e.checkSettled()
}

// TestShardPessimisticUnlockStoppedMember: the second source's worker is
// killed for good; the first source's four shards run ADD COLUMN and the
// lock waits for the second source's four. `shard-ddl-lock unlock --owner
// mysql-01` resolves it: the DDL runs once on the target and the first
// source's held rows are re-synced.
func TestShardPessimisticUnlockStoppedMember(t *testing.T) {
	e := startShardEnv(t, shardOptions{})
	var first []*shardTable
	for _, s := range e.shards {
		if s.src == 0 {
			first = append(first, s)
		}
		e.exec(s, fmt.Sprintf("INSERT INTO %s (id, k, v, n) VALUES (%d, %d, 'before', 0)", s.name(), s.id(0), s.k))
	}
	e.waitMerged(30*time.Second, nil, shardColumns(false))
	e.kill(1)

	for _, s := range first {
		e.alter(s, ddlAddC2)
		e.exec(s, fmt.Sprintf("INSERT INTO %s (id, k, v, n, c2) VALUES (%d, %d, 'held', 0, %d)", s.name(), s.id(1), s.k, s.k))
		e.exec(s, fmt.Sprintf("UPDATE %s SET c2 = -1, n = 1 WHERE id = %d", s.name(), s.id(0)))
	}
	l := e.waitLock(e.lockID, 30*time.Second, "the first source's four shards reached ADD COLUMN", func(l shardddl.LockInfo) bool {
		return len(l.Synced) == len(first)
	})
	if l.State != shardddl.LockWaiting || len(l.Unsynced) != len(e.shards)-len(first) {
		t.Fatalf("lock %s; want it waiting for the second source's %d tables", lockText(l), len(e.shards)-len(first))
	}
	for _, m := range l.Unsynced {
		if m.Source != shardSources[1] {
			t.Fatalf("lock %s waits for %v, a table of the first source that ran the DDL", lockText(l), m)
		}
	}
	if typ := e.targetColumnType("t", "c2"); typ != "" {
		t.Fatalf("the target has c2 %s before the lock is resolved", typ)
	}

	r := e.c.ok("--output", "json", "shard-ddl-lock", "unlock", e.lockID, "--owner", shardSources[0])
	t.Logf("unlock: %s", r.stdout)
	e.waitMerged(60*time.Second, first, shardColumns(true))
	e.waitNoLock(30 * time.Second)
	e.checkAltersOnce("t", wantAddC2)
	e.waitSubtask(0, 20*time.Second, "syncs without errors, no lock involves it", func(st shardSubtask) bool {
		return st.Stage == "Running" && st.Unit == "Sync" && len(st.Errors) == 0 && st.ShardDDL == nil
	})
}
