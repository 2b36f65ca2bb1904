package shardddl

import (
	"errors"
	"slices"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/pkg/shardschema"
)

// ADD COLUMN reaches the target with the first table that adds it, DROP
// COLUMN with the last that drops it; the others skip theirs. Locks shows
// the optimistic lock while the tables differ.
func TestOptimisticAddAtFirstDropAtLast(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	s1, s2 := coord(t, cli, "s1"), coord(t, cli, "s2")
	optShare(ctx, t, s1, baseModel(t), tA, tB)
	optShare(ctx, t, s2, baseModel(t), tA, tB)
	if locks := optLocks(ctx, t, s1); len(locks) != 0 {
		t.Fatalf("locks of a group whose tables agree: %+v", locks)
	}

	st := optReport(ctx, t, s1, tA, optAddC, 100, baseModel(t), withC(t))
	wantOpt(t, "first ADD COLUMN", st, RoleOwner)
	if !slices.Equal(st.Run, []string{runAddC}) || st.Version != 2 {
		t.Fatalf("first ADD COLUMN runs %q as change %d, want [%s] as 2", st.Run, st.Version, runAddC)
	}
	// A second table adding c while the change is outstanding waits for it.
	wantOpt(t, "second ADD COLUMN before the first ran", optReport(ctx, t, s2, tA, optAddC, 200, baseModel(t), withC(t)), RoleWaiting)
	locks := optLocks(ctx, t, s1)
	if len(locks) != 1 || locks[0].Mode != ModeOptimistic || locks[0].State != LockDecided || locks[0].Owner != "s1" ||
		!slices.Equal(locks[0].DDLs, []string{runAddC}) {
		t.Fatalf("locks while the change is decided: %+v", locks)
	}
	if _, err := s1.ReportOptimistic(ctx, OptReport{Target: target, Table: tA, DDLs: []string{optAddD}, Before: withC(t), After: withCD(t)}); !errors.Is(err, ErrWrongRole) {
		t.Fatalf("next DDL of an owner that has not run its change: %v, want ErrWrongRole", err)
	}
	done := runOwner(ctx, t, s1, tA, st)
	wantOpt(t, "owner after Done", done, RoleResolved)
	if done.Resolved != OptExecuted {
		t.Errorf("owner resolved %q, want %q", done.Resolved, OptExecuted)
	}
	st2 := optStateOf(ctx, t, s2, tA)
	if st2.Role != RoleResolved || st2.Resolved != OptApplied || len(st2.Run) != 0 {
		t.Fatalf("second ADD COLUMN after the first ran: %+v, want resolved applied with nothing to run", st2)
	}
	locks = optLocks(ctx, t, s1)
	if len(locks) != 1 || locks[0].State != LockUnsynced || memberTables(locks[0].Synced) != "s1 `shop_01`.`orders_00`; s2 `shop_01`.`orders_00`" ||
		memberTables(locks[0].Unsynced) != "s1 `shop_01`.`orders_01`; s2 `shop_01`.`orders_01`" {
		t.Fatalf("locks with two tables behind: %+v", locks)
	}
	for i, m := range []struct {
		c *Coordinator
		t Table
	}{{s1, tB}, {s2, tB}} {
		st := optReport(ctx, t, m.c, m.t, optAddC, uint32(300+i), baseModel(t), withC(t))
		if st.Role != RoleResolved || len(st.Run) != 0 {
			t.Fatalf("catching-up ADD COLUMN of %s %s: %+v", m.c.source, m.t, st)
		}
	}
	if locks := optLocks(ctx, t, s1); len(locks) != 0 {
		t.Fatalf("locks once every table has c: %+v", locks)
	}

	// DROP COLUMN: nothing until the last.
	drops := []struct {
		c *Coordinator
		t Table
	}{{s1, tA}, {s2, tB}, {s1, tB}}
	for i, m := range drops {
		st := optReport(ctx, t, m.c, m.t, optDropC, uint32(400+i), withC(t), baseModel(t))
		if st.Role != RoleResolved || len(st.Run) != 0 {
			t.Fatalf("DROP COLUMN %d of %s %s (not the last): %+v", i, m.c.source, m.t, st)
		}
	}
	last := optReport(ctx, t, s2, tA, optDropC, 500, withC(t), baseModel(t))
	wantOpt(t, "last DROP COLUMN", last, RoleOwner)
	if !slices.Equal(last.Run, []string{runDropC}) {
		t.Fatalf("last DROP COLUMN runs %q", last.Run)
	}
	runOwner(ctx, t, s2, tA, last)
	if locks := optLocks(ctx, t, s1); len(locks) != 0 {
		t.Fatalf("locks after the drop: %+v", locks)
	}
	// A replay of a resolved DDL (a restart) changes nothing.
	if st := optReport(ctx, t, coord(t, cli, "s2"), tA, optDropC, 500, withC(t), baseModel(t)); st.Role != RoleResolved || st.Resolved != OptExecuted {
		t.Fatalf("replay of the executed drop: %+v", st)
	}
}

// A worker killed between BeginOptimistic and DoneOptimistic: its
// successor (a new Coordinator on a new client) replays the DDL, sees
// owner-pending, runs only what the target lacks and finishes; one killed
// before Begin runs it all.
func TestOptimisticKilledOwner(t *testing.T) {
	ctx := testCtx(t)
	srv := newCluster(t)
	s1, s2 := coord(t, srv.Client(t), "s1"), coord(t, srv.Client(t), "s2")
	optShare(ctx, t, s1, baseModel(t), tA)
	optShare(ctx, t, s2, baseModel(t), tA)

	st := optReport(ctx, t, s1, tA, optAddC, 100, baseModel(t), withC(t))
	wantOpt(t, "first ADD COLUMN", st, RoleOwner)
	// Killed before Begin: the restarted worker replays and owns it still.
	s1 = coord(t, srv.Client(t), "s1")
	st = optReport(ctx, t, s1, tA, optAddC, 100, baseModel(t), withC(t))
	wantOpt(t, "replay before Begin", st, RoleOwner)
	if _, err := s1.BeginOptimistic(ctx, target, tA, st.Version); err != nil {
		t.Fatal(err)
	}
	// Killed after Begin (the statement ran): the successor must check.
	s1 = coord(t, srv.Client(t), "s1")
	st = optReport(ctx, t, s1, tA, optAddC, 100, baseModel(t), withC(t))
	wantOpt(t, "replay after Begin", st, RoleOwnerPending)
	rest, err := shardschema.Remaining(st.From, st.To, withC(t), target.Schema, target.Name)
	if err != nil || len(rest) != 0 {
		t.Fatalf("Remaining on a target that has c: %q, %v", rest, err)
	}
	rest, err = shardschema.Remaining(st.From, st.To, baseModel(t), target.Schema, target.Name)
	if err != nil || !slices.Equal(rest, []string{runAddC}) {
		t.Fatalf("Remaining on a target without c: %q, %v", rest, err)
	}
	wantOpt(t, "the other table meanwhile", optReport(ctx, t, s2, tA, optAddC, 200, baseModel(t), withC(t)), RoleWaiting)
	if _, err := s2.DoneOptimistic(ctx, target, tA, st.Version); !errors.Is(err, ErrWrongRole) {
		t.Fatalf("Done by a table that does not own the change: %v", err)
	}
	if _, err := s1.DoneOptimistic(ctx, target, tA, st.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.DoneOptimistic(ctx, target, tA, st.Version); err != nil {
		t.Fatalf("Done again (a retry): %v", err)
	}
	if st := optStateOf(ctx, t, s2, tA); st.Role != RoleResolved {
		t.Fatalf("the other table after Done: %+v", st)
	}
	resp, err := srv.Client(t).Get(ctx, newKeys("").group(testTask, target)+"opt/exec")
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("opt/exec after Done: %v, %v", resp.Kvs, err)
	}
}

// A step decided from a stale read fails its guards and is decided again:
// two reports read the same group; the one that commits second must not
// reuse the first's decision.
func TestOptimisticStaleReadRetries(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	s1, s2 := coord(t, cli, "s1"), coord(t, cli, "s2")
	optShare(ctx, t, s1, baseModel(t), tA)
	optShare(ctx, t, s2, baseModel(t), tA)
	// Both reports written, neither decided: write them as ReportOptimistic
	// does, without its settle.
	for _, c := range []*Coordinator{s1, s2} {
		c := c
		err := step(ctx, cli, c.keys, testTask, target, "test report", func(g *group) ([]clientv3.Cmp, []clientv3.Op, error) {
			v := g.optTables[c.member(tA)].v
			v.Report = &OptReportValue{Seq: 1, DDLs: []string{optAddC}, Before: baseModel(t), After: withC(t), State: OptNew}
			return g.guards(), []clientv3.Op{mustJSONOp(g.optTableKey(c.member(tA)), v)}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	stale, err := readGroup(ctx, cli, s1.keys, testTask, target)
	if err != nil {
		t.Fatal(err)
	}
	ops, what := stale.optPlan(s1.keys, "s1")
	if len(ops) == 0 {
		t.Fatal("no decision for two undecided reports")
	}
	// Another worker decides meanwhile.
	if _, err := s2.StateOptimistic(ctx, target, tA); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Txn(ctx).If(stale.guards()...).Then(withVersion(stale, what, ops)...).Commit()
	if err != nil {
		t.Fatal(err)
	}
	if resp.Succeeded {
		t.Fatalf("the decision %q from a stale read committed", what)
	}
	// Exactly one owner, exactly one change.
	a, b := optStateOf(ctx, t, s1, tA), optStateOf(ctx, t, s2, tA)
	owners := 0
	for _, st := range []OptState{a, b} {
		if st.Role == RoleOwner {
			owners++
			if !slices.Equal(st.Run, []string{runAddC}) {
				t.Errorf("owner runs %q", st.Run)
			}
		}
	}
	if owners != 1 {
		t.Fatalf("%d owners: %+v / %+v", owners, a, b)
	}
}
