package shardddl

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The two comparisons of group.guards fail after any creation, change or
// deletion of a key of the group (deletions carry a version put), and
// after RemoveTask.
func TestGuardsSeeEveryChange(t *testing.T) {
	ctx := testCtx(t)
	cli := newClient(t)
	c := coord(t, cli, "s1")
	mustPutShare(ctx, t, c, tA, tB)
	report(ctx, t, c, tA, addC1, 100)
	g0, err := readGroup(ctx, cli, c.keys, testTask, target)
	if err != nil {
		t.Fatal(err)
	}
	if !guardsHold(ctx, t, cli, g0) {
		t.Fatal("guards fail on an unchanged group")
	}
	infoB := c.keys.info(testTask, target, c.member(tB))
	changes := []struct {
		name string
		do   func() error
	}{
		{"create", func() error { _, err := report2(ctx, c, tB); return err }},
		{"change", func() error { return c.PutShare(ctx, target, []Table{tA, tB, tbl("shop_02", "orders_00")}) }},
		{"delete", func() error { return c.PutShare(ctx, target, []Table{tA, tB}) }},
		{"delete by a step", func() error {
			return step(ctx, cli, c.keys, testTask, target, "test", func(g *group) ([]clientv3.Cmp, []clientv3.Op, error) {
				return nil, []clientv3.Op{clientv3.OpDelete(infoB)}, nil
			})
		}},
		{"remove task", func() error { return RemoveTask(ctx, cli, "", testTask) }},
	}
	for _, ch := range changes {
		g, err := readGroup(ctx, cli, c.keys, testTask, target)
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.do(); err != nil {
			t.Fatalf("%s: %v", ch.name, err)
		}
		if guardsHold(ctx, t, cli, g) {
			t.Errorf("guards hold after %s", ch.name)
		}
	}
}

func report2(ctx context.Context, c *Coordinator, table Table) (LockState, error) {
	return c.Report(ctx, Report{Target: target, Table: table, DDLs: []string{addC2}})
}

// guardsHold runs a transaction guarded by g.guards that writes nothing
// of the group.
func guardsHold(ctx context.Context, t *testing.T, cli *clientv3.Client, g *group) bool {
	t.Helper()
	resp, err := cli.Txn(ctx).If(g.guards()...).Then(clientv3.OpPut("/elsewhere", "x")).Commit()
	if err != nil {
		t.Fatal(err)
	}
	return resp.Succeeded
}
