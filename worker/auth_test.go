package worker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/etcdutil"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/tests/etcdtest"
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

	within(t, 10*time.Second, "registered with a keepalive", func() bool {
		infos, _, err := e.master.GetWorkerInfos(e.ctx())
		return err == nil && infos["w1"].Addr == "127.0.0.1:1" && e.keepaliveLease() != 0
	})
	lease := e.keepaliveLease()
	e.bind()
	e.putTask("t1", stage.Running)
	within(t, 10*time.Second, "bound and t1 running", func() bool {
		return e.srv.Status().Source == testSource && e.subtaskStage("t1") == stage.Running
	})
	e.setStage("t1", stage.Paused)
	within(t, 10*time.Second, "t1 paused", func() bool { return e.subtaskStage("t1") == stage.Paused })
	within(t, 10*time.Second, "status published", func() bool {
		st, _, err := e.master.GetStatuses(e.ctx())
		if err != nil {
			return false
		}
		var ws WorkerStatus
		return json.Unmarshal(st["w1"], &ws) == nil && ws.Source == testSource && len(ws.SubTasks) == 1 && ws.SubTasks[0].Stage == stage.Paused
	})
	// The lease outlives several lease TTLs and auth token lifetimes:
	// keepalives pass auth with renewed tokens.
	time.Sleep(4 * time.Second) // not synchronisation: the time the lease and tokens must survive
	if got := e.keepaliveLease(); got != lease {
		t.Fatalf("keepalive lease changed from %x to %x: keepalives failed", lease, got)
	}
	// The watches and reconciles still work after the tokens expired.
	e.setStage("t1", stage.Running)
	within(t, 10*time.Second, "t1 running again", func() bool { return e.subtaskStage("t1") == stage.Running })

	e.cancel()
	select {
	case err := <-e.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("server did not stop")
	}
	e.done <- nil // for Cleanup
	if e.keepaliveLease() != 0 {
		t.Fatal("keepalive key still there after shutdown: the lease was not revoked")
	}
}
