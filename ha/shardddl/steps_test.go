package shardddl

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

const (
	addC1 = "ALTER TABLE `shop`.`orders` ADD COLUMN c1 INT"
	addC2 = "ALTER TABLE `shop`.`orders` ADD COLUMN c2 BIGINT"
)

var (
	tA = tbl("shop_01", "orders_00")
	tB = tbl("shop_01", "orders_01")
)

// Members that reach different DDLs are an error on the lock naming both
// tables and both statements; the lock is not decided until the differing
// info is replaced.
func TestDifferingDDLsAreAConflict(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	c1, c2 := coord(t, cli, "s1"), coord(t, cli, "s2")
	mustPutShare(ctx, t, c1, tA)
	mustPutShare(ctx, t, c2, tA)
	report(ctx, t, c1, tA, addC1, 100)
	st := report(ctx, t, c2, tA, addC2, 200)
	wantRole(t, "second, differing report", st, RoleConflict)
	for _, want := range []string{"s1 `shop_01`.`orders_00`", "s2 `shop_01`.`orders_00`", addC1, addC2} {
		if !strings.Contains(st.Conflict, want) {
			t.Errorf("conflict %q does not name %q", st.Conflict, want)
		}
	}
	wantRole(t, "first reporter", state(ctx, t, c1, tA), RoleConflict)
	if lockKeyExists(ctx, t, cli) {
		t.Fatal("a conflicting lock was decided")
	}
	locks, err := Locks(ctx, cli, "", testTask)
	if err != nil || len(locks) != 1 || locks[0].Conflict == "" || locks[0].State != LockConflict {
		t.Fatalf("Locks = %+v, %v; want one lock with the conflict", locks, err)
	}
	if err := Unlock(ctx, cli, "", locks[0].ID, "", false); !errors.Is(err, ErrConflict) {
		t.Fatalf("unlock of a conflicting lock: %v, want ErrConflict", err)
	}

	// handle-error replace: the differing table reports the DDL again.
	st = report(ctx, t, c2, tA, addC1, 200)
	wantRole(t, "after the replacement", st, RoleWaiting)
	wantRole(t, "owner after the replacement", state(ctx, t, c1, tA), RoleOwner)
}

// A source with no table of the group has no share and is not waited for.
func TestSourceWithoutShareIsNotWaitedFor(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	c1, c2 := coord(t, cli, "s1"), coord(t, cli, "s2")
	mustPutShare(ctx, t, c1, tA, tB)
	mustPutShare(ctx, t, c2) // s2 routes nothing here
	report(ctx, t, c1, tA, addC1, 100)
	st := report(ctx, t, c1, tB, addC1, 200)
	wantRole(t, "last table of s1", st, RoleWaiting) // waits for the owner, not for s2
	if len(st.WaitingFor) != 1 || *st.Owner != (Member{Source: "s1", Table: tA}) {
		t.Fatalf("state %+v, want waiting for owner s1 %s only", st, tA)
	}
	if _, err := c2.Report(ctx, Report{Target: target, Table: tA, DDLs: []string{addC1}}); !errors.Is(err, ErrNotMember) {
		t.Fatalf("report of a table outside the share: %v, want ErrNotMember", err)
	}
}

// A share update that removes a dropped table lets a lock that waited only
// for it resolve, before and after the decision.
func TestDroppedTableLeavesTheGroup(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	c1, c2 := coord(t, cli, "s1"), coord(t, cli, "s2")
	mustPutShare(ctx, t, c1, tA, tB)
	mustPutShare(ctx, t, c2, tA)
	report(ctx, t, c1, tA, addC1, 100)
	st := report(ctx, t, c2, tA, addC1, 100)
	wantRole(t, "before the drop", st, RoleWaiting)
	if len(st.WaitingFor) != 1 || st.WaitingFor[0] != (Member{Source: "s1", Table: tB}) {
		t.Fatalf("waiting for %v, want s1 %s", st.WaitingFor, tB)
	}
	mustPutShare(ctx, t, c1, tA) // tB dropped upstream
	wantRole(t, "owner after the drop", state(ctx, t, c1, tA), RoleOwner)

	// Drop of a decided member that has not acknowledged: s2's table.
	if _, err := c1.Done(ctx, target, tA); err != nil {
		t.Fatal(err)
	}
	if !lockKeyExists(ctx, t, cli) {
		t.Fatal("lock gone before s2 acknowledged")
	}
	mustPutShare(ctx, t, c2)
	if lockKeyExists(ctx, t, cli) {
		t.Fatal("lock left after its last unacknowledged member was dropped")
	}
	if st := state(ctx, t, c2, tA); st.Role != RoleNone {
		t.Fatalf("dropped table still has state %+v", st)
	}
}

// A worker restart (a new Coordinator on the same etcd) at each step finds
// the state where the previous one left it.
func TestRestartAtEachStep(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	mustPutShare(ctx, t, coord(t, cli, "s1"), tA)
	mustPutShare(ctx, t, coord(t, cli, "s2"), tA)

	// After report.
	report(ctx, t, coord(t, cli, "s1"), tA, addC1, 100)
	st := state(ctx, t, coord(t, cli, "s1"), tA)
	wantRole(t, "s1 restarted after report", st, RoleWaiting)
	st = report(ctx, t, coord(t, cli, "s1"), tA, addC1, 100) // the replay reports again
	if st.Role != RoleWaiting || st.Seq != 1 {
		t.Fatalf("replayed report: %+v, want waiting at seq 1", st)
	}

	// After the decision.
	wantRole(t, "s2 reports", report(ctx, t, coord(t, cli, "s2"), tA, addC1, 300), RoleWaiting)
	wantRole(t, "s1 restarted after the decision", state(ctx, t, coord(t, cli, "s1"), tA), RoleOwner)
	wantRole(t, "s2 restarted after the decision", state(ctx, t, coord(t, cli, "s2"), tA), RoleWaiting)

	// After the owner began (and maybe ran the DDL) but before Done.
	if _, err := coord(t, cli, "s1").Begin(ctx, target, tA); err != nil {
		t.Fatal(err)
	}
	wantRole(t, "s1 restarted after begin", state(ctx, t, coord(t, cli, "s1"), tA), RoleOwnerPending)
	st = report(ctx, t, coord(t, cli, "s1"), tA, addC1, 100)
	wantRole(t, "s1 replays its DDL after begin", st, RoleOwnerPending)
	if _, err := coord(t, cli, "s2").Ack(ctx, target, tA); !errors.Is(err, ErrWrongRole) {
		t.Fatalf("ack before the owner is done: %v, want ErrWrongRole", err)
	}
	if _, err := coord(t, cli, "s1").Done(ctx, target, tA); err != nil {
		t.Fatal(err)
	}

	// After done, before the others acknowledged.
	wantRole(t, "s2 restarted after done", state(ctx, t, coord(t, cli, "s2"), tA), RoleSkip)
	wantRole(t, "s1 after done", state(ctx, t, coord(t, cli, "s1"), tA), RoleResolved)
	st, err := coord(t, cli, "s2").Ack(ctx, target, tA)
	if err != nil {
		t.Fatal(err)
	}
	wantRole(t, "s2 after ack", st, RoleResolved)
	if lockKeyExists(ctx, t, cli) {
		t.Fatal("lock left after every ack")
	}
	// A replay after everything: the same DDL at the same location.
	st = report(ctx, t, coord(t, cli, "s1"), tA, addC1, 100)
	if st.Role != RoleResolved || st.Resolved != ResolvedExecuted || st.Seq != 1 {
		t.Fatalf("replay of an executed DDL: %+v, want resolved (executed) at seq 1", st)
	}
	// The next DDL is seq 2.
	if st = report(ctx, t, coord(t, cli, "s1"), tA, addC2, 500); st.Seq != 2 || st.Role != RoleWaiting {
		t.Fatalf("next DDL: %+v, want waiting at seq 2", st)
	}
}

// Unlock with a member whose worker never reports: the named owner runs the
// DDL, the synced member skips, the unsynced one skips when it reaches it.
func TestUnlockWithAMemberThatNeverReports(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	c1, c2 := coord(t, cli, "s1"), coord(t, cli, "s2")
	mustPutShare(ctx, t, c1, tA, tB)
	mustPutShare(ctx, t, c2, tA)
	report(ctx, t, c1, tA, addC1, 100)
	report(ctx, t, c2, tA, addC1, 100)
	id := LockID(testTask, target)
	locks, err := Locks(ctx, cli, "", testTask)
	if err != nil || len(locks) != 1 || len(locks[0].Synced) != 2 || len(locks[0].Unsynced) != 1 ||
		locks[0].Unsynced[0] != (MemberTable{Source: "s1", Table: tB.String()}) || locks[0].ID != id {
		t.Fatalf("Locks = %+v, %v; want %s with s1 %s unsynced", locks, err, id, tB)
	}

	waited := make(chan LockState, 1)
	go func() {
		st, _ := c1.Wait(ctx, target, tA, RoleWaiting)
		waited <- st
	}()
	if err := Unlock(ctx, cli, "", id, "s2", false); err != nil {
		t.Fatal(err)
	}
	wantRole(t, "s2 named owner", state(ctx, t, c2, tA), RoleOwner)
	if _, err := c2.Begin(ctx, target, tA); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Done(ctx, target, tA); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-waited:
		wantRole(t, "s1 synced member after the owner is done", st, RoleSkip)
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not return after the owner was done")
	}
	if _, err := c1.Ack(ctx, target, tA); err != nil {
		t.Fatal(err)
	}
	if lockKeyExists(ctx, t, cli) {
		t.Fatal("lock left after unlock and every ack")
	}
	st := report(ctx, t, c1, tB, addC1, 900) // the unsynced member reaches it at last
	if st.Role != RoleSkip || st.Resolved != ResolvedUnlocked {
		t.Fatalf("unsynced member reaching the unlocked DDL: %+v, want skip (unlocked)", st)
	}
	if st = ack(ctx, t, c1, tB); st.Role != RoleResolved || st.Resolved != ResolvedUnlocked {
		t.Fatalf("unsynced member after its ack: %+v, want resolved (unlocked)", st)
	}
	if unlockKeyExists(ctx, t, cli) {
		t.Fatal("unlock key left after its last skip was acknowledged")
	}
	if st = report(ctx, t, c1, tB, addC2, 950); st.Seq != 2 || st.Role != RoleWaiting {
		t.Fatalf("its next DDL: %+v, want waiting at seq 2", st)
	}
}

// Unlock --force-remove removes the lock without running the DDL; every
// member skips it, the unsynced one when it reaches it.
func TestUnlockForceRemove(t *testing.T) {
	for _, decided := range []bool{false, true} {
		t.Run(map[bool]string{false: "undecided", true: "decided"}[decided], func(t *testing.T) {
			ctx := testCtx(t)
			cli := newClient(t)
			c1, c2 := coord(t, cli, "s1"), coord(t, cli, "s2")
			mustPutShare(ctx, t, c1, tA, tB)
			mustPutShare(ctx, t, c2, tA)
			report(ctx, t, c1, tA, addC1, 100)
			report(ctx, t, c2, tA, addC1, 100)
			if decided {
				report(ctx, t, c1, tB, addC1, 100)
				if !lockKeyExists(ctx, t, cli) {
					t.Fatal("not decided")
				}
				if err := Unlock(ctx, cli, "", LockID(testTask, target), "", false); err == nil {
					t.Fatal("unlock of a decided lock naming no other owner succeeded")
				}
			}
			if err := Unlock(ctx, cli, "", LockID(testTask, target), "", true); err != nil {
				t.Fatal(err)
			}
			if lockKeyExists(ctx, t, cli) {
				t.Fatal("lock left after --force-remove")
			}
			if !decided { // the unsynced member reaches the DDL now
				report(ctx, t, c1, tB, addC1, 100)
			}
			for _, m := range []struct {
				c *Coordinator
				t Table
			}{{c1, tA}, {c2, tA}, {c1, tB}} {
				if st := state(ctx, t, m.c, m.t); st.Role != RoleSkip || st.Resolved != ResolvedForceRemoved {
					t.Fatalf("%s %s after --force-remove: %+v, want skip (force-removed)", m.c.source, m.t, st)
				}
				if st := ack(ctx, t, m.c, m.t); st.Role != RoleResolved || st.Resolved != ResolvedForceRemoved {
					t.Fatalf("%s %s after its ack: %+v, want resolved (force-removed)", m.c.source, m.t, st)
				}
			}
			if unlockKeyExists(ctx, t, cli) {
				t.Fatal("unlock key left after every skip was acknowledged")
			}
			if locks, err := Locks(ctx, cli, "", ""); err != nil || len(locks) != 0 {
				t.Fatalf("Locks = %+v, %v; want none", locks, err)
			}
			if err := Unlock(ctx, cli, "", LockID(testTask, target), "", true); !errors.Is(err, ErrNoLock) {
				t.Fatalf("second unlock: %v, want ErrNoLock", err)
			}
		})
	}
}

// A malformed value is an error naming the key, from every step and from
// the listing (which still lists the other locks), never a panic.
func TestMalformedValueNamesTheKey(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	c1 := coord(t, cli, "s1")
	mustPutShare(ctx, t, c1, tA, tB)
	report(ctx, t, c1, tA, addC1, 100)
	other := Table{Schema: "shop", Name: "items"}
	if err := c1.PutShare(ctx, other, []Table{tA}); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Report(ctx, Report{Target: other, Table: tA, DDLs: []string{"ALTER TABLE x ADD y INT"}}); err != nil {
		t.Fatal(err)
	}
	k := newKeys("")
	bad := k.info(testTask, target, Member{Source: "s1", Table: tB})
	for _, value := range []string{"{not json", `{"seq":0,"ddls":[]}`} {
		if _, err := cli.Put(ctx, bad, value); err != nil {
			t.Fatal(err)
		}
		_, err := c1.Report(ctx, Report{Target: target, Table: tA, DDLs: []string{addC1}})
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), bad) {
			t.Fatalf("report with %q at %s: %v, want ErrMalformed naming the key", value, bad, err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = c1.Wait(wctx, target, tA, RoleWaiting)
		cancel()
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("wait with a malformed key: %v, want ErrMalformed at once", err)
		}
		locks, err := Locks(ctx, cli, "", testTask)
		var ge *GroupErrors
		if !errors.As(err, &ge) || !strings.Contains(err.Error(), bad) || len(locks) != 1 || locks[0].Target != other.String() {
			t.Fatalf("Locks = %+v, %v; want the other lock and an error naming %s", locks, err, bad)
		}
	}
	if _, err := cli.Put(ctx, k.root()+testTask+"/oops", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := Locks(ctx, cli, "", testTask); !errors.Is(err, ErrBadKey) {
		t.Fatalf("Locks with a key outside the layout: %v, want ErrBadKey", err)
	}
}

func TestLockIDAndKeysRoundTrip(t *testing.T) {
	k := newKeys("/dm/")
	for _, tb := range []Table{{"shop", "orders"}, {"a`b", "c.d"}, {"x/y", "50%"}, {"db", "`"}} {
		id := LockID("task-1.a", tb)
		task, got, err := ParseLockID(id)
		if err != nil || task != "task-1.a" || got != tb {
			t.Errorf("ParseLockID(%q) = %q, %+v, %v", id, task, got, err)
		}
		m := Member{Source: "s-1", Table: tb}
		gk, err := k.parse(k.info("task-1.a", tb, m))
		if err != nil || gk.Kind != segInfo || gk.Target != tb || gk.Table != tb || gk.Source != "s-1" {
			t.Errorf("parse info key of %+v: %+v, %v", tb, gk, err)
		}
	}
	for _, id := range []string{"task", "task-`a`", "task-`a`.`b", "task-`a`.`b`.`c`", "task-`a`x`b`", "a/b-`db`.`t`", "-`db`.`t`"} {
		if _, _, err := ParseLockID(id); !errors.Is(err, ErrBadLockID) {
			t.Errorf("ParseLockID(%q): %v, want ErrBadLockID", id, err)
		}
	}
}

// Unlock --owner on a decided lock whose owner's worker is gone hands the
// DDL to another source's member, but never once the owner began: Begin is
// the fence that keeps the DDL from running twice.
func TestUnlockNamesAnotherOwner(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	c1, c2 := coord(t, cli, "s1"), coord(t, cli, "s2")
	mustPutShare(ctx, t, c1, tA)
	mustPutShare(ctx, t, c2, tA)
	report(ctx, t, c1, tA, addC1, 100)
	report(ctx, t, c2, tA, addC1, 100)
	wantRole(t, "first reporter", state(ctx, t, c1, tA), RoleOwner)
	id := LockID(testTask, target)
	if err := Unlock(ctx, cli, "", id, "s3", false); err == nil {
		t.Fatal("unlock naming a source without a member succeeded")
	}
	if err := Unlock(ctx, cli, "", id, "s2", false); err != nil {
		t.Fatal(err)
	}
	wantRole(t, "new owner", state(ctx, t, c2, tA), RoleOwner)
	wantRole(t, "old owner", state(ctx, t, c1, tA), RoleWaiting)
	if _, err := c1.Begin(ctx, target, tA); !errors.Is(err, ErrWrongRole) {
		t.Fatalf("old owner's Begin: %v, want ErrWrongRole", err)
	}
	if _, err := c2.Begin(ctx, target, tA); err != nil {
		t.Fatal(err)
	}
	if err := Unlock(ctx, cli, "", id, "s1", false); err == nil {
		t.Fatal("unlock moved the lock away from an owner that began")
	}
	locks, err := Locks(ctx, cli, "", testTask)
	if err != nil || len(locks) != 1 || locks[0].Owner != "s2" || locks[0].State != LockExecuting {
		t.Fatalf("Locks = %+v, %v; want s2 executing", locks, err)
	}
}

// WaitSource follows every table of the source with one watch.
func TestWaitSourceSeesEveryTable(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	c1, c2 := coord(t, cli, "s1"), coord(t, cli, "s2")
	mustPutShare(ctx, t, c1, tA, tB)
	mustPutShare(ctx, t, c2, tA)
	report(ctx, t, c1, tA, addC1, 100)
	report(ctx, t, c1, tB, addC1, 100)
	got := make(chan map[Table]LockState, 1)
	go func() {
		states, err := c1.WaitSource(ctx, target, func(m map[Table]LockState) bool {
			return m[tA].Role == RoleOwner && m[tB].Role == RoleWaiting && len(m[tB].WaitingFor) == 1
		})
		if err != nil {
			t.Error(err)
		}
		got <- states
	}()
	report(ctx, t, c2, tA, addC1, 100) // decides
	select {
	case states := <-got:
		if len(states) != 2 || *states[tB].Owner != c1.member(tA) {
			t.Fatalf("states %+v, want both tables of s1, %s owning", states, tA)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("WaitSource did not see the decision")
	}
}

// An owner whose table is dropped before it began hands the lock to the
// next member; an unlocked member that reaches another DDL is a conflict.
func TestDroppedOwnerHandsOverAndSkipMismatch(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	c1, c2 := coord(t, cli, "s1"), coord(t, cli, "s2")
	mustPutShare(ctx, t, c1, tA, tB)
	mustPutShare(ctx, t, c2, tA)
	report(ctx, t, c1, tA, addC1, 100)
	report(ctx, t, c2, tA, addC1, 100)
	report(ctx, t, c1, tB, addC1, 100)
	wantRole(t, "first reporter", state(ctx, t, c1, tA), RoleOwner)
	mustPutShare(ctx, t, c1, tB) // the owner's table is dropped
	wantRole(t, "next member after the owner's drop", state(ctx, t, c1, tB), RoleOwner)
	if _, err := c1.Done(ctx, target, tB); err != nil {
		t.Fatal(err)
	}
	ack(ctx, t, c2, tA)
	if lockKeyExists(ctx, t, cli) {
		t.Fatal("lock left")
	}

	// Next DDL: s1's table never reaches it; unlock; it then reaches another.
	report(ctx, t, c2, tA, addC2, 200)
	if err := Unlock(ctx, cli, "", LockID(testTask, target), "", false); err != nil {
		t.Fatal(err)
	}
	st := report(ctx, t, c1, tB, "ALTER TABLE `shop`.`orders` DROP COLUMN c1", 300)
	wantRole(t, "unlocked member reaching another DDL", st, RoleConflict)
	if !strings.Contains(st.Conflict, addC2) || !strings.Contains(st.Conflict, "DROP COLUMN c1") {
		t.Fatalf("conflict %q does not name both statements", st.Conflict)
	}
}
