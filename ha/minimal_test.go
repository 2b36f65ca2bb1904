package ha

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/stage"
)

// TestMinimalValues writes the smallest JSON of every key kind with raw
// client puts (what `etcdctl put` does, no Store involved) and reads each
// back through the Store's Get path and through a watch: omitted fields
// take the defaults files get, names omitted from stage/bound values come
// from the key, and fields the worker does not know are carried in the
// config's Notes instead of failing the decode or vanishing.
func TestMinimalValues(t *testing.T) {
	s, _ := newStore(t)
	k := s.Keys()
	cli := s.Client()

	type check func(t *testing.T, v any)
	tests := []struct {
		name   string
		key    string
		prefix string
		value  string
		dec    Decoder[any]
		get    func(ctx context.Context) (any, error)
		check  check
	}{
		{name: "worker info", key: k.WorkerInfo("w1"), prefix: k.WorkerInfoPrefix(), dec: asAny(s.DecodeWorkerInfo),
			value: `{"addr":"127.0.0.1:8262"}`,
			get:   func(ctx context.Context) (any, error) { return fromMap[WorkerInfo]("w1")(s.GetWorkerInfos(ctx)) },
			check: func(t *testing.T, v any) {
				if got := v.(WorkerInfo); got.Name != "w1" || got.Addr != "127.0.0.1:8262" {
					t.Errorf("worker info %+v, want name w1 from the key", got)
				}
			}},
		{name: "keepalive", key: k.Keepalive("w1"), prefix: k.KeepalivePrefix(), dec: asAny(s.DecodeKeepalive),
			value: `{}`,
			get:   func(ctx context.Context) (any, error) { return fromMap[KeepaliveInfo]("w1")(s.GetKeepalives(ctx)) },
			check: func(t *testing.T, v any) {
				if got := v.(KeepaliveInfo); got.Name != "w1" {
					t.Errorf("keepalive %+v, want name w1 from the key", got)
				}
			}},
		{name: "source config", key: k.SourceConfig("s1"), prefix: k.SourceConfigPrefix(), dec: asAny(s.DecodeSourceConfig),
			value: `{"source-id":"s1","from":{"host":"127.0.0.1","port":3306,"user":"root"},"future-field":{"a":1},"checker":{"backoff-rollback":"5m"}}`,
			get: func(ctx context.Context) (any, error) {
				cfg, _, err := s.GetSourceConfig(ctx, "s1")
				return cfg, err
			},
			check: func(t *testing.T, v any) {
				cfg := v.(*config.SourceConfig)
				if err := cfg.Validate(); err != nil {
					t.Errorf("minimal source config does not validate: %v", err)
				}
				want := config.NewSourceConfig()
				if cfg.Purge != want.Purge || cfg.Checker != want.Checker || cfg.From.Port != 3306 {
					t.Errorf("defaults not applied: purge %+v checker %+v", cfg.Purge, cfg.Checker)
				}
				wantNotes(t, cfg.Notes, []string{"future-field"}, []string{"checker.backoff-rollback"})
			}},
		{name: "bound", key: k.Bound("w1"), prefix: k.BoundPrefix(), dec: asAny(s.DecodeBound),
			value: `{"source":"s1"}`,
			get:   func(ctx context.Context) (any, error) { return get1(s.GetBound(ctx, "w1")) },
			check: func(t *testing.T, v any) {
				if got := v.(Bound); got.Source != "s1" || got.Worker != "w1" {
					t.Errorf("bound %+v, want worker w1 from the key", got)
				}
			}},
		{name: "relay bound", key: k.RelayBound("w1"), prefix: k.RelayBoundPrefix(), dec: asAny(s.DecodeRelayBound),
			value: `{"source":"s1"}`,
			get:   func(ctx context.Context) (any, error) { return get1(s.GetRelayBound(ctx, "w1")) },
			check: func(t *testing.T, v any) {
				if got := v.(Bound); got.Source != "s1" || got.Worker != "w1" {
					t.Errorf("relay bound %+v, want worker w1 from the key", got)
				}
			}},
		{name: "relay stage", key: k.RelayStage("s1"), prefix: k.RelayStagePrefix(), dec: asAny(s.DecodeRelayStage),
			value: `{"expect":"Running"}`,
			get:   func(ctx context.Context) (any, error) { return get1(s.GetRelayStage(ctx, "s1")) },
			check: wantStage(stage.Running, "s1", "")},
		{name: "subtask config", key: k.SubTaskConfig("s1", "t1"), prefix: k.SubTaskConfigPrefix("s1"), dec: asAny(s.DecodeSubTaskConfig),
			value: `{"name":"t1","source-id":"s1","task-mode":"incremental","meta":{"binlog-name":"mariadb-bin.000001"},` +
				`"target-database":{"host":"127.0.0.1","user":"root"},"syncer":{"compact":true,"worker-cnt":3}}`,
			get: func(ctx context.Context) (any, error) {
				return subTaskField(func(it *SubTaskItem) any { return it.Config })(s.GetSubTask(ctx, "s1", "t1"))
			},
			check: func(t *testing.T, v any) {
				cfg := v.(*config.SubTaskConfig)
				if err := cfg.Validate(); err != nil {
					t.Errorf("minimal subtask config does not validate: %v", err)
				}
				def := config.NewSubTaskConfig()
				if cfg.TargetDatabase.Port != 3306 || cfg.Meta.BinlogPos != config.MinBinlogPos || cfg.MetaSchema != config.DefaultMetaSchema ||
					cfg.Syncer != def.Syncer || cfg.Mydumper != def.Mydumper || cfg.Loader != def.Loader || cfg.Validator != def.Validator {
					t.Errorf("defaults not applied: %+v", cfg)
				}
				wantNotes(t, cfg.Notes, []string{"syncer.worker-cnt"}, []string{"syncer.compact"})
			}},
		{name: "subtask stage", key: k.SubTaskStage("s1", "t1"), prefix: k.SubTaskStagePrefix("s1"), dec: asAny(s.DecodeSubTaskStage),
			value: `{"expect":"Paused"}`,
			get: func(ctx context.Context) (any, error) {
				return subTaskField(func(it *SubTaskItem) any { return *it.Stage })(s.GetSubTask(ctx, "s1", "t1"))
			},
			check: wantStage(stage.Paused, "s1", "t1")},
		{name: "validator stage", key: k.ValidatorStage("s1", "t1"), prefix: k.ValidatorStagePrefix("s1"), dec: asAny(s.DecodeValidatorStage),
			value: `{"expect":"Running"}`,
			get: func(ctx context.Context) (any, error) {
				return subTaskField(func(it *SubTaskItem) any { return *it.ValidatorStage })(s.GetSubTask(ctx, "s1", "t1"))
			},
			check: wantStage(stage.Running, "s1", "t1")},
		{name: "stream config", key: k.StreamConfig("s1", "x1"), prefix: k.StreamConfigPrefix("s1"), dec: asAny(s.DecodeStreamConfig),
			value: `{"name":"x1","source-id":"s1","sink":{"type":"file","file":{"dir":"/tmp/x"}},"schema-registry":"http://127.0.0.1:8081"}`,
			get: func(ctx context.Context) (any, error) {
				return streamField(func(it *StreamItem) any { return it.Config })(s.GetStream(ctx, "s1", "x1"))
			},
			check: func(t *testing.T, v any) {
				cfg := v.(*config.StreamConfig)
				if err := cfg.Validate(); err != nil {
					t.Errorf("minimal stream config does not validate: %v", err)
				}
				if cfg.Sink.File == nil || cfg.Sink.File.RotateSize != config.DefaultFileRotateSize || cfg.EventFormat != config.FormatDebezium {
					t.Errorf("defaults not applied: sink %+v, format %q", cfg.Sink, cfg.EventFormat)
				}
				wantNotes(t, cfg.Notes, []string{"schema-registry"}, nil)
			}},
		{name: "stream stage", key: k.StreamStage("s1", "x1"), prefix: k.StreamStagePrefix("s1"), dec: asAny(s.DecodeStreamStage),
			value: `{"expect":"Running"}`,
			get: func(ctx context.Context) (any, error) {
				return streamField(func(it *StreamItem) any { return *it.Stage })(s.GetStream(ctx, "s1", "x1"))
			},
			check: wantStage(stage.Running, "s1", "x1")},
		{name: "status", key: k.Status("w1"), prefix: k.StatusPrefix(), dec: asAny(s.DecodeStatus),
			value: `{}`,
			get:   func(ctx context.Context) (any, error) { return fromMap[[]byte]("w1")(s.GetStatuses(ctx)) },
			check: func(t *testing.T, v any) {
				if string(v.([]byte)) != `{}` {
					t.Errorf("status %q", v)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			rec := newRecorder[any]()
			startWatch(t, cli, tt.prefix, tt.dec, rec, WatchOptions{})
			rec.waitFor(t, 5*time.Second, "first resync", func(r *recorder[any]) bool { return len(r.resyncs) > 0 })

			resp, err := cli.Put(ctx, tt.key, tt.value)
			if err != nil {
				t.Fatalf("raw put: %v", err)
			}
			got, err := tt.get(ctx)
			if err != nil {
				t.Fatalf("get %s = %s: %v", tt.key, tt.value, err)
			}
			tt.check(t, got)

			rev := resp.Header.Revision
			rec.waitFor(t, 5*time.Second, "put event", func(r *recorder[any]) bool {
				ev, ok := r.lastEvent(tt.key)
				return ok && ev.Revision == rev
			})
			rec.mu.Lock()
			ev, _ := rec.lastEvent(tt.key)
			rec.mu.Unlock()
			if ev.Err != nil || ev.Deleted {
				t.Fatalf("watch event %+v", ev)
			}
			tt.check(t, ev.Value)
		})
	}
}

// TestStageNamesMustAgreeWithKey: a value that names another source or task
// than its key is still malformed, omitted or not.
func TestStageNamesMustAgreeWithKey(t *testing.T) {
	s := NewStore(nil, "")
	k := s.Keys()
	for _, v := range []string{`{"expect":"Running","source":"s2"}`, `{"expect":"Running","task":"t2"}`} {
		if _, err := s.DecodeSubTaskStage(k.SubTaskStage("s1", "t1"), []byte(v)); err == nil {
			t.Errorf("stage %s under s1/t1 decoded", v)
		}
	}
	st, err := s.DecodeSubTaskStage(k.SubTaskStage("s1", "t1"), []byte(`{"expect":"Running","colour":"red"}`))
	if err != nil || st.Unknown != "colour" || st.Source != "s1" {
		t.Errorf("stage with an unknown field: %+v, %v; want it decoded with Unknown colour", st, err)
	}
	if _, err := s.DecodeBound(k.Bound("w1"), []byte(`{"source":"s1","worker":"w2"}`)); err == nil {
		t.Error("bound naming w2 under w1 decoded")
	}
	// A required field stays required: a source config without from.host
	// decodes but does not validate.
	cfg, err := s.DecodeSourceConfig(k.SourceConfig("s1"), []byte(`{"source-id":"s1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil {
		t.Error("a source config without from validates")
	}
	// A refused DM field is an error even in lenient mode.
	if _, err := s.DecodeSubTaskConfig(k.SubTaskConfig("s1", "t1"),
		[]byte(`{"name":"t1","source-id":"s1","target-database":{"host":"h","security":{"ssl-ca-base64":"eA=="}}}`)); err == nil {
		t.Error("a refused DM field decoded leniently")
	}
}

func wantStage(expect stage.Stage, source, task string) func(t *testing.T, v any) {
	return func(t *testing.T, v any) {
		st := v.(Stage)
		if st.Expect != expect || st.Source != source || st.Task != task {
			t.Errorf("stage %+v, want %s with source %q task %q from the key", st, expect, source, task)
		}
	}
}

func wantNotes(t *testing.T, n config.DecodeNotes, unknown, ignored []string) {
	t.Helper()
	if !slices.Equal(n.Unknown, unknown) {
		t.Errorf("unknown fields %v, want %v (carried, not dropped)", n.Unknown, unknown)
	}
	if !slices.Equal(n.Ignored, ignored) {
		t.Errorf("ignored fields %v, want %v", n.Ignored, ignored)
	}
}
