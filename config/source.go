package config

// DBConfig is how to reach a MySQL-compatible server.
type DBConfig struct {
	Host     string `json:"host" toml:"host"`
	Port     int    `json:"port" toml:"port"`
	User     string `json:"user" toml:"user"`
	Password string `json:"password" toml:"password"`
}

// PurgeConfig says when the relay purger removes old relay files.
type PurgeConfig struct {
	// Interval is the number of seconds between background purge checks.
	Interval int64 `json:"interval"`
	// Expires is the age in hours after which an inactive relay file is
	// purged; 0 disables purging by age.
	Expires int64 `json:"expires"`
	// RemainSpace is the free disk space in GB below which inactive relay
	// files are purged, oldest first.
	RemainSpace int64 `json:"remain-space"`
}

// CheckerConfig configures the auto-resume of work paused by a resumable error.
type CheckerConfig struct {
	CheckEnable bool     `json:"check-enable"`
	BackoffMin  Duration `json:"backoff-min"`
	BackoffMax  Duration `json:"backoff-max"`
}

// SourceConfig describes one upstream MySQL/MariaDB source.
type SourceConfig struct {
	SourceID        string        `json:"source-id"`
	Flavor          string        `json:"flavor"`
	ServerID        uint32        `json:"server-id"`
	EnableGTID      bool          `json:"enable-gtid"`
	EnableRelay     bool          `json:"enable-relay"`
	RelayBinlogName string        `json:"relay-binlog-name"`
	RelayBinlogGTID string        `json:"relay-binlog-gtid"`
	From            DBConfig      `json:"from"`
	Purge           PurgeConfig   `json:"purge"`
	Checker         CheckerConfig `json:"checker"`
}

// Flavors of upstream servers.
const (
	FlavorMariaDB = "mariadb"
	FlavorMySQL   = "mysql"
)
