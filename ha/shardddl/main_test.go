package shardddl

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/tests/etcdtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testTask = "merge"

var target = Table{Schema: "shop", Name: "orders"}

// newClient starts an embedded etcd and returns a client on it.
func newClient(t *testing.T) *clientv3.Client {
	t.Helper()
	return etcdtest.Start(t).Client(t)
}

// coord is a new Coordinator of testTask for source: a worker, or the same
// worker after a restart.
func coord(t *testing.T, cli *clientv3.Client, source string) *Coordinator {
	t.Helper()
	c, err := New(cli, "", testTask, source, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func tbl(schema, name string) Table { return Table{Schema: schema, Name: name} }

func mustPutShare(ctx context.Context, t *testing.T, c *Coordinator, tables ...Table) {
	t.Helper()
	if err := c.PutShare(ctx, target, tables); err != nil {
		t.Fatalf("PutShare of %s: %v", c.source, err)
	}
}

func report(ctx context.Context, t *testing.T, c *Coordinator, table Table, ddl string, pos uint32) LockState {
	t.Helper()
	st, err := c.Report(ctx, Report{Target: target, Table: table, DDLs: []string{ddl},
		Location: Location{Name: "mariadb-bin.000001", Pos: pos}})
	if err != nil {
		t.Fatalf("Report of %s %s: %v", c.source, table, err)
	}
	return st
}

func state(ctx context.Context, t *testing.T, c *Coordinator, table Table) LockState {
	t.Helper()
	st, err := c.State(ctx, target, table)
	if err != nil {
		t.Fatalf("State of %s %s: %v", c.source, table, err)
	}
	return st
}

func wantRole(t *testing.T, what string, st LockState, want Role) {
	t.Helper()
	if st.Role != want {
		t.Fatalf("%s: role %s, want %s (state %+v)", what, st.Role, want, st)
	}
}

// lockKeyExists says whether the group's lock key exists.
func lockKeyExists(ctx context.Context, t *testing.T, cli *clientv3.Client) bool {
	t.Helper()
	resp, err := cli.Get(ctx, newKeys("").lock(testTask, target))
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Kvs) == 1
}

// unlockKeyExists says whether the group's unlock key exists.
func unlockKeyExists(ctx context.Context, t *testing.T, cli *clientv3.Client) bool {
	t.Helper()
	resp, err := cli.Get(ctx, newKeys("").group(testTask, target)+segUnlock)
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Kvs) == 1
}

func ack(ctx context.Context, t *testing.T, c *Coordinator, table Table) LockState {
	t.Helper()
	st, err := c.Ack(ctx, target, table)
	if err != nil {
		t.Fatalf("Ack of %s %s: %v", c.source, table, err)
	}
	return st
}

func withPrefixCount() []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
}
