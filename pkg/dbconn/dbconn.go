// Package dbconn builds connections to MySQL-compatible servers from a
// config.DBConfig the same way everywhere (relay, sync unit), and asks a
// server which flavor it is. It owns no pools: callers open and size their
// own.
package dbconn

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dmworker/dm-worker/config"
)

// DialTimeout bounds establishing one connection.
const DialTimeout = 10 * time.Second

// DriverConfig is the go-sql-driver config for db over TCP, with a dial
// timeout; callers add their own session settings.
func DriverConfig(db config.DBConfig) *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = db.User, db.Password
	cfg.Net = "tcp"
	cfg.Addr = net.JoinHostPort(db.Host, strconv.Itoa(db.Port))
	cfg.Timeout = DialTimeout
	return cfg
}

// Open opens a lazily connecting pool with cfg; the error names the address.
func Open(cfg *mysql.Config) (*sql.DB, error) {
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", cfg.Addr, err)
	}
	return sql.OpenDB(connector), nil
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
