package config

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const workerTOML = `
name = "file-worker"
etcd-endpoints = ["http://127.0.0.1:12379", "http://127.0.0.1:22379"]
etcd-prefix = "/cluster-a"
status-addr = "127.0.0.1:18262"
data-dir = "/var/lib/dm"
keepalive-ttl = "30s"
log-level = "debug"
log-format = "json"
embed-etcd = true
target-connection-limit = 48
source-connection-limit = 12
`

func TestParseWorkerConfigFileAndFlags(t *testing.T) {
	path := writeFile(t, "worker.toml", workerTOML)

	// File only.
	c, err := parseWorkerConfig([]string{"--config", path}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := WorkerConfig{
		Name: "file-worker", EtcdEndpoints: []string{"http://127.0.0.1:12379", "http://127.0.0.1:22379"},
		EtcdPrefix: "/cluster-a", StatusAddr: "127.0.0.1:18262", AdvertiseAddr: "127.0.0.1:18262",
		DataDir: "/var/lib/dm", RelayDir: "/var/lib/dm/relay", KeepaliveTTL: Duration{30 * time.Second},
		LogLevel: "debug", LogFormat: "json", EmbedEtcd: true, ConfigFile: path, TargetConnectionLimit: 48, SourceConnectionLimit: 12,
	}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("file only:\ngot  %+v\nwant %+v", *c, want)
	}
	requireProblems(t, c.Validate())

	// Flags win over the file, but only the flags actually given.
	c, err = parseWorkerConfig([]string{
		"--config", path, "--name", "flag-worker", "--etcd-endpoints", "http://127.0.0.1:3379, http://127.0.0.1:4379",
		"--data-dir", "/data2", "--keepalive-ttl", "5s", "--log-format", "text", "--embed-etcd=false",
		"--advertise-addr", "10.0.0.1:8262", "--etcd-cacert", "ca.pem", "--log-file", "w.log",
		"--target-connection-limit", "32", "--source-connection-limit", "8",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want = WorkerConfig{
		Name: "flag-worker", EtcdEndpoints: []string{"http://127.0.0.1:3379", "http://127.0.0.1:4379"},
		EtcdPrefix: "/cluster-a", StatusAddr: "127.0.0.1:18262", AdvertiseAddr: "10.0.0.1:8262",
		EtcdCACert: "ca.pem", LogFile: "w.log",
		DataDir: "/data2", RelayDir: "/data2/relay", KeepaliveTTL: Duration{5 * time.Second},
		LogLevel: "debug", LogFormat: "text", EmbedEtcd: false, ConfigFile: path, TargetConnectionLimit: 32, SourceConnectionLimit: 8,
	}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("flags win:\ngot  %+v\nwant %+v", *c, want)
	}
}

func TestParseWorkerConfigDefaults(t *testing.T) {
	c, err := parseWorkerConfig(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	wantName := SanitizeName(host)
	if wantName == "" {
		wantName = DefaultWorkerName
	}
	want := WorkerConfig{
		Name: wantName, EtcdEndpoints: []string{"http://127.0.0.1:2379"}, EtcdPrefix: "/dm",
		StatusAddr: "127.0.0.1:8262", AdvertiseAddr: "127.0.0.1:8262", DataDir: "./data",
		RelayDir: filepath.Join("./data", "relay"), KeepaliveTTL: Duration{10 * time.Second},
		LogLevel: "info", LogFormat: "text",
	}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("defaults:\ngot  %+v\nwant %+v", *c, want)
	}
	requireProblems(t, c.Validate())

	// relay-dir and advertise-addr follow the final data-dir/status-addr.
	c, err = parseWorkerConfig([]string{"--data-dir", "/d", "--status-addr", "127.0.0.1:0"}, io.Discard)
	if err != nil || c.RelayDir != "/d/relay" || c.AdvertiseAddr != "127.0.0.1:0" {
		t.Errorf("derived defaults: %+v, %v", c, err)
	}
}

func TestParseWorkerConfigErrors(t *testing.T) {
	unknown := writeFile(t, "unknown.toml", "name = \"w\"\nstatus_addr = \"x\"\n[log]\nlevel = \"debug\"\n")
	badType := writeFile(t, "badtype.toml", "keepalive-ttl = \"forever\"\n")
	tests := []struct {
		name string
		args []string
		want []string
		is   error
	}{
		{name: "help", args: []string{"-h"}, is: flag.ErrHelp},
		{name: "unknown keys", args: []string{"--config", unknown}, want: []string{`"status_addr"`, `"log.level"`, unknown}},
		{name: "bad duration in file", args: []string{"--config", badType}, want: []string{`"forever"`}},
		{name: "bad duration flag", args: []string{"--keepalive-ttl", "soon"}, want: []string{"keepalive-ttl", `"soon"`}},
		{name: "unknown flag", args: []string{"--nope"}, want: []string{"nope"}},
		{name: "missing file", args: []string{"--config", filepath.Join(t.TempDir(), "none.toml")}, is: os.ErrNotExist},
		{name: "positional", args: []string{"extra"}, want: []string{"extra"}},
		{name: "empty endpoints", args: []string{"--etcd-endpoints", " , "}, want: []string{"etcd-endpoints"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseWorkerConfig(tt.args, io.Discard)
			if err == nil {
				t.Fatalf("no error, got %+v", c)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestParseWorkerConfigVersion(t *testing.T) {
	// --version does not need a readable config file.
	c, err := ParseWorkerConfig([]string{"--version", "--config", filepath.Join(t.TempDir(), "none.toml")})
	if err != nil || !c.PrintVersion {
		t.Fatalf("--version: %+v, %v", c, err)
	}
}

func TestWorkerConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mod    func(c *WorkerConfig)
		fields []string
	}{
		{name: "defaults", mod: func(*WorkerConfig) {}},
		{name: "name and ttl", mod: func(c *WorkerConfig) { c.Name = "w 1"; c.KeepaliveTTL = Duration{500 * time.Millisecond} },
			fields: []string{"name", "keepalive-ttl"}},
		{name: "endpoints", mod: func(c *WorkerConfig) {
			c.EtcdEndpoints = []string{"http://127.0.0.1:2379", "127.0.0.1:2379", "ftp://x"}
		},
			fields: []string{"etcd-endpoints[1]", "etcd-endpoints[2]"}},
		{name: "no endpoints", mod: func(c *WorkerConfig) { c.EtcdEndpoints = nil }, fields: []string{"etcd-endpoints"}},
		{name: "addresses", mod: func(c *WorkerConfig) { c.StatusAddr = "8262"; c.AdvertiseAddr = "h:99999" },
			fields: []string{"status-addr", "advertise-addr"}},
		{name: "logs", mod: func(c *WorkerConfig) { c.LogLevel = "trace"; c.LogFormat = "xml" }, fields: []string{"log-level", "log-format"}},
		{name: "connection limit", mod: func(c *WorkerConfig) { c.TargetConnectionLimit = -1 }, fields: []string{"target-connection-limit"}},
		{name: "source connection limit", mod: func(c *WorkerConfig) { c.SourceConnectionLimit = -1 }, fields: []string{"source-connection-limit"}},
		{name: "prefix, tls, dirs", mod: func(c *WorkerConfig) {
			c.EtcdPrefix = "dm/"
			c.EtcdCert = "c.pem"
			c.DataDir, c.RelayDir = "", ""
		}, fields: []string{"etcd-prefix", "etcd-cert", "data-dir", "relay-dir"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewWorkerConfig()
			c.Name = "w1"
			tt.mod(c)
			requireProblems(t, c.Validate(), tt.fields...)
		})
	}
}

func TestWorkerConfigTOMLRoundTrip(t *testing.T) {
	c, err := LoadWorkerConfigFile(writeFile(t, "w.toml", workerTOML))
	if err != nil {
		t.Fatal(err)
	}
	data, err := c.TOML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := LoadWorkerConfigFile(writeFile(t, "back.toml", string(data)))
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	back.ConfigFile = c.ConfigFile
	if !reflect.DeepEqual(back, c) {
		t.Errorf("TOML round trip:\n%s\ngot  %+v\nwant %+v", data, back, c)
	}
}
