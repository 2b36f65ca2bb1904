package config

// WorkerConfig configures a dm-worker process. It is read from a TOML file
// (--config) and overridden by flags of the same names.
type WorkerConfig struct {
	Name          string   `json:"name" toml:"name"`
	EtcdEndpoints []string `json:"etcd-endpoints" toml:"etcd-endpoints"`
	EtcdPrefix    string   `json:"etcd-prefix" toml:"etcd-prefix"`
	EtcdCACert    string   `json:"etcd-cacert" toml:"etcd-cacert"`
	EtcdCert      string   `json:"etcd-cert" toml:"etcd-cert"`
	EtcdKey       string   `json:"etcd-key" toml:"etcd-key"`
	StatusAddr    string   `json:"status-addr" toml:"status-addr"`
	AdvertiseAddr string   `json:"advertise-addr" toml:"advertise-addr"`
	DataDir       string   `json:"data-dir" toml:"data-dir"`
	RelayDir      string   `json:"relay-dir" toml:"relay-dir"`
	KeepaliveTTL  Duration `json:"keepalive-ttl" toml:"keepalive-ttl"`
	LogLevel      string   `json:"log-level" toml:"log-level"`
	LogFile       string   `json:"log-file" toml:"log-file"`
	LogFormat     string   `json:"log-format" toml:"log-format"`
	EmbedEtcd     bool     `json:"embed-etcd" toml:"embed-etcd"`
}
