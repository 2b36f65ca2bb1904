package worker

import (
	"context"
	"encoding/json"
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

func TestServerRegisterBindUnbind(t *testing.T) {
	e := startServer(t)
	within(t, 5*time.Second, "worker info and keepalive", func() bool {
		infos, _, err := e.master.GetWorkerInfos(e.ctx())
		return err == nil && infos["w1"].Addr == "127.0.0.1:1" && e.keepaliveLease() != 0
	})
	if s := e.srv.Status(); s.Source != "" || s.Relay.Enabled {
		t.Fatalf("unbound status: %+v", s)
	}

	e.bind()
	e.putTask("t1", stage.Running)
	within(t, 5*time.Second, "bound and running", func() bool {
		return e.srv.Status().Source == testSource && e.subtaskStage("t1") == stage.Running
	})
	// The status key is published on the lease with the same JSON.
	within(t, 5*time.Second, "status published", func() bool {
		st, _, err := e.master.GetStatuses(e.ctx())
		if err != nil {
			return false
		}
		var ws WorkerStatus
		return json.Unmarshal(st["w1"], &ws) == nil && ws.Source == testSource && len(ws.SubTasks) == 1
	})

	if _, err := e.master.DeleteBound(e.ctx(), "w1"); err != nil {
		t.Fatal(err)
	}
	within(t, 5*time.Second, "unbound", func() bool { return e.srv.Status().Source == "" })
	if u := e.factory.latest("t1"); u.State() != usClosed || u.count("Close") != 1 {
		t.Fatalf("unbind must close subtasks gracefully: %v", u.Calls())
	}
}

func TestServerBoundToMissingSourceReportsError(t *testing.T) {
	e := startServer(t)
	if _, err := e.master.PutBound(e.ctx(), ha.Bound{Source: "nope", Worker: "w1"}); err != nil {
		t.Fatal(err)
	}
	within(t, 5*time.Second, "missing source reported", func() bool {
		for _, te := range e.srv.Status().Errors {
			if te.Code == CodeSourceConfigMissing {
				return true
			}
		}
		return false
	})
	// Creating the source fixes it without any other action.
	cfg := testSourceConfig()
	cfg.SourceID = "nope"
	if _, err := e.master.PutSourceConfig(e.ctx(), cfg); err != nil {
		t.Fatal(err)
	}
	within(t, 5*time.Second, "bound after create", func() bool {
		s := e.srv.Status()
		return s.Source == "nope" && len(s.Errors) == 0
	})
}

func TestServerLeaseLoss(t *testing.T) {
	e := startServer(t)
	e.bind()
	e.putTask("l1", stage.Running)
	e.putTask("l2", stage.Paused)
	within(t, 5*time.Second, "running", func() bool { return e.subtaskStage("l1") == stage.Running })
	old := e.factory.latest("l1")
	lease := e.keepaliveLease()

	if _, err := e.master.Client().Revoke(e.ctx(), lease); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	within(t, time.Second, "data plane killed after lease loss", func() bool { return old.State() == usClosed })
	if old.count("Kill") != 1 || old.count("Close") != 0 {
		t.Fatalf("lease loss must kill, not close: %v", old.Calls())
	}
	t.Logf("subtask killed %s after the lease was revoked", time.Since(revoked))

	within(t, 5*time.Second, "re-registered with a new lease", func() bool {
		l := e.keepaliveLease()
		return l != 0 && l != lease
	})
	within(t, 5*time.Second, "subtasks back from a fresh snapshot", func() bool {
		u := e.factory.latest("l1")
		return u != old && e.subtaskStage("l1") == stage.Running && e.subtaskStage("l2") == stage.Paused
	})
}

func TestServerRelayFollowsConfigAndRelayKey(t *testing.T) {
	e := startServer(t)
	e.bind()
	within(t, 5*time.Second, "bound", func() bool { return e.srv.Status().Source == testSource })
	if e.srv.Status().Relay.Enabled {
		t.Fatal("relay enabled without enable-relay or a relay key")
	}
	if _, err := e.master.PutRelayBound(e.ctx(), ha.Bound{Source: testSource, Worker: "w1"}); err != nil {
		t.Fatal(err)
	}
	within(t, 5*time.Second, "relay enabled by the relay key", func() bool { return e.srv.Status().Relay.Enabled })
	if _, err := e.master.DeleteRelayBound(e.ctx(), "w1"); err != nil {
		t.Fatal(err)
	}
	within(t, 5*time.Second, "relay disabled", func() bool { return !e.srv.Status().Relay.Enabled })
}

func TestServerGracefulShutdownRevokesLease(t *testing.T) {
	e := startServer(t)
	e.bind()
	e.putTask("g1", stage.Running)
	within(t, 5*time.Second, "running", func() bool { return e.subtaskStage("g1") == stage.Running })
	u := e.factory.latest("g1")
	e.cancel()
	select {
	case err := <-e.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("graceful shutdown took longer than 10s")
	}
	e.done <- nil // for Cleanup
	if u.count("Close") != 1 {
		t.Fatalf("shutdown must close subtasks gracefully: %v", u.Calls())
	}
	if e.keepaliveLease() != 0 {
		t.Fatal("keepalive key still there after shutdown")
	}
}
