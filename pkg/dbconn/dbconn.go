// Package dbconn builds connections to MySQL-compatible servers from a
// config.DBConfig the same way everywhere (relay, sync unit): address,
// TLS from the security block, max-allowed-packet and session variables,
// and the classification of connection failures caused by TLS. It also asks
// a server which flavor it is. It owns no pools: callers open and size
// their own; a Budget bounds the connections of the pools opened through
// it to each target or source server (budget.go), and a budget of sources
// counts their binlog dumps and learns their flavor once
// (budget_source.go).
package dbconn

import (
	"context"
	"crypto/tls"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dmworker/dm-worker/config"
)

// DialTimeout bounds establishing one connection.
const DialTimeout = 10 * time.Second

// Endpoint is one server as the worker connects to it: its DBConfig, the
// TLS config built from its security block (nil = plain TCP) and the names
// error texts use. Build it with NewEndpoint; it is read-only afterwards.
type Endpoint struct {
	Ref Ref
	DB  config.DBConfig
	// TLS is the client TLS config; nil when the security block asks for
	// none. Give it to every connection to this server (the go-sql-driver
	// config from DriverConfig has it; go-mysql's BinlogSyncerConfig takes
	// it as TLSConfig).
	TLS *tls.Config
}

// NewEndpoint loads db's security files and checks its session variable
// names; the error names ref's object and the field to fix. The password
// never appears in it.
func NewEndpoint(db config.DBConfig, ref Ref) (*Endpoint, error) {
	t, err := buildTLS(db, ref)
	if err != nil {
		return nil, err
	}
	for name := range db.Session {
		if !sessionName.MatchString(name) {
			return nil, fmt.Errorf("%s: %s.session: %q is not a session variable name (letters, digits, _ and . only)", ref.Object, ref.Field, name)
		}
	}
	return &Endpoint{Ref: ref, DB: db, TLS: t}, nil
}

// sessionName is what a session variable name may look like; it is
// written into SET statements unquoted.
var sessionName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// Addr is host:port.
func (e *Endpoint) Addr() string { return net.JoinHostPort(e.DB.Host, strconv.Itoa(e.DB.Port)) }

// DriverConfig is the go-sql-driver config for the server over TCP: dial
// timeout, TLS (before authentication, never falling back to plain text),
// max-allowed-packet, and the session variables, set on every new
// connection (names lower-cased; numbers as they are, other values as
// quoted SQL strings). Callers may add their own Params; see SetDefaultParam.
func (e *Endpoint) DriverConfig() *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = e.DB.User, e.DB.Password
	cfg.Net = "tcp"
	cfg.Addr = e.Addr()
	cfg.Timeout = DialTimeout
	if e.TLS != nil {
		cfg.TLS = e.TLS.Clone()
		cfg.AllowFallbackToPlaintext = false
	}
	if e.DB.MaxAllowedPacket > 0 {
		cfg.MaxAllowedPacket = int(e.DB.MaxAllowedPacket)
	}
	if len(e.DB.Session) > 0 {
		cfg.Params = make(map[string]string, len(e.DB.Session))
		for name, value := range e.DB.Session {
			cfg.Params[strings.ToLower(name)] = sessionValue(value)
		}
	}
	return cfg
}

// SetDefaultParam sets the session variable name (lower case) on cfg
// unless the session block already sets it.
func SetDefaultParam(cfg *mysql.Config, name, value string) {
	if _, ok := cfg.Params[name]; ok {
		return
	}
	if cfg.Params == nil {
		cfg.Params = make(map[string]string)
	}
	cfg.Params[name] = value
}

// number is a value written unquoted in SET: numeric variables
// (wait_timeout, foreign_key_checks) refuse string literals.
var number = regexp.MustCompile(`^[-+]?[0-9]+(\.[0-9]+)?$`)

// sessionValue is a session variable's value as written in SET: numbers as
// they are, anything else as a string literal (DM quotes every value, which
// MariaDB refuses for numeric variables).
func sessionValue(v string) string {
	if number.MatchString(v) {
		return v
	}
	return QuoteString(v)
}

// QuoteString returns s as a single-quoted SQL string literal.
func QuoteString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\x00", `\0`, "\n", `\n`, "\r", `\r`, "\x1a", `\Z`)
	return "'" + r.Replace(s) + "'"
}

// Open opens a lazily connecting pool with cfg (from DriverConfig, maybe
// adjusted). A connection that fails because of TLS returns a CodeTLS
// error naming the setting to fix (see ConnectError).
func (e *Endpoint) Open(cfg *mysql.Config) (*sql.DB, error) {
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: server %s: %w", e.Ref.Object, cfg.Addr, err)
	}
	return sql.OpenDB(&connector{inner: c, e: e}), nil
}

// connector classifies the errors of new connections and, for a pool
// opened by Budget.Open, takes each connection's token of the budget.
type connector struct {
	inner driver.Connector
	e     *Endpoint
	pool  *Pool // nil: not budgeted
}

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	if c.pool != nil {
		return c.pool.connect(ctx, c.inner, c.e)
	}
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, c.e.ConnectError(err)
	}
	return conn, nil
}

func (c *connector) Driver() driver.Driver { return c.inner.Driver() }

// Close is called by sql.DB.Close: the pool leaves its budget.
func (c *connector) Close() error {
	if c.pool != nil {
		c.pool.unregister()
	}
	return nil
}

// DetectFlavor asks the server for its version: config.FlavorMariaDB or
// config.FlavorMySQL.
func DetectFlavor(ctx context.Context, db *sql.DB) (string, error) {
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return "", fmt.Errorf("detect the server's flavor with SELECT VERSION(): %w", err)
	}
	if strings.Contains(strings.ToLower(v), "mariadb") {
		return config.FlavorMariaDB, nil
	}
	return config.FlavorMySQL, nil
}
