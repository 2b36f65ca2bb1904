package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const sourceYAML = `
source-id: mysql-01
flavor: MariaDB
server-id: 101
enable-gtid: true
enable-relay: true
relay-binlog-name: mariadb-bin.000001
from: {host: 127.0.0.1, port: 3307, user: root, password: "s3cret"}
purge: {interval: 600, expires: 24}
checker: {check-enable: false, backoff-max: 1m}
`

func TestParseSourceConfigDefaults(t *testing.T) {
	c, err := ParseSourceConfig([]byte(sourceYAML))
	if err != nil {
		t.Fatal(err)
	}
	requireProblems(t, c.Validate())
	want := SourceConfig{
		SourceID: "mysql-01", Flavor: FlavorMariaDB, ServerID: 101, EnableGTID: true, EnableRelay: true,
		RelayBinlogName: "mariadb-bin.000001",
		From:            DBConfig{Host: "127.0.0.1", Port: 3307, User: "root", Password: "s3cret"},
		// remain-space is not given: it keeps its default.
		Purge: PurgeConfig{Interval: 600, Expires: 24, RemainSpace: 15},
		// an explicit false is not overridden by the default true.
		Checker: CheckerConfig{CheckEnable: false, BackoffMin: Duration{time.Second}, BackoffMax: Duration{time.Minute}},
	}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("got  %#v\nwant %#v", *c, want)
	}

	// Everything absent: every default.
	c, err = ParseSourceConfig([]byte("source-id: s\nfrom: {host: h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want = SourceConfig{
		SourceID: "s",
		From:     DBConfig{Host: "h", Port: 3306},
		Purge:    PurgeConfig{Interval: 3600, Expires: 0, RemainSpace: 15},
		Checker:  CheckerConfig{CheckEnable: true, BackoffMin: Duration{time.Second}, BackoffMax: Duration{5 * time.Minute}},
	}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("defaults: got  %#v\nwant %#v", *c, want)
	}
	// Explicit zeros where zero means "off" are kept.
	c, err = ParseSourceConfig([]byte("source-id: s\nfrom: {host: h}\npurge: {remain-space: 0}\n"))
	if err != nil || c.Purge.RemainSpace != 0 {
		t.Errorf("explicit remain-space 0: %+v, %v", c.Purge, err)
	}
}

func TestSourceConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		yaml   string
		fields []string
	}{
		{name: "valid", yaml: sourceYAML},
		{name: "valid json", yaml: `{"source-id":"m1","from":{"host":"db","port":3306}}`},
		{name: "bad id and port", yaml: "source-id: 'bad id'\nfrom: {host: h, port: 70000}\n",
			fields: []string{"source-id", "from.port"}},
		{name: "empty host, bad flavor", yaml: "source-id: a\nflavor: oracle\nfrom: {host: ' '}\n",
			fields: []string{"flavor", "from.host"}},
		{name: "negative purge", yaml: "source-id: a\nfrom: {host: h}\npurge: {interval: -1, expires: -2, remain-space: -3}\n",
			fields: []string{"purge.interval", "purge.expires", "purge.remain-space"}},
		{name: "backoff", yaml: "source-id: a\nfrom: {host: h}\nchecker: {backoff-min: -1s, backoff-max: -2s}\n",
			fields: []string{"checker.backoff-min", "checker.backoff-max"}},
		{name: "backoff max below min", yaml: "source-id: a\nfrom: {host: h}\nchecker: {backoff-min: 10s, backoff-max: 5s}\n",
			fields: []string{"checker.backoff-max"}},
		{name: "nothing", yaml: "", fields: []string{"source-id", "from.host"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseSourceConfig([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			requireProblems(t, c.Validate(), tt.fields...)
		})
	}
}

func TestParseErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name  string
		parse func([]byte) error
		in    string
		want  string
	}{
		{"source unknown", func(b []byte) error { _, err := ParseSourceConfig(b); return err }, "source-id: a\nsourceid: b\n", `unknown field "sourceid"`},
		{"source nested unknown", func(b []byte) error { _, err := ParseSourceConfig(b); return err }, "from: {hots: x}\n", `unknown field "from.hots"`},
		{"source duplicate", func(b []byte) error { _, err := ParseSourceConfig(b); return err }, "source-id: a\nsource-id: b\n", `"source-id" already set`},
		{"source bad duration", func(b []byte) error { _, err := ParseSourceConfig(b); return err }, "checker: {backoff-min: soon}\n", `checker.backoff-min`},
		{"subtask unknown", func(b []byte) error { _, err := ParseSubTaskConfig(b); return err }, "syncer: {workers: 3}\n", `unknown field "syncer.workers"`},
		{"task unknown", func(b []byte) error { _, err := ParseTaskConfig(b); return err }, "name: t\nshard-modus: pessimistic\n", `unknown field "shard-modus"`},
		{"stream unknown", func(b []byte) error { _, err := ParseStreamConfig(b); return err }, "sink: {type: file, file: {dir: x, rotate: 1}}\n", `unknown field "sink.file.rotate"`},
		{"stream bad size", func(b []byte) error { _, err := ParseStreamConfig(b); return err }, "sink: {type: file, file: {dir: x, rotate-size: 64ZiB}}\n", `"64ZiB"`},
		{"not yaml", func(b []byte) error { _, err := ParseSourceConfig(b); return err }, "source-id: [\n", `yaml`},
		{"wrong type", func(b []byte) error { _, err := ParseSourceConfig(b); return err }, "from: {port: abc}\n", `from.port`},
	}
	for _, tt := range tests {
		err := tt.parse([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
}

func TestLoadSourceConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "source.yaml")
	if err := os.WriteFile(path, []byte(sourceYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadSourceConfigFile(path)
	if err != nil || c.SourceID != "mysql-01" {
		t.Fatalf("LoadSourceConfigFile = %+v, %v", c, err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("nope: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSourceConfigFile(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("bad file: %v", err)
	}
	if _, err := LoadSourceConfigFile(filepath.Join(dir, "missing.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestSourceConfigRoundTrip(t *testing.T) {
	c, err := ParseSourceConfig([]byte(sourceYAML))
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.JSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseSourceConfig(j)
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("JSON round trip: %+v, %v", back, err)
	}
	y, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err = ParseSourceConfig(y)
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("YAML round trip of\n%s: %+v, %v", y, back, err)
	}
	if !strings.Contains(string(j), `"source-id":"mysql-01"`) || !strings.Contains(string(j), `"backoff-max":"1m0s"`) {
		t.Errorf("JSON field names: %s", j)
	}
}
