package ha

import "testing"

func TestKeys(t *testing.T) {
	k := Keys{Prefix: "/dm"}
	tests := []struct{ got, want string }{
		{k.WorkerInfo("w1"), "/dm/worker/info/w1"},
		{k.Keepalive("w1"), "/dm/worker/keepalive/w1"},
		{k.SourceConfig("s1"), "/dm/source/config/s1"},
		{k.Bound("w1"), "/dm/source/bound/w1"},
		{k.RelayBound("w1"), "/dm/source/relay/w1"},
		{k.RelayStage("s1"), "/dm/stage/relay/s1"},
		{k.SubTaskConfig("s1", "t1"), "/dm/task/config/s1/t1"},
		{k.SubTaskStage("s1", "t1"), "/dm/stage/subtask/s1/t1"},
		{k.SubTaskStagePrefix("s1"), "/dm/stage/subtask/s1/"},
		{k.ValidatorStage("s1", "t1"), "/dm/stage/validator/s1/t1"},
		{k.StreamConfig("s1", "x"), "/dm/stream/config/s1/x"},
		{k.StreamStage("s1", "x"), "/dm/stage/stream/s1/x"},
		{k.Status("w1"), "/dm/status/w1"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestNewStorePrefix(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "/dm"},
		{"/dm", "/dm"},
		{"/dm/", "/dm"},
		{"/other", "/other"},
	}
	for _, tt := range tests {
		if got := NewStore(nil, tt.in).Prefix(); got != tt.want {
			t.Errorf("NewStore(%q).Prefix() = %q, want %q", tt.in, got, tt.want)
		}
	}
}
