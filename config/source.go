package config

import "strings"

// DBConfig is how to reach a MySQL-compatible server.
type DBConfig struct {
	Host     string `json:"host" toml:"host"`
	Port     int    `json:"port" toml:"port"`
	User     string `json:"user" toml:"user"`
	Password string `json:"password" toml:"password"`
	// MaxAllowedPacket caps one packet sent to the server (bytes; 0 = the
	// driver's default, 64 MiB). DM's field of the same name.
	MaxAllowedPacket ByteSize `json:"max-allowed-packet,omitempty" toml:"max-allowed-packet"`
	// Session holds session variables set on every connection (DM's
	// `session`, e.g. {sql_mode: "...", time_zone: "+00:00"}).
	Session map[string]string `json:"session,omitempty" toml:"session"`
	// Security is the TLS block; nil or empty = plain TCP.
	Security *Security `json:"security,omitempty" toml:"security"`
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
	// CaseSensitive makes table names in the source's filters case
	// sensitive; as in DM, a subtask compares names case-sensitively when
	// its own case-sensitive or its source's is true.
	CaseSensitive bool `json:"case-sensitive,omitempty"`
	// Filters are binlog event filter rules applied to every subtask of the
	// source after the subtask's own rules; a source rule with the same
	// schema-pattern and table-pattern as a subtask rule is left out (the
	// task's rule wins), as in DM.
	Filters []FilterRule `json:"filters,omitempty"`

	// Notes lists what decoding left out or renamed; never encoded.
	Notes DecodeNotes `json:"-" toml:"-"`
}

// Flavors of upstream servers.
const (
	FlavorMariaDB = "mariadb"
	FlavorMySQL   = "mysql"
)

// Validate reports every problem of the source config at once as a
// *ValidationError (nil when there is none). Call it after Parse/Adjust.
func (c *SourceConfig) Validate() error {
	var p problems
	p.name("source-id", "source", c.SourceID)
	switch strings.ToLower(c.Flavor) {
	case "", FlavorMariaDB, FlavorMySQL:
	default:
		p.add("flavor", c.Flavor, `must be "mariadb", "mysql" or empty (detected from the server)`)
	}
	c.From.validate(&p, "from")
	if c.Purge.Interval < 0 {
		p.add("purge.interval", c.Purge.Interval, "must not be negative (seconds)")
	}
	if c.Purge.Expires < 0 {
		p.add("purge.expires", c.Purge.Expires, "must not be negative (hours; 0 disables purging by age)")
	}
	if c.Purge.RemainSpace < 0 {
		p.add("purge.remain-space", c.Purge.RemainSpace, "must not be negative (GB; 0 disables purging by free space)")
	}
	if c.Checker.BackoffMin.Duration <= 0 {
		p.add("checker.backoff-min", c.Checker.BackoffMin, "must be positive")
	}
	for i := range c.Filters {
		c.Filters[i].validate(&p, index("filters", i))
	}
	if c.Checker.BackoffMax.Duration < c.Checker.BackoffMin.Duration {
		p.add("checker.backoff-max", c.Checker.BackoffMax, "must not be less than checker.backoff-min ("+c.Checker.BackoffMin.String()+")")
	}
	return p.err()
}
