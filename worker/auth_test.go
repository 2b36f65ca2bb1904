package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/etcdutil"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// TestServerWithEtcdAuth: with etcd auth on and a user whose role covers
// only the prefix, the worker registers, keeps its lease alive, follows its
// bound source and tasks, publishes status, and shuts down revoking its lease.
func TestServerWithEtcdAuth(t *testing.T) {
	// Tokens expire every second: the worker must renew them.
	etcd := etcdtest.StartWith(t, etcdtest.Options{AuthTokenTTL: time.Second})
	etcdtest.EnableAuth(t, etcd.Client(t), "/dm", "dmworker", "worker-Pw-77")
	cli, err := etcdutil.Connect(context.Background(), etcdutil.Options{
		Endpoints: etcd.Endpoints(), Username: "dmworker", Password: "worker-Pw-77", Prefix: "/dm",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	e := &serverEnv{swEnv: &swEnv{
		t: t, etcd: etcd,
		// The master writes as the same prefix-limited user.
		master:  ha.NewStore(etcd.AuthClient(t, "dmworker", "worker-Pw-77"), "/dm"),
		factory: newSWFactory(),
		metrics: NewMetrics(),
	}}
	e.run(ServerConfig{Client: cli})

	testutil.Eventually(t, 10*time.Second, "registered with a keepalive", e.checkRegistered)
	lease := e.keepaliveLease()
	e.bind()
	e.putTask("t1", stage.Running)
	testutil.Eventually(t, 10*time.Second, "bound and t1 running", func() error {
		return errors.Join(e.checkBound(testSource), e.checkSubtaskStage("t1", stage.Running))
	})
	e.setStage("t1", stage.Paused)
	testutil.Eventually(t, 10*time.Second, "t1 paused", func() error { return e.checkSubtaskStage("t1", stage.Paused) })
	testutil.Eventually(t, 10*time.Second, "status published", func() error {
		return e.checkPublished(func(ws WorkerStatus) bool {
			return ws.Source == testSource && len(ws.SubTasks) == 1 && ws.SubTasks[0].Stage == stage.Paused
		})
	})
	// The lease outlives several lease TTLs and auth token lifetimes:
	// keepalives pass auth with renewed tokens.
	time.Sleep(4 * time.Second) // not synchronisation: the time the lease and tokens must survive
	if got := e.keepaliveLease(); got != lease {
		t.Fatalf("keepalive lease changed from %x to %x: keepalives failed", lease, got)
	}
	// The watches and reconciles still work after the tokens expired.
	e.setStage("t1", stage.Running)
	testutil.Eventually(t, 10*time.Second, "t1 running again", func() error { return e.checkSubtaskStage("t1", stage.Running) })

	e.stop(15 * time.Second)
	if e.keepaliveLease() != 0 {
		t.Fatal("keepalive key still there after shutdown: the lease was not revoked")
	}
}
