package config

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"sigs.k8s.io/yaml"
)

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want ByteSize
		err  string
	}{
		{in: "100", want: 100},
		{in: "100B", want: 100},
		{in: "512KiB", want: 512 << 10},
		{in: "64MiB", want: 64 << 20},
		{in: "64mib", want: 64 << 20},
		{in: "1GB", want: 1000 * 1000 * 1000},
		{in: "1.5GiB", want: 3 << 29},
		{in: "2 KB", want: 2000},
		{in: "1PiB", want: 1 << 50},
		{in: "", err: "invalid size"},
		{in: "-1", err: "invalid size \"-1\""},
		{in: "12XB", err: "unknown unit \"XB\""},
		{in: "1.5B", err: "not a whole number"},
		{in: "10000PiB", err: "too large"},
		{in: "1e3", err: "want a number of bytes"},
	}
	for _, tt := range tests {
		got, err := ParseByteSize(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), tt.in) {
				t.Errorf("ParseByteSize(%q) = %v, %v; want error containing %q and the value", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseByteSize(%q) = %v, %v; want %d", tt.in, int64(got), err, tt.want)
		}
		// String reads back to the same value.
		back, err := ParseByteSize(got.String())
		if err != nil || back != got {
			t.Errorf("ParseByteSize(%q.String()=%q) = %v, %v", tt.in, got.String(), back, err)
		}
	}
}

func TestByteSizeString(t *testing.T) {
	for in, want := range map[ByteSize]string{0: "0B", 100: "100B", 64 << 20: "64MiB", 1536 << 10: "1536KiB", 1 << 30: "1GiB"} {
		if got := in.String(); got != want {
			t.Errorf("ByteSize(%d).String() = %q, want %q", int64(in), got, want)
		}
	}
}

type unitsDoc struct {
	D Duration `json:"d" toml:"d"`
	B ByteSize `json:"b" toml:"b"`
}

func TestUnitsEncodings(t *testing.T) {
	want := unitsDoc{D: Duration{90 * time.Second}, B: 64 << 20}

	// JSON: durations are strings, sizes plain numbers.
	j, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(j) != `{"d":"1m30s","b":67108864}` {
		t.Errorf("JSON = %s", j)
	}
	for _, in := range []string{`{"d":"1m30s","b":67108864}`, `{"d":"90s","b":"64MiB"}`} {
		var got unitsDoc
		if err := json.Unmarshal([]byte(in), &got); err != nil || got != want {
			t.Errorf("json %s = %+v, %v", in, got, err)
		}
	}

	// YAML goes through JSON.
	var got unitsDoc
	if err := yaml.UnmarshalStrict([]byte("d: 90s\nb: 64MiB\n"), &got); err != nil || got != want {
		t.Errorf("yaml = %+v, %v", got, err)
	}
	y, err := yaml.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got = unitsDoc{}
	if err := yaml.UnmarshalStrict(y, &got); err != nil || got != want {
		t.Errorf("yaml round trip of %s = %+v, %v", y, got, err)
	}

	// TOML: text marshalers; a TOML integer is accepted as a size.
	for _, in := range []string{"d = \"90s\"\nb = \"64MiB\"\n", "d = \"1m30s\"\nb = 67108864\n"} {
		got = unitsDoc{}
		if _, err := toml.Decode(in, &got); err != nil || got != want {
			t.Errorf("toml %q = %+v, %v", in, got, err)
		}
	}
	var sb strings.Builder
	if err := toml.NewEncoder(&sb).Encode(want); err != nil {
		t.Fatal(err)
	}
	got = unitsDoc{}
	if _, err := toml.Decode(sb.String(), &got); err != nil || got != want {
		t.Errorf("toml round trip of %q = %+v, %v", sb.String(), got, err)
	}
}

func TestUnitsErrors(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`{"d":"soon"}`, []string{`"soon"`, "d", "Go duration"}},
		{`{"d":10}`, []string{"10", "Go duration"}},
		{`{"b":"64XB"}`, []string{`"64XB"`, "b"}},
		{`{"b":-5}`, []string{`"-5"`}},
	}
	for _, tt := range tests {
		var got unitsDoc
		err := json.Unmarshal([]byte(tt.in), &got)
		if err == nil {
			t.Errorf("json %s: no error", tt.in)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("json %s: error %q lacks %q", tt.in, err, w)
			}
		}
	}
	var d Duration
	if err := d.Set("5x"); err == nil || !strings.Contains(err.Error(), `"5x"`) {
		t.Errorf("Duration.Set(5x) = %v", err)
	}
}
