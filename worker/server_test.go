package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
)

// serverEnv runs a Server with test units against embedded etcd.
type serverEnv struct {
	*swEnv
	srv    *Server
	cancel context.CancelFunc
	done   chan error
}

func startServer(t *testing.T) *serverEnv {
	t.Helper()
	etcd := etcdtest.Start(t)
	e := &serverEnv{swEnv: &swEnv{
		t: t, etcd: etcd,
		master:  ha.NewStore(etcd.DirectClient(t), "/dm"),
		factory: newSWFactory(),
		metrics: NewMetrics(),
	}}
	e.run(ServerConfig{Client: etcd.Client(t)})
	return e
}

// run builds e.srv from cfg, with the test defaults where cfg leaves a
// field zero (name w1, prefix /dm, short intervals, e.factory for every
// source), and runs it until the test ends; e.cancel stops it early and
// e.done then yields Run's result (put a value back for the Cleanup).
func (e *serverEnv) run(cfg ServerConfig) {
	t := e.t
	if cfg.Name == "" {
		cfg.Name, cfg.Addr, cfg.Prefix = "w1", "127.0.0.1:1", "/dm"
	}
	if cfg.NewFactory == nil {
		cfg.NewFactory = func(*config.SourceConfig, func() binlog.StreamOpener) unit.Factory { return e.factory }
	}
	if cfg.Logger == nil {
		cfg.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	cfg.KeepaliveTTL = 2 * time.Second
	cfg.Metrics = e.metrics
	cfg.StatusInterval = 100 * time.Millisecond
	cfg.CheckInterval = 5 * time.Millisecond
	cfg.WatchBackoffMin, cfg.WatchBackoffMax = 20*time.Millisecond, 200*time.Millisecond
	e.srv = NewServer(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.done = make(chan error, 1)
	go func() { e.done <- e.srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-e.done:
		case <-time.After(15 * time.Second):
			t.Error("server did not stop")
		}
	})
}

// stop cancels Run and waits up to d for it to return nil. It puts a value
// back on e.done for the Cleanup of run.
func (e *serverEnv) stop(d time.Duration) {
	e.t.Helper()
	e.cancel()
	select {
	case err := <-e.done:
		if err != nil {
			e.t.Fatalf("Run: %v", err)
		}
	case <-time.After(d):
		e.t.Fatalf("server did not stop within %s", d)
	}
	e.done <- nil
}

func (e *serverEnv) keepaliveLease() clientv3.LeaseID {
	resp, err := e.master.Client().Get(e.ctx(), ha.Keys{Prefix: "/dm"}.Keepalive("w1"))
	if err != nil || len(resp.Kvs) == 0 {
		return 0
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

func (e *serverEnv) bind() {
	e.t.Helper()
	if _, err := e.master.PutSourceConfig(e.ctx(), testSourceConfig()); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.master.PutBound(e.ctx(), ha.Bound{Source: testSource, Worker: "w1"}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *serverEnv) subtaskStage(name string) stage.Stage {
	sw := e.srv.SourceWorker()
	if sw == nil {
		return "<unbound>"
	}
	if st := sw.SubTask(name); st != nil {
		return st.Stage()
	}
	return "<absent>"
}

// checkSubtaskStage is nil when subtask name reports stage want.
func (e *serverEnv) checkSubtaskStage(name string, want stage.Stage) error {
	if got := e.subtaskStage(name); got != want {
		return fmt.Errorf("%s %s", name, got)
	}
	return nil
}

// checkBound is nil when the server is bound to source ("" for unbound).
func (e *serverEnv) checkBound(source string) error {
	if got := e.srv.Status().Source; got != source {
		return fmt.Errorf("bound to %q", got)
	}
	return nil
}

// checkRegistered is nil when w1's worker info and keepalive are in etcd.
func (e *serverEnv) checkRegistered() error {
	infos, _, err := e.master.GetWorkerInfos(e.ctx())
	if err != nil {
		return err
	}
	if addr, lease := infos["w1"].Addr, e.keepaliveLease(); addr != "127.0.0.1:1" || lease == 0 {
		return fmt.Errorf("worker info addr %q, keepalive lease %x", addr, lease)
	}
	return nil
}

// checkPublished is nil when w1's status key holds a status ok accepts;
// otherwise it shows what the key holds.
func (e *serverEnv) checkPublished(ok func(WorkerStatus) bool) error {
	st, _, err := e.master.GetStatuses(e.ctx())
	if err != nil {
		return err
	}
	var ws WorkerStatus
	if err := json.Unmarshal(st["w1"], &ws); err != nil || !ok(ws) {
		return fmt.Errorf("status key holds %s (%v)", st["w1"], err)
	}
	return nil
}

// checkErrorListed is nil when the server status lists an error match
// accepts; otherwise it shows the errors listed now.
func (e *serverEnv) checkErrorListed(match func(TaskError) bool) error {
	es := e.srv.Status().Errors
	for _, te := range es {
		if match(te) {
			return nil
		}
	}
	return fmt.Errorf("status errors %s", errorList(es))
}

func TestServerRegisterBindUnbind(t *testing.T) {
	e := startServer(t)
	testutil.Eventually(t, 5*time.Second, "worker info and keepalive", e.checkRegistered)
	if s := e.srv.Status(); s.Source != "" || s.Relay.Enabled {
		t.Fatalf("unbound status: %+v", s)
	}

	e.bind()
	e.putTask("t1", stage.Running)
	testutil.Eventually(t, 5*time.Second, "bound and running", func() error {
		return errors.Join(e.checkBound(testSource), e.checkSubtaskStage("t1", stage.Running))
	})
	// The status key is published on the lease with the same JSON.
	testutil.Eventually(t, 5*time.Second, "status published", func() error {
		return e.checkPublished(func(ws WorkerStatus) bool { return ws.Source == testSource && len(ws.SubTasks) == 1 })
	})

	if _, err := e.master.DeleteBound(e.ctx(), "w1"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "unbound", func() error { return e.checkBound("") })
	if u := e.factory.latest("t1"); u.State() != usClosed || u.count("Close") != 1 {
		t.Fatalf("unbind must close subtasks gracefully: %v", u.Calls())
	}
}

func TestServerBoundToMissingSourceReportsError(t *testing.T) {
	e := startServer(t)
	if _, err := e.master.PutBound(e.ctx(), ha.Bound{Source: "nope", Worker: "w1"}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "missing source reported", func() error {
		return e.checkErrorListed(func(te TaskError) bool { return te.Code == CodeSourceConfigMissing })
	})
	// Creating the source fixes it without any other action.
	cfg := testSourceConfig()
	cfg.SourceID = "nope"
	if _, err := e.master.PutSourceConfig(e.ctx(), cfg); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "bound after create", func() error {
		if s := e.srv.Status(); s.Source != "nope" || len(s.Errors) != 0 {
			return fmt.Errorf("bound to %q, status errors %s", s.Source, errorList(s.Errors))
		}
		return nil
	})
}

func TestServerLeaseLoss(t *testing.T) {
	e := startServer(t)
	e.bind()
	e.putTask("l1", stage.Running)
	e.putTask("l2", stage.Paused)
	testutil.Eventually(t, 5*time.Second, "running", func() error { return e.checkSubtaskStage("l1", stage.Running) })
	old := e.factory.latest("l1")
	lease := e.keepaliveLease()

	if _, err := e.master.Client().Revoke(e.ctx(), lease); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	testutil.Eventually(t, time.Second, "data plane killed after lease loss", func() error { return checkUnitState(old, usClosed) })
	if old.count("Kill") != 1 || old.count("Close") != 0 {
		t.Fatalf("lease loss must kill, not close: %v", old.Calls())
	}
	t.Logf("subtask killed %s after the lease was revoked", time.Since(revoked))

	testutil.Eventually(t, 5*time.Second, "re-registered with a new lease", func() error {
		if l := e.keepaliveLease(); l == 0 || l == lease {
			return fmt.Errorf("keepalive lease %x, revoked %x", l, lease)
		}
		return nil
	})
	testutil.Eventually(t, 5*time.Second, "subtasks back from a fresh snapshot", func() error {
		if e.factory.latest("l1") == old {
			return errors.New("l1 still has the unit from before the lease loss")
		}
		return errors.Join(e.checkSubtaskStage("l1", stage.Running), e.checkSubtaskStage("l2", stage.Paused))
	})
}

func TestServerRelayFollowsConfigAndRelayKey(t *testing.T) {
	e := startServer(t)
	e.bind()
	testutil.Eventually(t, 5*time.Second, "bound", func() error { return e.checkBound(testSource) })
	if e.srv.Status().Relay.Enabled {
		t.Fatal("relay enabled without enable-relay or a relay key")
	}
	if _, err := e.master.PutRelayBound(e.ctx(), ha.Bound{Source: testSource, Worker: "w1"}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "relay enabled by the relay key", func() bool { return e.srv.Status().Relay.Enabled })
	if _, err := e.master.DeleteRelayBound(e.ctx(), "w1"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "relay disabled", func() bool { return !e.srv.Status().Relay.Enabled })
}

func TestServerGracefulShutdownRevokesLease(t *testing.T) {
	e := startServer(t)
	e.bind()
	e.putTask("g1", stage.Running)
	testutil.Eventually(t, 5*time.Second, "running", func() error { return e.checkSubtaskStage("g1", stage.Running) })
	u := e.factory.latest("g1")
	e.stop(10 * time.Second)
	if u.count("Close") != 1 {
		t.Fatalf("shutdown must close subtasks gracefully: %v", u.Calls())
	}
	if e.keepaliveLease() != 0 {
		t.Fatal("keepalive key still there after shutdown")
	}
}
