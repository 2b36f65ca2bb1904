package ha

import (
	"errors"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/stage"
)

func TestGetSubTasksOneRevision(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	k := s.Keys()
	cfg := func(name string) *config.SubTaskConfig {
		return &config.SubTaskConfig{Name: name, SourceID: "s1", TaskMode: config.ModeIncremental}
	}
	raw := func(key, value string) {
		t.Helper()
		if _, err := s.Client().Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
	}

	// a: config + stage (one txn) + validator; b: config only; c: stage only.
	revA, err := s.PutSubTask(ctx, cfg("a"), Stage{Expect: stage.Running})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutValidatorStage(ctx, Stage{Expect: stage.Running, Source: "s1", Task: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutSubTaskConfig(ctx, cfg("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutSubTaskStage(ctx, Stage{Expect: stage.Paused, Source: "s1", Task: "c"}); err != nil {
		t.Fatal(err)
	}
	// d: malformed config JSON but a good stage; e: unknown stage; f: validator Paused.
	raw(k.SubTaskConfig("s1", "d"), `{"name":"d",`)
	if _, err := s.PutSubTaskStage(ctx, Stage{Expect: stage.Running, Source: "s1", Task: "d"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutSubTaskConfig(ctx, cfg("e")); err != nil {
		t.Fatal(err)
	}
	raw(k.SubTaskStage("s1", "e"), `{"expect":"Exploded","source":"s1","task":"e"}`)
	raw(k.ValidatorStage("s1", "f"), `{"expect":"Paused","source":"s1","task":"f"}`)
	// an invalid name in a key, and another source's task.
	raw(k.SubTaskStage("s1", "bad name"), `{"expect":"Running","source":"s1","task":"bad name"}`)
	if _, err := s.PutSubTask(ctx, &config.SubTaskConfig{Name: "a", SourceID: "s2"}, Stage{Expect: stage.Running}); err != nil {
		t.Fatal(err)
	}
	last, err := s.PutSubTaskConfig(ctx, cfg("b")) // rewrite: b's config revision is the last one of s1
	if err != nil {
		t.Fatal(err)
	}

	snap, err := s.GetSubTasks(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision != last {
		t.Fatalf("snapshot revision = %d, want %d", snap.Revision, last)
	}
	wantNames := []string{"a", "b", "bad name", "c", "d", "e", "f"}
	if len(snap.Items) != len(wantNames) {
		t.Fatalf("items = %v, want %v", keysOf(snap.Items), wantNames)
	}

	a := snap.Items["a"]
	if a.Err != nil || a.Config == nil || a.ConfigRevision != revA || a.Stage == nil || a.Stage.Revision != revA ||
		a.Stage.Expect != stage.Running || a.ValidatorStage == nil || a.ValidatorStage.Expect != stage.Running {
		t.Fatalf("a = %+v", a)
	}
	if b := snap.Items["b"]; b.Err != nil || b.Config == nil || b.ConfigRevision != last || b.Stage != nil {
		t.Fatalf("b = %+v", b)
	}
	if c := snap.Items["c"]; c.Err != nil || c.Config != nil || c.ConfigRevision != 0 || c.Stage == nil || c.Stage.Expect != stage.Paused {
		t.Fatalf("c = %+v", c)
	}
	if d := snap.Items["d"]; !errors.Is(d.Err, ErrMalformed) || d.Config != nil || d.Stage == nil {
		t.Fatalf("d = %+v, want a malformed config and its stage", d)
	}
	if e := snap.Items["e"]; !errors.Is(e.Err, ErrMalformed) || e.Config == nil || e.Stage != nil {
		t.Fatalf("e = %+v, want its config and a malformed stage", e)
	}
	if f := snap.Items["f"]; !errors.Is(f.Err, ErrMalformed) || f.ValidatorStage != nil {
		t.Fatalf("f = %+v", f)
	}
	if bad := snap.Items["bad name"]; !errors.Is(bad.Err, config.ErrInvalidName) {
		t.Fatalf("bad name = %+v", bad)
	}

	one, rev, err := s.GetSubTask(ctx, "s1", "a")
	if err != nil || rev != last || one == nil || one.Config == nil || one.Stage == nil || one.ValidatorStage == nil {
		t.Fatalf("GetSubTask(a) = %+v, %d, %v", one, rev, err)
	}
	if none, _, err := s.GetSubTask(ctx, "s1", "zz"); none != nil || err != nil {
		t.Fatalf("GetSubTask(absent) = %+v, %v", none, err)
	}
	if _, err := s.GetSubTasks(ctx, "no/such"); !errors.Is(err, config.ErrInvalidName) {
		t.Fatalf("GetSubTasks(invalid source) err = %v", err)
	}
}

func TestGetStreamsOneRevision(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	if _, err := s.PutStreamConfig(ctx, &config.StreamConfig{Name: "x", SourceID: "s1", Snapshot: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutStreamStage(ctx, Stage{Expect: stage.Running, Source: "s1", Task: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Put(ctx, s.Keys().StreamConfig("s1", "y"), `{"name":"y","source-id":"other"}`); err != nil {
		t.Fatal(err)
	}
	last, err := s.PutStreamStage(ctx, Stage{Expect: stage.Paused, Source: "s1", Task: "y"})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.GetStreams(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision != last || len(snap.Items) != 2 {
		t.Fatalf("snapshot = rev %d items %v, want rev %d, 2 items", snap.Revision, keysOf(snap.Items), last)
	}
	if x := snap.Items["x"]; x.Err != nil || x.Config == nil || !x.Config.Snapshot || x.Stage == nil || x.Stage.Expect != stage.Running {
		t.Fatalf("x = %+v", x)
	}
	if y := snap.Items["y"]; !errors.Is(y.Err, ErrMalformed) || y.Config != nil || y.Stage == nil || y.Stage.Revision != last {
		t.Fatalf("y = %+v", y)
	}
	if one, _, err := s.GetStream(ctx, "s1", "x"); err != nil || one == nil || one.Stage == nil {
		t.Fatalf("GetStream(x) = %+v, %v", one, err)
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
