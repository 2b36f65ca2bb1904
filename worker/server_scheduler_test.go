package worker

import (
	"testing"
	"time"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// TestServerScheduler: a worker started with --scheduler leads alone, binds
// a source that has a config and no worker to itself, shows the scheduler
// in its status, and leads again with its new lease after losing the old
// one. Without --scheduler the status has no scheduler object.
func TestServerScheduler(t *testing.T) {
	etcd := etcdtest.Start(t)
	e := &serverEnv{swEnv: &swEnv{t: t, etcd: etcd, master: ha.NewStore(etcd.DirectClient(t), "/dm"),
		factory: newSWFactory(), metrics: NewMetrics()}}
	if st := NewServer(ServerConfig{Name: "w9", Prefix: "/dm"}).Status(); st.Scheduler != nil {
		t.Fatalf("status of a worker without --scheduler has a scheduler: %+v", st.Scheduler)
	}
	e.run(ServerConfig{Client: etcd.Client(t), Scheduler: true})
	if _, err := e.master.PutSourceConfig(e.ctx(), testSourceConfig()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the scheduler binds the source to the only worker", func() bool {
		b, found, _, err := e.master.GetBound(e.ctx(), "w1")
		st := e.srv.Status().Scheduler
		return err == nil && found && b.Source == testSource && st != nil && st.IsLeader && st.Leader == "w1" &&
			st.Sources[testSource] == "w1" && st.Moves == 1
	})
	testutil.WaitFor(t, 10*time.Second, "the worker runs the bound source", func() bool {
		return e.srv.Status().Source == testSource
	})
	// The lease is revoked behind the worker's back: the worker
	// re-registers and its new scheduler, on the new lease, leads again.
	if _, err := e.master.Client().Revoke(e.ctx(), e.keepaliveLease()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 15*time.Second, "a new registration leads again", func() bool {
		st := e.srv.Status().Scheduler
		return st != nil && st.IsLeader && e.keepaliveLease() != 0
	})
}
