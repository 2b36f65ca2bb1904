package worker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/stream"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// fakeStreamTask runs until cancelled; at the end it saves its checkpoint
// one position further than it started, as a real task saves what its
// sink acknowledged.
type fakeStreamTask struct {
	cfg   *config.StreamConfig
	start stream.Checkpoint
	save  func(context.Context, stream.Checkpoint) error
	fail  error // returned at once when set
}

func (f *fakeStreamTask) Run(ctx context.Context) error {
	if f.fail != nil {
		return f.fail
	}
	<-ctx.Done()
	cp := f.start
	cp.Location.Pos += 100
	if cp.Location.Name == "" {
		cp.Location.Name = "mariadb-bin.000001"
	}
	return f.save(context.WithoutCancel(ctx), cp)
}

func (f *fakeStreamTask) Status() stream.TaskStatus {
	return stream.TaskStatus{State: stream.StateStreaming, Checkpoint: f.start.Location}
}

// streamFactory records every task it builds.
type streamFactory struct {
	mu    sync.Mutex
	tasks map[string][]*fakeStreamTask
	fail  map[string]error
}

func (f *streamFactory) build(cfg *config.StreamConfig, start stream.Checkpoint,
	save func(context.Context, stream.Checkpoint) error, _ *zap.Logger) (StreamTask, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeStreamTask{cfg: cfg, start: start, save: save, fail: f.fail[cfg.Name]}
	f.tasks[cfg.Name] = append(f.tasks[cfg.Name], t)
	return t, nil
}

func (f *streamFactory) built(name string) []*fakeStreamTask {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*fakeStreamTask(nil), f.tasks[name]...)
}

type streamEnv struct {
	*swEnv
	meta    *stream.Meta
	streams *streamFactory
	current binlog.Location
}

// startStreamSW is a SourceWorker with streams: real etcd, a real meta
// store in a temp dir, fake tasks.
func startStreamSW(t *testing.T, metaPath string, etcd *etcdtest.Cluster) *streamEnv {
	t.Helper()
	if metaPath == "" {
		metaPath = filepath.Join(t.TempDir(), "meta.db")
	}
	if etcd == nil {
		etcd = etcdtest.Start(t)
	}
	meta, err := stream.OpenMeta(metaPath)
	if err != nil {
		t.Fatal(err)
	}
	e := &streamEnv{
		swEnv:   &swEnv{t: t, etcd: etcd, master: ha.NewStore(etcd.DirectClient(t), "/dm"), factory: newSWFactory(), metrics: NewMetrics()},
		meta:    meta,
		streams: &streamFactory{tasks: map[string][]*fakeStreamTask{}, fail: map[string]error{}},
		current: binlog.Location{Name: "mariadb-bin.000009", Pos: 777, GTID: "0-1-99"},
	}
	e.sw = NewSourceWorker(SourceWorkerConfig{
		Source: testSourceConfig(), Store: ha.NewStore(etcd.Client(t), "/dm"), Factory: e.factory,
		Metrics: e.metrics, Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		CheckInterval: 5 * time.Millisecond, WatchBackoffMin: 20 * time.Millisecond, WatchBackoffMax: 200 * time.Millisecond,
		Streams: &StreamRuntime{Meta: meta, NewTask: e.streams.build,
			Current: func(context.Context) (binlog.Location, error) { return e.current, nil }},
	})
	ctx, cancel := context.WithCancel(context.Background())
	e.sw.Start(ctx)
	e.sw.EnableSubTasks(ctx)
	t.Cleanup(func() {
		e.sw.Close()
		cancel()
		meta.Close()
	})
	return e
}

func streamConfig(name string) *config.StreamConfig {
	return &config.StreamConfig{Name: name, SourceID: testSource, EventFormat: config.FormatDebezium,
		Sink: config.SinkConfig{Type: config.SinkFile, File: &config.FileSinkConfig{Dir: "/tmp/x", RotateSize: 1 << 20}}}
}

func (e *streamEnv) putStream(cfg *config.StreamConfig, expect stage.Stage, ignoreUntreated bool) {
	e.t.Helper()
	if _, err := e.master.PutStreamConfig(e.ctx(), cfg); err != nil {
		e.t.Fatal(err)
	}
	e.setStreamStage(cfg.Name, expect, ignoreUntreated)
}

func (e *streamEnv) setStreamStage(name string, expect stage.Stage, ignoreUntreated bool) {
	e.t.Helper()
	if _, err := e.master.PutStreamStage(e.ctx(), ha.Stage{Expect: expect, Source: testSource, Task: name, IgnoreUntreated: ignoreUntreated}); err != nil {
		e.t.Fatal(err)
	}
}

// checkStream is nil when the status shows stream name in stage st and
// state state.
func (e *streamEnv) checkStream(name string, st stage.Stage, state string) error {
	for _, s := range e.sw.Status().Streams {
		if s.Name == name {
			if s.Stage != st || s.State != state {
				return fmt.Errorf("stream %s is %s/%s (errors %v)", name, s.Stage, s.State, s.Errors)
			}
			return nil
		}
	}
	return fmt.Errorf("stream %s not in status (errors %v)", name, e.sw.Status().Errors)
}

func (e *streamEnv) record(name string) (stream.Record, bool) {
	e.t.Helper()
	rec, ok, err := e.meta.Get(name)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec, ok
}

func TestStreamDeployPauseResumeDrop(t *testing.T) {
	e := startStreamSW(t, "", nil)
	e.putStream(streamConfig("s1"), stage.Running, false)
	testutil.Eventually(t, 10*time.Second, "s1 streaming", func() error { return e.checkStream("s1", stage.Running, stream.StateStreaming) })
	rec, ok := e.record("s1")
	if !ok || rec.Config == nil || rec.Config.Name != "s1" || rec.ConfigRev == 0 {
		t.Fatalf("meta record of a deployed stream: %+v (found %v)", rec, ok)
	}

	e.setStreamStage("s1", stage.Paused, false)
	testutil.Eventually(t, 10*time.Second, "s1 paused", func() error { return e.checkStream("s1", stage.Paused, stream.StatePaused) })
	rec, _ = e.record("s1")
	if rec.Checkpoint.Location.Pos != 100 {
		t.Fatalf("checkpoint after pause %v, want the task's saved position 100", rec.Checkpoint.Location)
	}
	cp, ok, err := e.master.GetStreamCheckpoint(e.ctx(), testSource, "s1")
	if err != nil || !ok || cp.BinlogPos != 100 {
		t.Fatalf("etcd checkpoint mirror %+v found %v err %v; want pos 100", cp, ok, err)
	}

	e.setStreamStage("s1", stage.Running, false)
	testutil.Eventually(t, 10*time.Second, "s1 resumed", func() error { return e.checkStream("s1", stage.Running, stream.StateStreaming) })
	if tasks := e.streams.built("s1"); len(tasks) != 2 || tasks[1].start.Location.Pos != 100 {
		t.Fatalf("resume built %d tasks, the last from %v; want 2, from the saved checkpoint", len(tasks), tasks[len(tasks)-1].start.Location)
	}

	if _, err := e.master.DeleteStreamStage(e.ctx(), testSource, "s1"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "s1 dropped", func() error {
		if _, ok := e.record("s1"); ok || len(e.sw.Status().Streams) != 0 {
			return fmt.Errorf("meta record present %v, status %+v", ok, e.sw.Status().Streams)
		}
		if _, ok, _ := e.master.GetStreamCheckpoint(e.ctx(), testSource, "s1"); ok {
			return errors.New("etcd checkpoint still there")
		}
		return nil
	})
}

func TestStreamIgnoreUntreatedSkipsToCurrentPosition(t *testing.T) {
	e := startStreamSW(t, "", nil)
	e.putStream(streamConfig("s1"), stage.Running, false)
	testutil.Eventually(t, 10*time.Second, "s1 streaming", func() error { return e.checkStream("s1", stage.Running, stream.StateStreaming) })
	e.setStreamStage("s1", stage.Paused, false)
	testutil.Eventually(t, 10*time.Second, "s1 paused", func() error { return e.checkStream("s1", stage.Paused, stream.StatePaused) })
	e.setStreamStage("s1", stage.Running, true)
	testutil.Eventually(t, 10*time.Second, "s1 resumed at the current position", func() error {
		tasks := e.streams.built("s1")
		if len(tasks) != 2 || tasks[1].start.Location != e.current {
			return fmt.Errorf("%d tasks built, last from %v", len(tasks), tasks[len(tasks)-1].start.Location)
		}
		return e.checkStream("s1", stage.Running, stream.StateStreaming)
	})
	for _, s := range e.sw.Status().Streams {
		if s.Name == "s1" && s.Skipped == "" {
			t.Fatal("status does not show the skipped range")
		}
	}
}

func TestStreamConfigChangeRestartsWithCheckpoint(t *testing.T) {
	e := startStreamSW(t, "", nil)
	e.putStream(streamConfig("s1"), stage.Running, false)
	testutil.Eventually(t, 10*time.Second, "s1 streaming", func() error { return e.checkStream("s1", stage.Running, stream.StateStreaming) })
	cfg := streamConfig("s1")
	cfg.Sink.File.Dir = "/tmp/y"
	if _, err := e.master.PutStreamConfig(e.ctx(), cfg); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "s1 restarted with the new sink", func() error {
		tasks := e.streams.built("s1")
		last := tasks[len(tasks)-1]
		if len(tasks) != 2 || last.cfg.Sink.File.Dir != "/tmp/y" || last.start.Location.Pos != 100 {
			return fmt.Errorf("%d tasks, last with dir %s from %v", len(tasks), last.cfg.Sink.File.Dir, last.start.Location)
		}
		return e.checkStream("s1", stage.Running, stream.StateStreaming)
	})
}

func TestStreamBadInputAffectsOnlyThatStream(t *testing.T) {
	e := startStreamSW(t, "", nil)
	bad := streamConfig("bad")
	bad.Sink = config.SinkConfig{Type: "carrier-pigeon"}
	e.putStream(bad, stage.Running, false)
	e.putStream(streamConfig("good"), stage.Running, false)
	e.streams.mu.Lock()
	e.streams.fail["broken"] = errors.New("sink unreachable")
	e.streams.mu.Unlock()
	e.putStream(streamConfig("broken"), stage.Running, false)
	testutil.Eventually(t, 10*time.Second, "good streaming, bad and broken reported", func() error {
		if err := e.checkStream("good", stage.Running, stream.StateStreaming); err != nil {
			return err
		}
		if err := e.checkStream("broken", stage.Paused, stream.StatePaused); err != nil {
			return err
		}
		for _, te := range e.sw.Status().Errors {
			if te.Task == "bad" && te.Code == CodeStreamConfigInvalid {
				return nil
			}
		}
		return fmt.Errorf("no %s error for stream bad: %v", CodeStreamConfigInvalid, e.sw.Status().Errors)
	})
}

func TestStreamsRestartFromMetaAfterWorkerRestart(t *testing.T) {
	etcd := etcdtest.Start(t)
	path := filepath.Join(t.TempDir(), "meta.db")
	e := startStreamSW(t, path, etcd)
	e.putStream(streamConfig("s1"), stage.Running, false)
	testutil.Eventually(t, 10*time.Second, "s1 streaming", func() error { return e.checkStream("s1", stage.Running, stream.StateStreaming) })
	e.sw.Close()
	e.meta.Close()

	e2 := startStreamSW(t, path, etcd)
	testutil.Eventually(t, 10*time.Second, "s1 restarted from the meta store", func() error {
		tasks := e2.streams.built("s1")
		if len(tasks) != 1 || tasks[0].start.Location.Pos != 100 {
			var starts []string
			for _, tk := range tasks {
				starts = append(starts, tk.start.Location.String())
			}
			rec, _ := e2.record("s1")
			return fmt.Errorf("%d tasks built after restart, from %v; meta checkpoint %v", len(tasks), starts, rec.Checkpoint.Location)
		}
		return e2.checkStream("s1", stage.Running, stream.StateStreaming)
	})
}

// TestStreamConfigErrorBeforeMetaError: with the meta store unavailable, a
// stream whose config is invalid reports its config error (what its author
// can fix), a valid one reports the meta store.
func TestStreamConfigErrorBeforeMetaError(t *testing.T) {
	etcd := etcdtest.Start(t)
	e := &streamEnv{swEnv: &swEnv{t: t, etcd: etcd, master: ha.NewStore(etcd.DirectClient(t), "/dm"), factory: newSWFactory(), metrics: NewMetrics()}}
	e.sw = NewSourceWorker(SourceWorkerConfig{
		Source: testSourceConfig(), Store: ha.NewStore(etcd.Client(t), "/dm"), Factory: e.factory,
		Metrics: e.metrics, Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		WatchBackoffMin: 20 * time.Millisecond, WatchBackoffMax: 200 * time.Millisecond,
		Streams: &StreamRuntime{MetaErr: errors.New("meta.db is corrupt")},
	})
	ctx, cancel := context.WithCancel(context.Background())
	e.sw.Start(ctx)
	e.sw.EnableSubTasks(ctx)
	t.Cleanup(func() {
		e.sw.Close()
		cancel()
	})
	bad := streamConfig("bad")
	bad.Sink = config.SinkConfig{Type: "carrier-pigeon"}
	e.putStream(bad, stage.Running, false)
	e.putStream(streamConfig("good"), stage.Running, false)
	testutil.Eventually(t, 10*time.Second, "each stream's own error", func() error {
		got := map[string]string{}
		for _, te := range e.sw.Status().Errors {
			got[te.Task] = te.Code
		}
		if got["bad"] != CodeStreamConfigInvalid || got["good"] != CodeStreamMetaUnavailable {
			return fmt.Errorf("errors by stream: %v", got)
		}
		return nil
	})
}
