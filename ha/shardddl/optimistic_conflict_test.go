package shardddl

import (
	"errors"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

const (
	optModifyText = "ALTER TABLE `shop`.`orders` MODIFY COLUMN `a` VARCHAR(10)"
	optAddCText   = "ALTER TABLE `shop`.`orders` ADD COLUMN `c` VARCHAR(10)"
	optRenameAB   = "ALTER TABLE `shop`.`orders` RENAME COLUMN `a` TO `b`"
	optRenameAX   = "ALTER TABLE `shop`.`orders` RENAME COLUMN `a` TO `x`"
)

func wantConflict(t *testing.T, what string, st OptState, wait bool, says ...string) {
	t.Helper()
	wantOpt(t, what, st, RoleConflict)
	if st.Wait != wait {
		t.Errorf("%s: wait %v, want %v (%s)", what, st.Wait, wait, st.Conflict)
	}
	for _, s := range says {
		if !strings.Contains(st.Conflict, s) {
			t.Errorf("%s: conflict %q does not say %q", what, st.Conflict, s)
		}
	}
}

// Incompatible changes are conflicts naming the tables and statements;
// nothing is applied. In non-strict mode a change every table makes
// resolves (DM's convergence), once, by the last table's statements.
func TestOptimisticConflicts(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	s1, s2 := coord(t, cli, "s1"), coord(t, cli, "s2")
	optShare(ctx, t, s1, baseModel(t), tA)
	optShare(ctx, t, s2, baseModel(t), tA)

	t.Run("same column, different types", func(t *testing.T) {
		st := optReport(ctx, t, s1, tA, optAddC, 100, baseModel(t), withC(t))
		runOwner(ctx, t, s1, tA, st)
		textC := model(t, "id int(11) not null", "a int(11)", "c varchar(10)")
		st = optReport(ctx, t, s2, tA, optAddCText, 200, baseModel(t), textC)
		wantConflict(t, "ADD c VARCHAR after ADD c INT", st, true,
			"s2 `shop_01`.`orders_00` reached [\""+optAddCText+"\"]", "column `c` of s1 `shop_01`.`orders_00` and s2 `shop_01`.`orders_00`",
			"int(11) and varchar(10) are on no common widening ladder", "s1 `shop_01`.`orders_00` last reached [\""+optAddC+"\"]")
		locks := optLocks(ctx, t, s1)
		if len(locks) != 1 || locks[0].State != LockConflict || locks[0].Conflict != st.Conflict {
			t.Fatalf("locks with a conflict: %+v", locks)
		}
		// handle-error replace: the same column as the others.
		st = optReport(ctx, t, s2, tA, optAddC, 200, baseModel(t), withC(t))
		if st.Role != RoleResolved || len(st.Run) != 0 {
			t.Fatalf("replaced DDL: %+v", st)
		}
		if st.Seq != 1 {
			t.Errorf("a replacement kept seq %d, want 1", st.Seq)
		}
	})

	cd := withC(t)
	textA := model(t, "id int(11) not null", "a varchar(10)", "c int(11)")
	t.Run("type change made by every table", func(t *testing.T) {
		st := optReport(ctx, t, s1, tA, optModifyText, 300, cd, textA)
		wantConflict(t, "first MODIFY to another ladder", st, true, "changes `a` int(11) NULL DEFAULT NULL to `a` varchar(10)")
		st = optReport(ctx, t, s2, tA, optModifyText, 400, cd, textA)
		wantOpt(t, "last MODIFY", st, RoleOwner)
		if !slices.Equal(st.Run, []string{optModifyText}) {
			t.Fatalf("converged change runs %q, want the table's own statement", st.Run)
		}
		wantOpt(t, "first MODIFY while the last runs it", optStateOf(ctx, t, s1, tA), RoleWaiting)
		runOwner(ctx, t, s2, tA, st)
		if st := optStateOf(ctx, t, s1, tA); st.Role != RoleResolved || st.Resolved != OptConverged {
			t.Fatalf("first MODIFY after the change ran: %+v", st)
		}
	})

	renamedB := model(t, "id int(11) not null", "b varchar(10)", "c int(11)")
	renamedX := model(t, "id int(11) not null", "x varchar(10)", "c int(11)")
	t.Run("renames to different names", func(t *testing.T) {
		st := optReport(ctx, t, s1, tA, optRenameAB, 500, textA, renamedB)
		wantConflict(t, "rename a to b", st, true, "drops column `a`", "adds column `b`")
		st = optReport(ctx, t, s2, tA, optRenameAX, 600, textA, renamedX)
		wantConflict(t, "rename a to x while a to b waits", st, false,
			"held at its own conflicting change", "shard-ddl-lock unlock --force-remove")
		if _, err := Locks(ctx, cli, "", testTask); err != nil {
			t.Fatal(err)
		}
		// Unlock without --force-remove has nothing to decide.
		if err := Unlock(ctx, cli, "", LockID(testTask, target), "", false); !errors.Is(err, ErrConflict) {
			t.Fatalf("Unlock of a conflicting optimistic lock: %v, want ErrConflict", err)
		}
		// The second replaced by the same rename: both converge.
		st = optReport(ctx, t, s2, tA, optRenameAB, 600, textA, renamedB)
		wantOpt(t, "rename a to b on both", st, RoleOwner)
		if !slices.Equal(st.Run, []string{optRenameAB}) {
			t.Fatalf("converged rename runs %q", st.Run)
		}
		runOwner(ctx, t, s2, tA, st)
		wantOpt(t, "first rename after it ran", optStateOf(ctx, t, s1, tA), RoleResolved)
	})

	t.Run("NOT NULL without default", func(t *testing.T) {
		nn := model(t, "id int(11) not null", "b varchar(10)", "c int(11)", "n int(11) not null")
		st := optReport(ctx, t, s1, tA, "ALTER TABLE `shop`.`orders` ADD COLUMN n INT NOT NULL", 700, renamedB, nn)
		wantConflict(t, "ADD NOT NULL without default", st, true, "NOT NULL without a default and s2 `shop_01`.`orders_00` has no such column")
		// Dropped by the operator: the table counts with its schema before.
		if err := Unlock(ctx, cli, "", LockID(testTask, target), "", true); err != nil {
			t.Fatal(err)
		}
		if st := optStateOf(ctx, t, s1, tA); st.Role != RoleResolved || st.Resolved != OptForceRemoved {
			t.Fatalf("after unlock --force-remove: %+v", st)
		}
		if locks := optLocks(ctx, t, s1); len(locks) != 0 {
			t.Fatalf("locks after --force-remove: %+v", locks)
		}
	})

	t.Run("dropped column added back", func(t *testing.T) {
		noC := model(t, "id int(11) not null", "b varchar(10)")
		st := optReport(ctx, t, s1, tA, optDropC, 800, renamedB, noC)
		if st.Role != RoleResolved || len(st.Run) != 0 {
			t.Fatalf("DROP c by one of two: %+v", st)
		}
		st = optReport(ctx, t, s1, tA, optAddC, 900, noC, renamedB)
		wantConflict(t, "ADD c back while the target keeps it", st, false, "adds back column `c`")
	})
}

// strict-optimistic-shard-mode: any conflict is an error at once, even one
// the other tables could resolve by making the same change.
func TestOptimisticStrict(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	s1, s2 := coord(t, cli, "s1"), coord(t, cli, "s2")
	optShare(ctx, t, s1, baseModel(t), tA)
	optShare(ctx, t, s2, baseModel(t), tA)
	textA := model(t, "id int(11) not null", "a varchar(10)")
	st, err := s1.ReportOptimistic(ctx, OptReport{Target: target, Table: tA, DDLs: []string{optModifyText},
		Before: baseModel(t), After: textA, Strict: true, Location: Location{Name: "mariadb-bin.000001", Pos: 10}})
	if err != nil {
		t.Fatal(err)
	}
	wantConflict(t, "strict conflict", st, false, "strict-optimistic-shard-mode", optModifyText)
	locks := optLocks(ctx, t, s1)
	if len(locks) != 1 || locks[0].State != LockConflict || !strings.Contains(locks[0].Conflict, "strict") {
		t.Fatalf("locks: %+v", locks)
	}
	// The other table making the same change does not resolve it.
	st, err = s2.ReportOptimistic(ctx, OptReport{Target: target, Table: tA, DDLs: []string{optModifyText},
		Before: baseModel(t), After: textA, Strict: true, Location: Location{Name: "mariadb-bin.000001", Pos: 20}})
	if err != nil {
		t.Fatal(err)
	}
	wantConflict(t, "second strict conflict", st, false)
	wantConflict(t, "first strict conflict after the second", optStateOf(ctx, t, s1, tA), false)
}

// A table that leaves the group (its source's share without it) takes its
// schema out of the join: a DROP COLUMN the others made runs then, owned
// by a table of the source that left it.
func TestOptimisticMemberLeaves(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	s1, s2 := coord(t, cli, "s1"), coord(t, cli, "s2")
	optShare(ctx, t, s1, withC(t), tA, tB)
	optShare(ctx, t, s2, withC(t), tA)
	for i, m := range []struct {
		c *Coordinator
		t Table
	}{{s2, tA}, {s1, tA}} {
		if st := optReport(ctx, t, m.c, m.t, optDropC, uint32(10+i), withC(t), baseModel(t)); st.Role != RoleResolved || len(st.Run) != 0 {
			t.Fatalf("DROP c %d: %+v", i, st)
		}
	}
	// s1's tB, the only one with c left, is dropped upstream.
	states := optShare(ctx, t, s1, baseModel(t), tA)
	st := states[tA]
	wantOpt(t, "s1's table left in the group", st, RoleOwner)
	if !slices.Equal(st.Run, []string{runDropC}) {
		t.Fatalf("pending drop runs %q", st.Run)
	}
	runOwner(ctx, t, s1, tA, st)
	if locks := optLocks(ctx, t, s1); len(locks) != 0 {
		t.Fatalf("locks after the drop: %+v", locks)
	}
	// The owner of an outstanding change leaving hands it on.
	st = optReport(ctx, t, s2, tA, optAddC, 30, baseModel(t), withC(t))
	wantOpt(t, "ADD c", st, RoleOwner)
	if _, err := s2.ShareOptimistic(ctx, target, nil); err != nil {
		t.Fatal(err)
	}
	st = optStateOf(ctx, t, s1, tA)
	wantOpt(t, "the last table after the owner's source left", st, RoleOwner)
	if !slices.Equal(st.Run, []string{runAddC}) {
		t.Fatalf("handed change runs %q", st.Run)
	}
	// And Unlock --owner moves it back when s2 returns.
	optShare(ctx, t, s2, withC(t), tA)
	if err := Unlock(ctx, cli, "", LockID(testTask, target), "s2", false); err != nil {
		t.Fatal(err)
	}
	wantOpt(t, "s2 after unlock --owner s2", optStateOf(ctx, t, s2, tA), RoleOwner)
	if err := Unlock(ctx, cli, "", LockID(testTask, target), "", false); err == nil {
		t.Fatal("Unlock of a decided optimistic change without --owner succeeded")
	}
}

// RemoveTask removes the opt/ keys with the rest; a task keeps one mode.
func TestOptimisticRemoveTaskAndModes(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	s1 := coord(t, cli, "s1")
	optShare(ctx, t, s1, baseModel(t), tA)
	optReport(ctx, t, s1, tA, optAddC, 10, baseModel(t), withC(t))
	if err := RemoveTask(ctx, cli, "", testTask); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, newKeys("").task(testTask), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("keys of the task after RemoveTask: %d, %v", resp.Count, err)
	}
	mustPutShare(ctx, t, s1, tA)
	report(ctx, t, s1, tA, addC1, 10)
	if _, err := s1.ShareOptimistic(ctx, target, map[Table]*sqlschema.Table{tA: baseModel(t)}); !errors.Is(err, ErrMixedModes) {
		t.Fatalf("optimistic share of a pessimistic group: %v, want ErrMixedModes", err)
	}
	if err := RemoveTask(ctx, cli, "", testTask); err != nil {
		t.Fatal(err)
	}
	optShare(ctx, t, s1, baseModel(t), tA)
	if _, err := s1.Report(ctx, Report{Target: target, Table: tA, DDLs: []string{addC1}}); !errors.Is(err, ErrMixedModes) {
		t.Fatalf("pessimistic report in an optimistic group: %v, want ErrMixedModes", err)
	}
}
