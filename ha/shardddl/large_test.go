package shardddl

import (
	"fmt"
	"testing"
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
