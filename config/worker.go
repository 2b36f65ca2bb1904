package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// WorkerConfig configures a dm-worker process. It is read from a TOML file
// (--config) and overridden by flags of the same names.
type WorkerConfig struct {
	Name          string   `json:"name" toml:"name"`
	EtcdEndpoints []string `json:"etcd-endpoints" toml:"etcd-endpoints"`
	EtcdPrefix    string   `json:"etcd-prefix" toml:"etcd-prefix"`
	EtcdCACert    string   `json:"etcd-cacert" toml:"etcd-cacert"`
	EtcdCert      string   `json:"etcd-cert" toml:"etcd-cert"`
	EtcdKey       string   `json:"etcd-key" toml:"etcd-key"`
	// EtcdUsername and EtcdPassword log in to an etcd cluster with auth
	// enabled. The password is never logged or shown (json "-").
	EtcdUsername string `json:"etcd-username" toml:"etcd-username"`
	EtcdPassword string `json:"-" toml:"etcd-password"`
	// SecretKeyPath is the AES-256 key file (64 hex characters, mode 0600)
	// that encrypted passwords in source and task configs are decrypted with.
	SecretKeyPath string `json:"secret-key-path" toml:"secret-key-path"`
	// StatusTLSCert and StatusTLSKey make the HTTP API serve HTTPS; with
	// StatusTLSClientCA it requires client certificates signed by that CA.
	StatusTLSCert     string   `json:"status-tls-cert" toml:"status-tls-cert"`
	StatusTLSKey      string   `json:"status-tls-key" toml:"status-tls-key"`
	StatusTLSClientCA string   `json:"status-tls-client-ca" toml:"status-tls-client-ca"`
	StatusAddr        string   `json:"status-addr" toml:"status-addr"`
	AdvertiseAddr     string   `json:"advertise-addr" toml:"advertise-addr"`
	DataDir           string   `json:"data-dir" toml:"data-dir"`
	RelayDir          string   `json:"relay-dir" toml:"relay-dir"`
	KeepaliveTTL      Duration `json:"keepalive-ttl" toml:"keepalive-ttl"`
	LogLevel          string   `json:"log-level" toml:"log-level"`
	LogFile           string   `json:"log-file" toml:"log-file"`
	LogFormat         string   `json:"log-format" toml:"log-format"`
	EmbedEtcd         bool     `json:"embed-etcd" toml:"embed-etcd"`
	// Scheduler makes the worker take part in the election of the
	// scheduler, which keeps every source bound to an alive worker.
	Scheduler bool `json:"scheduler" toml:"scheduler"`
	// TargetConnectionLimit bounds the connections the worker opens to one
	// target server (host:port) over all of its tasks (extension); 0: the
	// default, 64 (dbconn.DefaultTargetConnectionLimit).
	TargetConnectionLimit int `json:"target-connection-limit" toml:"target-connection-limit"`
	// SourceConnectionLimit bounds the connections the worker opens to one
	// source server (host:port) for queries (schema and row reads,
	// prechecks, dumps, snapshots), binlog dumps not counted; 0: the
	// default, 16 (dbconn.DefaultSourceConnectionLimit).
	SourceConnectionLimit int `json:"source-connection-limit" toml:"source-connection-limit"`

	// ConfigFile is the --config flag: the TOML file the rest was read from.
	ConfigFile string `json:"-" toml:"-"`
	// PrintVersion is the --version flag: print the version and exit.
	PrintVersion bool `json:"-" toml:"-"`
}

// ParseWorkerConfig reads the worker's command line: args (without the
// program name) are parsed with a flag.FlagSet whose flags have the names of
// the TOML keys (plus --config and --version); the TOML file named by
// --config is decoded; then only the flags actually given override it; then
// Adjust fills what is still unset with the defaults. It does not validate:
// call Validate. With -h/--help it prints the usage to stderr and returns
// flag.ErrHelp. With --version it skips the config file.
func ParseWorkerConfig(args []string) (*WorkerConfig, error) {
	return parseWorkerConfig(args, os.Stderr)
}

// parseWorkerConfig is ParseWorkerConfig with the usage and flag errors
// written to out.
func parseWorkerConfig(args []string, out io.Writer) (*WorkerConfig, error) {
	def := NewWorkerConfig()
	fv := def.Clone() // the flags write here; only visited ones are copied
	fs := flag.NewFlagSet("dm-worker", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&fv.ConfigFile, "config", "", "path of the TOML config file; flags override it")
	fs.StringVar(&fv.Name, "name", def.Name, "worker name (default: the host name made valid)")
	fs.Var((*endpointList)(&fv.EtcdEndpoints), "etcd-endpoints", "comma-separated etcd client URLs")
	fs.StringVar(&fv.EtcdPrefix, "etcd-prefix", def.EtcdPrefix, "prefix of every etcd key of the cluster")
	fs.StringVar(&fv.EtcdCACert, "etcd-cacert", "", "CA certificate file for etcd TLS")
	fs.StringVar(&fv.EtcdCert, "etcd-cert", "", "client certificate file for etcd TLS")
	fs.StringVar(&fv.EtcdKey, "etcd-key", "", "client key file for etcd TLS")
	fs.StringVar(&fv.EtcdUsername, "etcd-username", "", "etcd user (etcd auth); its role needs readwrite on the etcd-prefix")
	fs.StringVar(&fv.EtcdPassword, "etcd-password", "", "password of etcd-username (prefer the TOML file: flags show in ps)")
	fs.StringVar(&fv.SecretKeyPath, "secret-key-path", "", "AES-256 key file (64 hex characters, mode 0600) that decrypts encrypted passwords")
	fs.StringVar(&fv.StatusTLSCert, "status-tls-cert", "", "certificate file: serve the HTTP API over HTTPS")
	fs.StringVar(&fv.StatusTLSKey, "status-tls-key", "", "private key file of status-tls-cert")
	fs.StringVar(&fv.StatusTLSClientCA, "status-tls-client-ca", "", "CA file: require HTTP API clients to present certificates it signed")
	fs.StringVar(&fv.StatusAddr, "status-addr", def.StatusAddr, "host:port of the HTTP status API")
	fs.StringVar(&fv.AdvertiseAddr, "advertise-addr", "", "status address others reach this worker at (default: status-addr)")
	fs.StringVar(&fv.DataDir, "data-dir", def.DataDir, "directory of the worker's local data")
	fs.StringVar(&fv.RelayDir, "relay-dir", "", "directory of relay binlog files (default: <data-dir>/relay)")
	fs.Var(&fv.KeepaliveTTL, "keepalive-ttl", "TTL of the keepalive lease in etcd (Go duration)")
	fs.StringVar(&fv.LogLevel, "log-level", def.LogLevel, "debug, info, warn or error")
	fs.StringVar(&fv.LogFile, "log-file", "", "log file (default: stderr)")
	fs.StringVar(&fv.LogFormat, "log-format", def.LogFormat, "text or json")
	fs.BoolVar(&fv.EmbedEtcd, "embed-etcd", false, "run a single-node etcd inside the process, data in <data-dir>/etcd")
	fs.BoolVar(&fv.Scheduler, "scheduler", false, "take part in electing the scheduler, which binds sources of dead workers to alive ones")
	fs.IntVar(&fv.TargetConnectionLimit, "target-connection-limit", 0,
		"connections to one target server (host:port) at most, over all tasks of the worker (0: 64)")
	fs.IntVar(&fv.SourceConnectionLimit, "source-connection-limit", 0,
		"connections to one source server (host:port) at most, binlog dumps not counted (0: 16)")
	fs.BoolVar(&fv.PrintVersion, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err // flag.ErrHelp for -h, as is
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("config: unexpected arguments %q: dm-worker takes only flags", fs.Args())
	}

	// Every worker default is a zero-is-unset default that Adjust fills at
	// the end, after the flags: relay-dir and advertise-addr derive from the
	// final data-dir and status-addr.
	cfg := &WorkerConfig{ConfigFile: fv.ConfigFile, PrintVersion: fv.PrintVersion}
	if !cfg.PrintVersion && cfg.ConfigFile != "" {
		if err := decodeWorkerTOMLFile(cfg.ConfigFile, cfg); err != nil {
			return nil, err
		}
	}
	apply := map[string]func(){
		"name":                    func() { cfg.Name = fv.Name },
		"etcd-endpoints":          func() { cfg.EtcdEndpoints = fv.EtcdEndpoints },
		"etcd-prefix":             func() { cfg.EtcdPrefix = fv.EtcdPrefix },
		"etcd-cacert":             func() { cfg.EtcdCACert = fv.EtcdCACert },
		"etcd-cert":               func() { cfg.EtcdCert = fv.EtcdCert },
		"etcd-key":                func() { cfg.EtcdKey = fv.EtcdKey },
		"etcd-username":           func() { cfg.EtcdUsername = fv.EtcdUsername },
		"etcd-password":           func() { cfg.EtcdPassword = fv.EtcdPassword },
		"secret-key-path":         func() { cfg.SecretKeyPath = fv.SecretKeyPath },
		"status-tls-cert":         func() { cfg.StatusTLSCert = fv.StatusTLSCert },
		"status-tls-key":          func() { cfg.StatusTLSKey = fv.StatusTLSKey },
		"status-tls-client-ca":    func() { cfg.StatusTLSClientCA = fv.StatusTLSClientCA },
		"status-addr":             func() { cfg.StatusAddr = fv.StatusAddr },
		"advertise-addr":          func() { cfg.AdvertiseAddr = fv.AdvertiseAddr },
		"data-dir":                func() { cfg.DataDir = fv.DataDir },
		"relay-dir":               func() { cfg.RelayDir = fv.RelayDir },
		"keepalive-ttl":           func() { cfg.KeepaliveTTL = fv.KeepaliveTTL },
		"log-level":               func() { cfg.LogLevel = fv.LogLevel },
		"log-file":                func() { cfg.LogFile = fv.LogFile },
		"log-format":              func() { cfg.LogFormat = fv.LogFormat },
		"embed-etcd":              func() { cfg.EmbedEtcd = fv.EmbedEtcd },
		"scheduler":               func() { cfg.Scheduler = fv.Scheduler },
		"target-connection-limit": func() { cfg.TargetConnectionLimit = fv.TargetConnectionLimit },
		"source-connection-limit": func() { cfg.SourceConnectionLimit = fv.SourceConnectionLimit },
	}
	fs.Visit(func(f *flag.Flag) {
		if set, ok := apply[f.Name]; ok {
			set()
		}
	})
	cfg.Adjust()
	return cfg, nil
}

// LoadWorkerConfigFile reads a worker TOML file and applies Adjust (defaults); unknown keys are an error naming them. It does not validate.
func LoadWorkerConfigFile(path string) (*WorkerConfig, error) {
	cfg := &WorkerConfig{ConfigFile: path}
	if err := decodeWorkerTOMLFile(path, cfg); err != nil {
		return nil, err
	}
	cfg.Adjust()
	return cfg, nil
}

// decodeWorkerTOMLFile decodes the TOML file at path over cfg.
func decodeWorkerTOMLFile(path string, cfg *WorkerConfig) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: read worker config %s: %w", path, err)
	}
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(cfg)
	if err != nil {
		return fmt.Errorf("config: decode worker config %s: %w", path, err)
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		keys := make([]string, len(undecoded))
		for i, k := range undecoded {
			keys[i] = strconv.Quote(k.String())
		}
		return fmt.Errorf("config: worker config %s: unknown keys %s", path, strings.Join(keys, ", "))
	}
	return nil
}

// TOML encodes the config as a TOML file ParseWorkerConfig reads back.
func (c *WorkerConfig) TOML() ([]byte, error) {
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(c); err != nil {
		return nil, fmt.Errorf("config: encode worker config as TOML: %w", err)
	}
	return buf.Bytes(), nil
}

// endpointList is a flag.Value for a comma-separated list of URLs.
type endpointList []string

func (l *endpointList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

func (l *endpointList) Set(s string) error {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return errors.New("want one or more comma-separated URLs")
	}
	*l = out
	return nil
}

// Validate reports every problem of the worker config at once as a
// *ValidationError (nil when there is none). Call it after ParseWorkerConfig.
func (c *WorkerConfig) Validate() error {
	var p problems
	p.name("name", "worker", c.Name)
	if len(c.EtcdEndpoints) == 0 {
		p.add("etcd-endpoints", "", "needs at least one etcd client URL such as http://127.0.0.1:2379")
	}
	for i, e := range c.EtcdEndpoints {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add(index("etcd-endpoints", i), redactURL(e), "must be an http or https URL with host and port, such as http://127.0.0.1:2379")
		}
	}
	if !strings.HasPrefix(c.EtcdPrefix, "/") || (len(c.EtcdPrefix) > 1 && strings.HasSuffix(c.EtcdPrefix, "/")) {
		p.add("etcd-prefix", c.EtcdPrefix, "must start with / and not end with / (e.g. /dm)")
	}
	if (c.EtcdCert == "") != (c.EtcdKey == "") {
		p.add("etcd-cert", c.EtcdCert, "etcd-cert and etcd-key must be given together")
	}
	if c.EtcdPassword != "" && c.EtcdUsername == "" {
		p.add("etcd-password", "(set)", "etcd-password needs etcd-username")
	}
	if c.EtcdUsername != "" && c.EtcdPassword == "" {
		p.add("etcd-username", c.EtcdUsername, "etcd-username needs etcd-password (in the TOML file, or the flag)")
	}
	if c.EtcdUsername != "" && c.EmbedEtcd {
		p.add("etcd-username", c.EtcdUsername, "etcd auth is for an external etcd cluster; the embedded etcd (embed-etcd) runs without auth on loopback")
	}
	if (c.StatusTLSCert == "") != (c.StatusTLSKey == "") {
		p.add("status-tls-cert", c.StatusTLSCert, "status-tls-cert and status-tls-key must be given together")
	}
	if c.StatusTLSClientCA != "" && c.StatusTLSCert == "" {
		p.add("status-tls-client-ca", c.StatusTLSClientCA, "client certificates need HTTPS: give status-tls-cert and status-tls-key too")
	}
	validateHostPort(&p, "status-addr", c.StatusAddr)
	validateHostPort(&p, "advertise-addr", c.AdvertiseAddr)
	if c.DataDir == "" {
		p.add("data-dir", c.DataDir, "must not be empty")
	}
	if c.RelayDir == "" {
		p.add("relay-dir", c.RelayDir, "must not be empty")
	}
	if c.KeepaliveTTL.Duration < time.Second {
		p.add("keepalive-ttl", c.KeepaliveTTL, "must be at least 1s")
	}
	if c.TargetConnectionLimit < 0 {
		p.add("target-connection-limit", c.TargetConnectionLimit, "must be 0 (the default, 64) or a positive number of connections")
	}
	if c.SourceConnectionLimit < 0 {
		p.add("source-connection-limit", c.SourceConnectionLimit, "must be 0 (the default, 16) or a positive number of connections")
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		p.add("log-level", c.LogLevel, "must be debug, info, warn or error")
	}
	switch strings.ToLower(c.LogFormat) {
	case "text", "json":
	default:
		p.add("log-format", c.LogFormat, "must be text or json")
	}
	return p.err()
}

// validateHostPort checks a host:port address; port 0 (pick a free port) is
// allowed.
func validateHostPort(p *problems, field, addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.add(field, addr, "must be host:port, such as 127.0.0.1:8262")
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		p.add(field, addr, "port must be a number between 0 and 65535")
	}
}
