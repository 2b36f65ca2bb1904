package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// TestSourceWorkerRelayStageDrivesRealRelay drives the real relay through
// the relay stage key: Running pulls, Paused stops the files growing,
// Running resumes, and deleting the stage stops the relay.
func TestSourceWorkerRelayStageDrivesRealRelay(t *testing.T) {
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true, MaxBinlogSize: 16 << 10})
	src.Exec(t, "CREATE DATABASE db")
	src.Exec(t, "CREATE TABLE db.t (id INT PRIMARY KEY, s VARCHAR(200))")
	insert := func(from, to int) {
		for i := from; i < to; i++ {
			src.Exec(t, "INSERT INTO db.t VALUES (?, REPEAT('x', 150))", i)
		}
	}

	etcd := etcdtest.Start(t)
	master := ha.NewStore(etcd.DirectClient(t), "/dm")
	scfg := testSourceConfig()
	scfg.From.Host, scfg.From.Port = src.Host(), src.Port()
	scfg.From.User, scfg.From.Password = mariadbtest.SourceUser, mariadbtest.SourcePassword
	dir := t.TempDir()
	sw := NewSourceWorker(SourceWorkerConfig{
		Source:        scfg,
		Store:         ha.NewStore(etcd.Client(t), "/dm"),
		Factory:       newSWFactory(),
		NewRelay:      NewRelayFactory(dir, RelayOptions{Worker: "w1", MasterStatusInterval: 50 * time.Millisecond}),
		Logger:        zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		CheckInterval: 5 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	sw.Start(ctx)
	sw.EnableRelay(ctx)
	t.Cleanup(func() {
		sw.Close()
		cancel()
	})
	put := func(expect stage.Stage) {
		t.Helper()
		if _, err := master.PutRelayStage(ctx, ha.Stage{Expect: expect, Source: testSource}); err != nil {
			t.Fatal(err)
		}
	}
	caughtUp := func() error {
		st := sw.Status().Relay
		if st.Stage != stage.Running || st.RelayBinlog == "" || st.RelayBinlog != st.MasterBinlog || len(st.Errors) != 0 {
			return fmt.Errorf("relay %s at %q, its master at %q, errors %v", st.Stage, st.RelayBinlog, st.MasterBinlog, st.Errors)
		}
		return nil
	}

	put(stage.Running)
	insert(0, 50)
	testutil.Eventually(t, 30*time.Second, "relay Running and caught up", caughtUp)

	put(stage.Paused)
	testutil.Eventually(t, 2*time.Second, "relay Paused", func() error {
		if got := sw.Status().Relay.Stage; got != stage.Paused {
			return fmt.Errorf("relay %s", got)
		}
		return nil
	})
	size := relayDirSize(t, dir)
	insert(50, 150)
	// A running relay shows new files within tens of milliseconds; give it
	// ten times that to prove a paused one does not.
	relayDirKeepsSize(t, dir, size, 500*time.Millisecond)

	put(stage.Running)
	testutil.Eventually(t, 30*time.Second, "relay resumed and caught up", func() error {
		if err := caughtUp(); err != nil {
			return err
		}
		if got := relayDirSize(t, dir); got <= size {
			return fmt.Errorf("relay files still %d bytes, as when Paused", got)
		}
		return nil
	})

	if _, err := master.DeleteRelayStage(ctx, testSource); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "relay stopped after its stage was deleted", func() error {
		if st := sw.Status().Relay; sw.Relay() != nil || !st.Enabled || st.Stage != stage.Stopped {
			return fmt.Errorf("relay running: %v, enabled %v, stage %s", sw.Relay() != nil, st.Enabled, st.Stage)
		}
		return nil
	})
	if st := sw.Status().Relay; fmt.Sprint(st.Errors) != "[]" {
		t.Fatalf("relay errors after a clean stop: %v", st.Errors)
	}
}
