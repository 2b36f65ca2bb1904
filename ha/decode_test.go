package ha

import (
	"errors"
	"reflect"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/stage"
)

func TestDecodeStages(t *testing.T) {
	s := NewStore(nil, "/dm")
	k := s.Keys()
	tests := []struct {
		name    string
		dec     Decoder[Stage]
		key     string
		value   []byte
		want    Stage
		wantErr error // nil: no error
	}{
		{"subtask ok", s.DecodeSubTaskStage, k.SubTaskStage("s1", "t1"),
			[]byte(`{"expect":"Running","source":"s1","task":"t1"}`),
			Stage{Expect: stage.Running, Source: "s1", Task: "t1"}, nil},
		{"subtask deleted", s.DecodeSubTaskStage, k.SubTaskStage("s1", "t1"), nil,
			Stage{Source: "s1", Task: "t1", IsDeleted: true}, nil},
		{"subtask unknown stage", s.DecodeSubTaskStage, k.SubTaskStage("s1", "t1"),
			[]byte(`{"expect":"Finished","source":"s1","task":"t1"}`), Stage{}, ErrMalformed},
		{"subtask source mismatch", s.DecodeSubTaskStage, k.SubTaskStage("s1", "t1"),
			[]byte(`{"expect":"Running","source":"s2","task":"t1"}`), Stage{}, ErrMalformed},
		{"subtask task mismatch", s.DecodeSubTaskStage, k.SubTaskStage("s1", "t1"),
			[]byte(`{"expect":"Running","source":"s1","task":"t2"}`), Stage{}, ErrMalformed},
		{"subtask bad json", s.DecodeSubTaskStage, k.SubTaskStage("s1", "t1"), []byte(`{`), Stage{}, ErrMalformed},
		{"subtask empty value", s.DecodeSubTaskStage, k.SubTaskStage("s1", "t1"), []byte{}, Stage{}, ErrMalformed},
		{"subtask invalid name", s.DecodeSubTaskStage, k.SubTaskStage("s1", "-bad"),
			[]byte(`{"expect":"Running","source":"s1","task":"-bad"}`), Stage{}, config.ErrInvalidName},
		{"subtask invalid name on delete", s.DecodeSubTaskStage, k.SubTaskStage("s1", "a/b"), nil, Stage{}, config.ErrInvalidName},
		{"subtask no task in key", s.DecodeSubTaskStage, "/dm/stage/subtask/s1", nil, Stage{}, ErrBadKey},
		{"subtask wrong kind", s.DecodeSubTaskStage, k.StreamStage("s1", "t1"), nil, Stage{}, ErrBadKey},
		{"validator running", s.DecodeValidatorStage, k.ValidatorStage("s1", "t1"),
			[]byte(`{"expect":"Running","source":"s1","task":"t1"}`),
			Stage{Expect: stage.Running, Source: "s1", Task: "t1"}, nil},
		{"validator paused", s.DecodeValidatorStage, k.ValidatorStage("s1", "t1"),
			[]byte(`{"expect":"Paused","source":"s1","task":"t1"}`), Stage{}, ErrMalformed},
		{"relay ok", s.DecodeRelayStage, k.RelayStage("s1"),
			[]byte(`{"expect":"Paused","source":"s1"}`), Stage{Expect: stage.Paused, Source: "s1"}, nil},
		{"relay with task", s.DecodeRelayStage, k.RelayStage("s1"),
			[]byte(`{"expect":"Paused","source":"s1","task":"t"}`), Stage{}, ErrMalformed},
		{"relay deleted", s.DecodeRelayStage, k.RelayStage("s1"), nil, Stage{Source: "s1", IsDeleted: true}, nil},
		{"stream ignore-untreated", s.DecodeStreamStage, k.StreamStage("s1", "x"),
			[]byte(`{"expect":"Running","source":"s1","task":"x","ignore-untreated":true}`),
			Stage{Expect: stage.Running, Source: "s1", Task: "x", IgnoreUntreated: true}, nil},
		{"stream deleted", s.DecodeStreamStage, k.StreamStage("s1", "x"), nil,
			Stage{Source: "s1", Task: "x", IsDeleted: true}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.dec(tt.key, tt.value)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeConfigsAndBounds(t *testing.T) {
	s := NewStore(nil, "/dm")
	k := s.Keys()

	cfg, err := s.DecodeSubTaskConfig(k.SubTaskConfig("s1", "t1"), []byte(`{"name":"t1","source-id":"s1","task-mode":"all"}`))
	if err != nil || cfg.TaskMode != "all" {
		t.Fatalf("DecodeSubTaskConfig = %+v, %v", cfg, err)
	}
	if _, err := s.DecodeSubTaskConfig(k.SubTaskConfig("s1", "t1"), []byte(`{"name":"t2","source-id":"s1"}`)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("name mismatch: err = %v", err)
	}
	if cfg, err := s.DecodeSubTaskConfig(k.SubTaskConfig("s1", "t1"), nil); cfg != nil || err != nil {
		t.Fatalf("delete: %v, %v", cfg, err)
	}
	if _, err := s.DecodeSourceConfig(k.SourceConfig("s1"), []byte(`{"source-id":"s2"}`)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("source mismatch: err = %v", err)
	}
	if _, err := s.DecodeStreamConfig(k.StreamConfig("s1", "x"), []byte(`{"name":"x","source-id":"s1","snapshot":"yes"}`)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad field type: err = %v", err)
	}

	b, err := s.DecodeBound(k.Bound("w1"), nil)
	if err != nil || !reflect.DeepEqual(b, Bound{Worker: "w1", IsDeleted: true}) {
		t.Fatalf("bound delete = %+v, %v", b, err)
	}
	if _, err := s.DecodeBound(k.Bound("w1"), []byte(`{"source":"s1","worker":"w2"}`)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bound worker mismatch: err = %v", err)
	}
	if _, err := s.DecodeRelayBound(k.RelayBound("w1"), []byte(`{"source":"bad name","worker":"w1"}`)); !errors.Is(err, config.ErrInvalidName) {
		t.Fatalf("relay bound bad source: err = %v", err)
	}
}
