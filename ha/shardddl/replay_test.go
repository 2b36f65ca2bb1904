package shardddl

import (
	"slices"
	"testing"
)

// TestReplayOfEarlierDDL: a table that resolved DDL 1 and reached DDL 2
// reports DDL 1 again (a restart from a checkpoint before both): nothing
// changes, and the state carries DDL 2's later location, which tells the
// sync unit that DDL 1 is a replay.
func TestReplayOfEarlierDDL(t *testing.T) {
	ctx, cli := testCtx(t), newClient(t)
	c := coord(t, cli, "mysql-01")
	a := tbl("s1", "t1")
	mustPutShare(ctx, t, c, a)
	wantRole(t, "alone", report(ctx, t, c, a, "ALTER 1", 100), RoleOwner)
	if _, err := c.Begin(ctx, target, a); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Done(ctx, target, a); err != nil {
		t.Fatal(err)
	}
	st := report(ctx, t, c, a, "ALTER 2", 200)
	wantRole(t, "next DDL", st, RoleOwner)
	if st.Seq != 2 {
		t.Fatalf("seq %d, want 2", st.Seq)
	}
	replay := report(ctx, t, c, a, "ALTER 1", 100)
	if replay.Seq != 2 || !slices.Equal(replay.DDLs, []string{"ALTER 2"}) || replay.Location.Pos != 200 {
		t.Fatalf("replay of DDL 1 changed the info or hid its location: %+v", replay)
	}
	if !(Location{Name: "mariadb-bin.000001", Pos: 100}).Before(replay.Location) {
		t.Fatal("the replayed location is not before the info's")
	}
}

// TestReplayOfReplacedDDL: a DDL replaced by handle-error and resolved is
// reported again with its original text at the same location (a restart):
// that is a replay, not the table's next DDL.
func TestReplayOfReplacedDDL(t *testing.T) {
	ctx, cli := testCtx(t), newClient(t)
	c := coord(t, cli, "mysql-01")
	a, b := tbl("s1", "t1"), tbl("s1", "t2")
	mustPutShare(ctx, t, c, a, b)
	report(ctx, t, c, a, "ADD c INT", 100)
	wantRole(t, "differs", report(ctx, t, c, b, "ADD c BIGINT", 150), RoleConflict)
	if st := state(ctx, t, c, b); !st.Differs {
		t.Fatalf("the differing member is not marked: %+v", st)
	}
	if st := state(ctx, t, c, a); st.Differs {
		t.Fatalf("the first member is marked as differing: %+v", st)
	}
	wantRole(t, "replaced", report(ctx, t, c, b, "ADD c INT", 150), RoleWaiting)
	wantRole(t, "owner", state(ctx, t, c, a), RoleOwner)
	if _, err := c.Begin(ctx, target, a); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Done(ctx, target, a); err != nil {
		t.Fatal(err)
	}
	wantRole(t, "skip", state(ctx, t, c, b), RoleSkip)
	ack(ctx, t, c, b)
	st := report(ctx, t, c, b, "ADD c BIGINT", 150)
	wantRole(t, "replay of the replaced DDL", st, RoleResolved)
	if st.Seq != 1 {
		t.Fatalf("the replay started seq %d", st.Seq)
	}
}
