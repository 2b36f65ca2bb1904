package shardddl

import (
	"context"
	"fmt"
	"slices"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A group larger than etcd's --max-txn-ops (128): 16 schemas x 16 tables
// on one source. Every step stays within the limit whatever the group's
// size (the decision compares 2 revisions, not one per key), including
// unlock --force-remove of every member and a share that drops most of
// them at once.
func TestGroupLargerThanMaxTxnOps(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	c := coord(t, cli, "s1")
	var tables []Table
	for db := 1; db <= 16; db++ {
		for tb := range 16 {
			tables = append(tables, tbl(fmt.Sprintf("shop_%02d", db), fmt.Sprintf("orders_%02d", tb)))
		}
	}
	mustPutShare(ctx, t, c, tables...)
	for _, tb := range tables[:len(tables)-1] {
		report(ctx, t, c, tb, addC1, 100)
	}
	// The last report decides: one transaction over 256 infos.
	wantRole(t, "last report", report(ctx, t, c, tables[len(tables)-1], addC1, 100), RoleWaiting)
	wantRole(t, "owner", state(ctx, t, c, tables[0]), RoleOwner)
	if err := Unlock(ctx, cli, "", LockID(testTask, target), "", true); err != nil {
		t.Fatalf("force-remove of a 256-member lock: %v", err)
	}
	wantRole(t, "member after --force-remove", state(ctx, t, c, tables[5]), RoleSkip)
	// Drop 232 tables at once: written in steps of at most 100 deletions.
	mustPutShare(ctx, t, c, tables[:24]...)
	resp, err := cli.Get(ctx, newKeys("").sourceInfos(testTask, target, "s1"), withPrefixCount()...)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 24 {
		t.Fatalf("%d infos left after dropping 232 tables, want 24", resp.Count)
	}
	wantRole(t, "member kept", state(ctx, t, c, tables[5]), RoleSkip)
	mustPutShare(ctx, t, c)
	if unlockKeyExists(ctx, t, cli) {
		t.Fatal("unlock key left after the source left the group")
	}
	if locks, err := Locks(ctx, cli, "", ""); err != nil || len(locks) != 0 {
		t.Fatalf("Locks = %+v, %v after the source left the group", locks, err)
	}
}

// An optimistic group larger than etcd's --max-txn-ops: 144 tables on one
// source. Its share, a rename every table makes (one convergence of 144
// conflicts), a --force-remove of 144 strict conflicts and a share that
// drops 130 tables are all written in steps that each stay within it.
func TestOptimisticGroupLargerThanMaxTxnOps(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	c := coord(t, cli, "s1")
	var tables []Table
	for db := 1; db <= 16; db++ {
		for tb := range 9 {
			tables = append(tables, tbl(fmt.Sprintf("shop_%02d", db), fmt.Sprintf("orders_%02d", tb)))
		}
	}
	optShare(ctx, t, c, baseModel(t), tables...)
	optKeys := func() int64 {
		t.Helper()
		resp, err := cli.Get(ctx, newKeys("").group(testTask, target)+"opt/table/", withPrefixCount()...)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	if n := optKeys(); n != int64(len(tables)) {
		t.Fatalf("%d opt/table keys after the share of %d tables", n, len(tables))
	}
	renamed := model(t, "id int(11) not null", "b int(11)")
	const rename = "ALTER TABLE `shop`.`orders` RENAME COLUMN `a` TO `b`"
	// 143 reports written as ReportOptimistic writes them, 100 a
	// transaction (one call each would read the group 143 times: the test
	// is about transaction sizes), decided in a few batched decisions.
	putOptReports(ctx, t, c, tables[:len(tables)-1], OptReportValue{DDLs: []string{rename}, Before: baseModel(t), After: renamed})
	if st := optStateOf(ctx, t, c, tables[7]); st.Role != RoleConflict || !st.Wait {
		t.Fatalf("a renamed table before the last: %+v", st)
	}
	st := optReport(ctx, t, c, tables[len(tables)-1], rename, 100, baseModel(t), renamed)
	wantOpt(t, "the last rename", st, RoleOwner)
	if !slices.Equal(st.Run, []string{rename}) {
		t.Fatalf("converged rename runs %q", st.Run)
	}
	wantOpt(t, "a renamed table before Done", optStateOf(ctx, t, c, tables[120]), RoleWaiting)
	runOwner(ctx, t, c, tables[len(tables)-1], st)
	states, err := c.StatesOptimistic(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	for tb, st := range states {
		if st.Role != RoleResolved {
			t.Fatalf("%s after the rename ran: %+v", tb, st)
		}
	}
	textB := model(t, "id int(11) not null", "b varchar(10)")
	putOptReports(ctx, t, c, tables, OptReportValue{DDLs: []string{"ALTER TABLE `shop`.`orders` MODIFY `b` VARCHAR(10)"},
		Before: renamed, After: textB, Strict: true})
	states, err = c.StatesOptimistic(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	for tb, st := range states {
		if st.Role != RoleConflict || st.Wait {
			t.Fatalf("strict conflict of %s: %+v", tb, st)
		}
	}
	if err := Unlock(ctx, cli, "", LockID(testTask, target), "", true); err != nil {
		t.Fatalf("force-remove of %d conflicts: %v", len(tables), err)
	}
	if st := optStateOf(ctx, t, c, tables[130]); st.Role != RoleResolved || st.Resolved != OptForceRemoved {
		t.Fatalf("a table past the first step of the force-remove: %+v", st)
	}
	states = optShare(ctx, t, c, renamed, tables[:14]...)
	if n := optKeys(); n != 14 || len(states) != 14 {
		t.Fatalf("%d opt/table keys, %d states after dropping 130 tables", n, len(states))
	}
	if locks := optLocks(ctx, t, c); len(locks) != 0 {
		t.Fatalf("locks: %+v", locks)
	}
}

// putOptReports writes r as the next report of each table, as
// ReportOptimistic does, at most maxOptPutsPerTxn a transaction, without
// deciding.
func putOptReports(ctx context.Context, t *testing.T, c *Coordinator, tables []Table, r OptReportValue) {
	t.Helper()
	for len(tables) > 0 {
		n := min(len(tables), maxOptPutsPerTxn)
		batch := tables[:n]
		tables = tables[n:]
		err := step(ctx, c.cli, c.keys, testTask, target, "test reports", func(g *group) ([]clientv3.Cmp, []clientv3.Op, error) {
			var ops []clientv3.Op
			for _, tb := range batch {
				kv := g.optTables[c.member(tb)]
				v := kv.v
				next := r
				next.Seq, next.State = 1, OptNew
				if v.Report != nil {
					next.Seq = v.Report.Seq + 1
				}
				v.Report = &next
				ops = append(ops, mustJSONOp(kv.key, v))
			}
			return g.guards(), ops, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
