package ha

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/stage"
)

// asAny adapts a typed Decoder for the table below.
func asAny[T any](dec Decoder[T]) Decoder[any] {
	return func(key string, value []byte) (any, error) { return dec(key, value) }
}

// get1 adapts the Get* shapes: the value present, or an error.
func get1[T any](v T, found bool, _ int64, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errors.New("not found")
	}
	return v, nil
}

func fromMap[T any](name string) func(m map[string]T, rev int64, err error) (any, error) {
	return func(m map[string]T, _ int64, err error) (any, error) {
		if err != nil {
			return nil, err
		}
		v, ok := m[name]
		if !ok {
			return nil, errors.New("not in map")
		}
		return v, nil
	}
}

func subTaskField(f func(*SubTaskItem) any) func(*SubTaskItem, int64, error) (any, error) {
	return func(it *SubTaskItem, _ int64, err error) (any, error) {
		if err != nil {
			return nil, err
		}
		if it == nil {
			return nil, errors.New("no subtask")
		}
		return f(it), it.Err
	}
}

func streamField(f func(*StreamItem) any) func(*StreamItem, int64, error) (any, error) {
	return func(it *StreamItem, _ int64, err error) (any, error) {
		if err != nil {
			return nil, err
		}
		if it == nil {
			return nil, errors.New("no stream")
		}
		return f(it), it.Err
	}
}

// withRev sets the revision a stored stage or bound is read back with.
func withRev(v any, rev int64) any {
	switch x := v.(type) {
	case Stage:
		x.Revision = rev
		return x
	case Bound:
		x.Revision = rev
		return x
	}
	return v
}

// TestKeyKinds puts, gets, watches and deletes every key kind.
func TestKeyKinds(t *testing.T) {
	s, _ := newStore(t)
	k := s.Keys()
	srcCfg := &config.SourceConfig{SourceID: "s1", Flavor: config.FlavorMariaDB, EnableRelay: true,
		From:    config.DBConfig{Host: "127.0.0.1", Port: 3306, User: "root"},
		Checker: config.CheckerConfig{CheckEnable: true, BackoffMin: config.Duration{Duration: time.Second}}}
	subCfg := &config.SubTaskConfig{Name: "t1", SourceID: "s1", TaskMode: config.ModeAll, MetaSchema: "dm_meta",
		BAList: config.BAList{DoDBs: []string{"db1"}}}
	streamCfg := &config.StreamConfig{Name: "x1", SourceID: "s1", Snapshot: true,
		Sink: config.SinkConfig{Type: config.SinkFile, File: &config.FileSinkConfig{Dir: "/tmp/x", RotateSize: 64 << 20}}}
	// Values are read back over the defaults and adjusted: what a master
	// writes is adjusted already (dmctl does), so it reads back the same.
	srcCfg.Adjust()
	subCfg.Adjust()
	streamCfg.Adjust()
	subStage := Stage{Expect: stage.Running, Source: "s1", Task: "t1"}
	valStage := Stage{Expect: stage.Stopped, Source: "s1", Task: "t1"}
	relayStage := Stage{Expect: stage.Paused, Source: "s1"}
	streamStage := Stage{Expect: stage.Running, Source: "s1", Task: "x1", IgnoreUntreated: true}
	bound := Bound{Source: "s1", Worker: "w1"}

	tests := []struct {
		name        string
		key, prefix string
		dec         Decoder[any]
		put         func(context.Context) (int64, error)
		get         func(context.Context) (any, error)
		want        any
		del         func(context.Context) (int64, error)
		wantDeleted any // what decoding the delete gives
	}{
		{name: "worker info", key: k.WorkerInfo("w1"), prefix: k.WorkerInfoPrefix(), dec: asAny(s.DecodeWorkerInfo),
			put: func(ctx context.Context) (int64, error) {
				return s.PutWorkerInfo(ctx, WorkerInfo{Name: "w1", Addr: "127.0.0.1:8262"})
			},
			get:  func(ctx context.Context) (any, error) { return fromMap[WorkerInfo]("w1")(s.GetWorkerInfos(ctx)) },
			want: WorkerInfo{Name: "w1", Addr: "127.0.0.1:8262"},
			del:  func(ctx context.Context) (int64, error) { return s.DeleteWorkerInfo(ctx, "w1") }, wantDeleted: WorkerInfo{Name: "w1"}},
		{name: "source config", key: k.SourceConfig("s1"), prefix: k.SourceConfigPrefix(), dec: asAny(s.DecodeSourceConfig),
			put: func(ctx context.Context) (int64, error) { return s.PutSourceConfig(ctx, srcCfg) },
			get: func(ctx context.Context) (any, error) {
				cfg, _, err := s.GetSourceConfig(ctx, "s1")
				return cfg, err
			},
			want: srcCfg,
			del:  func(ctx context.Context) (int64, error) { return s.DeleteSourceConfig(ctx, "s1") }, wantDeleted: (*config.SourceConfig)(nil)},
		{name: "bound", key: k.Bound("w1"), prefix: k.BoundPrefix(), dec: asAny(s.DecodeBound),
			put:  func(ctx context.Context) (int64, error) { return s.PutBound(ctx, bound) },
			get:  func(ctx context.Context) (any, error) { return get1(s.GetBound(ctx, "w1")) },
			want: bound,
			del:  func(ctx context.Context) (int64, error) { return s.DeleteBound(ctx, "w1") }, wantDeleted: Bound{Worker: "w1", IsDeleted: true}},
		{name: "relay bound", key: k.RelayBound("w1"), prefix: k.RelayBoundPrefix(), dec: asAny(s.DecodeRelayBound),
			put:  func(ctx context.Context) (int64, error) { return s.PutRelayBound(ctx, bound) },
			get:  func(ctx context.Context) (any, error) { return get1(s.GetRelayBound(ctx, "w1")) },
			want: bound,
			del:  func(ctx context.Context) (int64, error) { return s.DeleteRelayBound(ctx, "w1") }, wantDeleted: Bound{Worker: "w1", IsDeleted: true}},
		{name: "relay stage", key: k.RelayStage("s1"), prefix: k.RelayStagePrefix(), dec: asAny(s.DecodeRelayStage),
			put:  func(ctx context.Context) (int64, error) { return s.PutRelayStage(ctx, relayStage) },
			get:  func(ctx context.Context) (any, error) { return get1(s.GetRelayStage(ctx, "s1")) },
			want: relayStage,
			del:  func(ctx context.Context) (int64, error) { return s.DeleteRelayStage(ctx, "s1") }, wantDeleted: Stage{Source: "s1", IsDeleted: true}},
		{name: "subtask config", key: k.SubTaskConfig("s1", "t1"), prefix: k.SubTaskConfigPrefix("s1"), dec: asAny(s.DecodeSubTaskConfig),
			put: func(ctx context.Context) (int64, error) { return s.PutSubTaskConfig(ctx, subCfg) },
			get: func(ctx context.Context) (any, error) {
				return subTaskField(func(it *SubTaskItem) any { return it.Config })(s.GetSubTask(ctx, "s1", "t1"))
			},
			want: subCfg,
			del:  func(ctx context.Context) (int64, error) { return s.DeleteSubTaskConfig(ctx, "s1", "t1") }, wantDeleted: (*config.SubTaskConfig)(nil)},
		{name: "subtask stage", key: k.SubTaskStage("s1", "t1"), prefix: k.SubTaskStagePrefix("s1"), dec: asAny(s.DecodeSubTaskStage),
			put: func(ctx context.Context) (int64, error) { return s.PutSubTaskStage(ctx, subStage) },
			get: func(ctx context.Context) (any, error) {
				return subTaskField(func(it *SubTaskItem) any { return *it.Stage })(s.GetSubTask(ctx, "s1", "t1"))
			},
			want: subStage,
			del:  func(ctx context.Context) (int64, error) { return s.DeleteSubTaskStage(ctx, "s1", "t1") }, wantDeleted: Stage{Source: "s1", Task: "t1", IsDeleted: true}},
		{name: "validator stage", key: k.ValidatorStage("s1", "t1"), prefix: k.ValidatorStagePrefix("s1"), dec: asAny(s.DecodeValidatorStage),
			put: func(ctx context.Context) (int64, error) { return s.PutValidatorStage(ctx, valStage) },
			get: func(ctx context.Context) (any, error) {
				return subTaskField(func(it *SubTaskItem) any { return *it.ValidatorStage })(s.GetSubTask(ctx, "s1", "t1"))
			},
			want: valStage,
			del:  func(ctx context.Context) (int64, error) { return s.DeleteValidatorStage(ctx, "s1", "t1") }, wantDeleted: Stage{Source: "s1", Task: "t1", IsDeleted: true}},
		{name: "stream config", key: k.StreamConfig("s1", "x1"), prefix: k.StreamConfigPrefix("s1"), dec: asAny(s.DecodeStreamConfig),
			put: func(ctx context.Context) (int64, error) { return s.PutStreamConfig(ctx, streamCfg) },
			get: func(ctx context.Context) (any, error) {
				return streamField(func(it *StreamItem) any { return it.Config })(s.GetStream(ctx, "s1", "x1"))
			},
			want: streamCfg,
			del:  func(ctx context.Context) (int64, error) { return s.DeleteStreamConfig(ctx, "s1", "x1") }, wantDeleted: (*config.StreamConfig)(nil)},
		{name: "stream stage", key: k.StreamStage("s1", "x1"), prefix: k.StreamStagePrefix("s1"), dec: asAny(s.DecodeStreamStage),
			put: func(ctx context.Context) (int64, error) { return s.PutStreamStage(ctx, streamStage) },
			get: func(ctx context.Context) (any, error) {
				return streamField(func(it *StreamItem) any { return *it.Stage })(s.GetStream(ctx, "s1", "x1"))
			},
			want: streamStage,
			del:  func(ctx context.Context) (int64, error) { return s.DeleteStreamStage(ctx, "s1", "x1") }, wantDeleted: Stage{Source: "s1", Task: "x1", IsDeleted: true}},
		{name: "status", key: k.Status("w1"), prefix: k.StatusPrefix(), dec: asAny(s.DecodeStatus),
			put: func(ctx context.Context) (int64, error) {
				return s.PutStatus(ctx, "w1", []byte(`{"worker":"w1"}`), clientv3.NoLease)
			},
			get:  func(ctx context.Context) (any, error) { return fromMap[[]byte]("w1")(s.GetStatuses(ctx)) },
			want: []byte(`{"worker":"w1"}`),
			del: func(ctx context.Context) (int64, error) {
				resp, err := s.Client().Delete(ctx, k.Status("w1"))
				if err != nil {
					return 0, err
				}
				return resp.Header.Revision, nil
			}, wantDeleted: []byte(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			rec := newRecorder[any]()
			startWatch(t, s.Client(), tt.prefix, tt.dec, rec, WatchOptions{})
			rec.waitFor(t, 5*time.Second, "first resync", func(r *recorder[any]) bool { return len(r.resyncs) > 0 })

			rev, err := tt.put(ctx)
			if err != nil {
				t.Fatalf("put: %v", err)
			}
			got, err := tt.get(ctx)
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			want := withRev(tt.want, rev)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("get = %#v, want %#v", got, want)
			}
			rec.waitFor(t, 5*time.Second, "put event", func(r *recorder[any]) bool {
				ev, ok := r.lastEvent(tt.key)
				return ok && ev.Revision == rev
			})
			rec.mu.Lock()
			ev, _ := rec.lastEvent(tt.key)
			rec.mu.Unlock()
			if ev.Deleted || ev.Err != nil || !reflect.DeepEqual(ev.Value, want) {
				t.Fatalf("watch put event = %+v, want value %#v", ev, want)
			}

			drev, err := tt.del(ctx)
			if err != nil {
				t.Fatalf("delete: %v", err)
			}
			if again, err := tt.del(ctx); err != nil || again < drev {
				t.Fatalf("second delete = %d, %v; want idempotent success", again, err)
			}
			rec.waitFor(t, 5*time.Second, "delete event", func(r *recorder[any]) bool {
				ev, ok := r.lastEvent(tt.key)
				return ok && ev.Deleted
			})
			rec.mu.Lock()
			ev, _ = rec.lastEvent(tt.key)
			rec.mu.Unlock()
			wantDel := withRev(tt.wantDeleted, drev)
			if ev.Err != nil || ev.Revision != drev || !reflect.DeepEqual(ev.Value, wantDel) {
				t.Fatalf("watch delete event = %+v, want revision %d value %#v", ev, drev, wantDel)
			}
			fromKey, err := tt.dec(ev.Key, nil)
			if err != nil || !reflect.DeepEqual(fromKey, tt.wantDeleted) {
				t.Fatalf("decode delete = %#v, %v; want %#v", fromKey, err, tt.wantDeleted)
			}
		})
	}
}

func TestPutRejectsInvalid(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	tests := []struct {
		name string
		put  func() (int64, error)
	}{
		{"worker name", func() (int64, error) { return s.PutWorkerInfo(ctx, WorkerInfo{Name: "w 1"}) }},
		{"source id", func() (int64, error) { return s.PutSourceConfig(ctx, &config.SourceConfig{SourceID: ""}) }},
		{"nil source", func() (int64, error) { return s.PutSourceConfig(ctx, nil) }},
		{"bound source", func() (int64, error) { return s.PutBound(ctx, Bound{Worker: "w1", Source: "a/b"}) }},
		{"relay stage with task", func() (int64, error) {
			return s.PutRelayStage(ctx, Stage{Expect: stage.Running, Source: "s1", Task: "t1"})
		}},
		{"relay stage not expectable", func() (int64, error) {
			return s.PutRelayStage(ctx, Stage{Expect: stage.Finished, Source: "s1"})
		}},
		{"subtask stage without task", func() (int64, error) {
			return s.PutSubTaskStage(ctx, Stage{Expect: stage.Running, Source: "s1"})
		}},
		{"validator paused", func() (int64, error) {
			return s.PutValidatorStage(ctx, Stage{Expect: stage.Paused, Source: "s1", Task: "t1"})
		}},
		{"subtask stage disagrees", func() (int64, error) {
			return s.PutSubTask(ctx, &config.SubTaskConfig{Name: "t1", SourceID: "s1"}, Stage{Expect: stage.Running, Task: "t2"})
		}},
		{"stream name", func() (int64, error) {
			return s.PutStreamConfig(ctx, &config.StreamConfig{Name: ".x", SourceID: "s1"})
		}},
		{"status worker", func() (int64, error) { return s.PutStatus(ctx, "", nil, clientv3.NoLease) }},
	}
	for _, tt := range tests {
		if _, err := tt.put(); err == nil {
			t.Errorf("%s: put succeeded, want an error", tt.name)
		}
	}
	resp, err := s.Client().Get(ctx, s.Prefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Fatalf("%d keys written by rejected puts", resp.Count)
	}
}

func TestGetMapsReportMalformedKeys(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	if _, err := s.PutBound(ctx, Bound{Source: "s1", Worker: "w1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Put(ctx, s.Keys().Bound("w2"), `{"source":"s1","worker":"w3"}`); err != nil {
		t.Fatal(err)
	}
	bounds, _, err := s.GetBounds(ctx)
	var ke *KeyErrors
	if !errors.As(err, &ke) || len(ke.Errors) != 1 || ke.Errors[0].Key != s.Keys().Bound("w2") || !errors.Is(err, ErrMalformed) {
		t.Fatalf("GetBounds err = %v, want one malformed key w2", err)
	}
	if len(bounds) != 1 || bounds["w1"].Source != "s1" {
		t.Fatalf("GetBounds = %+v, want w1 only", bounds)
	}
	if cfg, rev, err := s.GetSourceConfig(ctx, "absent"); cfg != nil || rev == 0 || err != nil {
		t.Fatalf("GetSourceConfig(absent) = %v, %d, %v", cfg, rev, err)
	}
}

func TestGetSourceConfigAt(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	rev1, err := s.PutSourceConfig(ctx, &config.SourceConfig{SourceID: "s1", From: config.DBConfig{Host: "127.0.0.1", Port: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutSourceConfig(ctx, &config.SourceConfig{SourceID: "s1", From: config.DBConfig{Host: "127.0.0.1", Port: 2}}); err != nil {
		t.Fatal(err)
	}
	old, err := s.GetSourceConfigAt(ctx, "s1", rev1)
	if err != nil || old == nil || old.From.Port != 1 {
		t.Fatalf("GetSourceConfigAt(rev1) = %+v, %v", old, err)
	}
	if none, err := s.GetSourceConfigAt(ctx, "s1", rev1-1); none != nil || err != nil {
		t.Fatalf("GetSourceConfigAt(before) = %+v, %v", none, err)
	}
	cur, _, err := s.GetSourceConfig(ctx, "s1")
	if err != nil || cur.From.Port != 2 {
		t.Fatalf("GetSourceConfig = %+v, %v", cur, err)
	}
}
