package ha

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/config"
)

// fuzzKind is one key kind of DESIGN.md §3 as the fuzz target sees it: how
// its key is built from (up to) two names, its decoder, and the names a
// decoded value must carry.
type fuzzKind struct {
	name  string
	two   bool // the key has {source}/{name}; else one name
	key   func(k Keys, a, b string) string
	dec   func(s *Store) Decoder[any]
	names func(v any) (a, b string, deleted bool) // names carried by a decoded value
}

func stageNames(v any) (string, string, bool) {
	st := v.(Stage)
	return st.Source, st.Task, st.IsDeleted
}

func boundNames(v any) (string, string, bool) {
	b := v.(Bound)
	return b.Worker, "", b.IsDeleted
}

var fuzzKinds = []fuzzKind{
	{"worker info", false, func(k Keys, a, _ string) string { return k.WorkerInfo(a) },
		func(s *Store) Decoder[any] { return asAny(s.DecodeWorkerInfo) },
		func(v any) (string, string, bool) { return v.(WorkerInfo).Name, "", false }},
	{"keepalive", false, func(k Keys, a, _ string) string { return k.Keepalive(a) },
		func(s *Store) Decoder[any] { return asAny(s.DecodeKeepalive) },
		func(v any) (string, string, bool) { return v.(KeepaliveInfo).Name, "", false }},
	{"source config", false, func(k Keys, a, _ string) string { return k.SourceConfig(a) },
		func(s *Store) Decoder[any] { return asAny(s.DecodeSourceConfig) },
		func(v any) (string, string, bool) {
			c := v.(*config.SourceConfig)
			if c == nil {
				return "", "", true
			}
			return c.SourceID, "", false
		}},
	{"bound", false, func(k Keys, a, _ string) string { return k.Bound(a) },
		func(s *Store) Decoder[any] { return asAny(s.DecodeBound) }, boundNames},
	{"relay bound", false, func(k Keys, a, _ string) string { return k.RelayBound(a) },
		func(s *Store) Decoder[any] { return asAny(s.DecodeRelayBound) }, boundNames},
	{"relay stage", false, func(k Keys, a, _ string) string { return k.RelayStage(a) },
		func(s *Store) Decoder[any] { return asAny(s.DecodeRelayStage) }, stageNames},
	{"subtask config", true, Keys.SubTaskConfig,
		func(s *Store) Decoder[any] { return asAny(s.DecodeSubTaskConfig) },
		func(v any) (string, string, bool) {
			c := v.(*config.SubTaskConfig)
			if c == nil {
				return "", "", true
			}
			return c.SourceID, c.Name, false
		}},
	{"subtask stage", true, Keys.SubTaskStage,
		func(s *Store) Decoder[any] { return asAny(s.DecodeSubTaskStage) }, stageNames},
	{"validator stage", true, Keys.ValidatorStage,
		func(s *Store) Decoder[any] { return asAny(s.DecodeValidatorStage) }, stageNames},
	{"stream config", true, Keys.StreamConfig,
		func(s *Store) Decoder[any] { return asAny(s.DecodeStreamConfig) },
		func(v any) (string, string, bool) {
			c := v.(*config.StreamConfig)
			if c == nil {
				return "", "", true
			}
			return c.SourceID, c.Name, false
		}},
	{"stream stage", true, Keys.StreamStage,
		func(s *Store) Decoder[any] { return asAny(s.DecodeStreamStage) }, stageNames},
	{"status", false, func(k Keys, a, _ string) string { return k.Status(a) },
		func(s *Store) Decoder[any] { return asAny(s.DecodeStatus) }, nil},
}

// fuzzSeedValues are realistic and hostile values for every kind.
func fuzzSeedValues(t testing.TB) map[string][]string {
	t.Helper()
	src := config.NewSourceConfig()
	src.SourceID = "s1"
	src.From = config.DBConfig{Host: "127.0.0.1", Port: 3306, User: "root", Password: "pw-secret-1"}
	sub := config.NewSubTaskConfig()
	sub.Name, sub.SourceID = "t1", "s1"
	sub.TargetDatabase = config.DBConfig{Host: "127.0.0.1", Port: 4000, User: "root", Password: "pw-secret-2"}
	stream := config.NewStreamConfig()
	stream.Name, stream.SourceID = "t1", "s1"
	enc := func(v interface{ JSON() ([]byte, error) }) string {
		b, err := v.JSON()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return map[string][]string{
		"worker info":     {`{"name":"w1","addr":"127.0.0.1:8262"}`},
		"keepalive":       {`{"name":"w1","join-time":"2026-01-02T03:04:05Z"}`},
		"source config":   {enc(src), `{"source-id":"s1","from":{"host":"h","password":"pw-secret-3"}}`, `{"source-id":"s1"}`},
		"bound":           {`{"source":"s1","worker":"w1"}`, `{"source":"","worker":"w1"}`},
		"relay bound":     {`{"source":"s1","worker":"w1"}`},
		"relay stage":     {`{"expect":"Running","source":"s1"}`, `{"expect":"Paused","source":"s1"}`},
		"subtask config":  {enc(sub), `{"name":"t1","source-id":"s1","task-mode":"all"}`, `{"name":"t1","source-id":"s1","target-database":{"password":"pw-secret-4"}}`},
		"subtask stage":   {`{"expect":"Running","source":"s1","task":"t1"}`, `{"expect":"Stopped","source":"s1","task":"t1"}`},
		"validator stage": {`{"expect":"Running","source":"s1","task":"t1"}`},
		"stream config":   {enc(stream), `{"name":"t1","source-id":"s1"}`},
		"stream stage":    {`{"expect":"Running","source":"s1","task":"t1","ignore-untreated":true}`},
		"status":          {`{"name":"w1"}`},
	}
}

// passwordIn returns the password a value gives (from or target-database)
// when it is long enough and said only once, so that finding it in an error
// can only come from that field.
func passwordIn(value []byte) string {
	var v struct {
		From           struct{ Password string } `json:"from"`
		TargetDatabase struct{ Password string } `json:"target-database"`
	}
	_ = json.Unmarshal(value, &v) // partial results are fine
	for _, pw := range []string{v.From.Password, v.TargetDatabase.Password} {
		if len(pw) >= 6 && strings.Count(string(value), pw) == 1 {
			return pw
		}
	}
	return ""
}

// FuzzDecode runs every Store.Decode* on fuzzed keys and values. A key is
// built from two fuzzed names (or, with the high bit of kind, is the fuzzed
// text itself). Properties: no panic; every error matches ErrMalformed,
// ErrBadKey or config.ErrInvalidName and never shows the value's password;
// a decoded value carries the key's names; a delete (nil value) of a valid
// key decodes to the key's names; a decoded value re-encodes (JSON) and
// decodes to an equal value.
func FuzzDecode(f *testing.F) {
	seeds := fuzzSeedValues(f)
	for i, k := range fuzzKinds {
		for _, v := range seeds[k.name] {
			f.Add(uint8(i), "s1", "t1", []byte(v))
			f.Add(uint8(i), "w1", "", []byte(v))
		}
		f.Add(uint8(i), "s1", "t1", []byte(nil))
		f.Add(uint8(i), "-bad", "a/b", []byte(`{}`))
		for _, v := range []string{"", "null", "{", "[]", `"x"`, "1e999", `{"expect":"Finished"}`, `{"source-id":1}`,
			`{"name":"t1","source-id":"s1","from":{"port":"x","password":"pw-secret-5"}}`,
			`{"source-id":"s1","checker":{"backoff-min":"-1s"},"from":{"password":"pw-secret-6"}}`} {
			f.Add(uint8(i), "s1", "t1", []byte(v))
		}
		f.Add(uint8(i)|0x80, "/dm/stage/subtask/s1/t1/extra", "", []byte(`{"expect":"Running","source":"s1","task":"t1/extra"}`))
		f.Add(uint8(i)|0x80, "/dm"+strings.Repeat("/", 3)+"x", "", []byte(`{}`))
	}
	s := NewStore(nil, "/dm")
	f.Fuzz(func(t *testing.T, kind uint8, a, b string, value []byte) {
		k := fuzzKinds[int(kind&0x7f)%len(fuzzKinds)]
		raw := kind&0x80 != 0
		key := a
		if !raw {
			if !k.two {
				b = ""
			}
			key = k.key(s.Keys(), a, b)
		}
		dec := k.dec(s)
		v, err := dec(key, value)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrBadKey) && !errors.Is(err, config.ErrInvalidName) {
				t.Fatalf("%s %q: error %v (%T) matches none of ErrMalformed, ErrBadKey, ErrInvalidName", k.name, key, err, err)
			}
			if pw := passwordIn(value); pw != "" && strings.Contains(err.Error(), pw) {
				t.Fatalf("%s %q: error shows the password: %v", k.name, key, err)
			}
			return
		}
		if raw || k.names == nil {
			return // the key's names are unknown here; the rest is checked on built keys
		}
		// The key is valid (it decoded): names come back from it or the value.
		if config.ValidateName("x", a) != nil || (k.two && config.ValidateName("x", b) != nil) {
			t.Fatalf("%s %q decodes though its names %q, %q are invalid", k.name, key, a, b)
		}
		gotA, gotB, deleted := k.names(v)
		if value == nil {
			// A delete: stages and bounds carry the key's names, configs are nil.
			if isConfig := strings.Contains(k.name, "config"); isConfig != (gotA == "" && deleted) {
				t.Fatalf("%s %q: delete decodes to %#v", k.name, key, v)
			} else if !isConfig && (gotA != a || gotB != b) {
				t.Fatalf("%s %q: delete decodes to names %q, %q; the key says %q, %q", k.name, key, gotA, gotB, a, b)
			}
			return
		}
		if deleted || gotA != a || gotB != b {
			t.Fatalf("%s %q: decoded names %q, %q (deleted %v); the key says %q, %q", k.name, key, gotA, gotB, deleted, a, b)
		}
		// Re-encoding is a fixed point: encode(decode(encode(v))) == encode(v).
		// (Fields that are not part of the value, json:"-", drop out.)
		enc, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: encode the decoded value: %v", k.name, err)
		}
		v2, err := dec(key, enc)
		if err != nil {
			t.Fatalf("%s %q: the re-encoded value %s does not decode: %v", k.name, key, enc, err)
		}
		enc2, err := json.Marshal(v2)
		if err != nil {
			t.Fatalf("%s: encode the decoded value: %v", k.name, err)
		}
		if string(enc) != string(enc2) {
			t.Fatalf("%s %q: decode(encode(v)) differs:\nvalue %q\n%s\n%s", k.name, key, value, enc, enc2)
		}
	})
}
