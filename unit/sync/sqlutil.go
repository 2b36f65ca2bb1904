package syncer

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

// quoteName quotes an identifier with backticks.
func quoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// openTarget opens a pool to the target. Sessions use UTC for TIMESTAMP
// values (the binlog carries them as UTC instants), a permissive sql_mode
// that keeps zero dates and explicit zeros in AUTO_INCREMENT columns, and no
// foreign key checks (parallel apply orders changes by row, not by table).
func openTarget(db config.DBConfig, maxConns int) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User = db.User
	cfg.Passwd = db.Password
	cfg.Net = "tcp"
	cfg.Addr = net.JoinHostPort(db.Host, strconv.Itoa(db.Port))
	cfg.InterpolateParams = true
	// Batches travel as one multi-statement query (see execTx).
	cfg.MultiStatements = true
	cfg.ParseTime = false
	cfg.Timeout = 10 * time.Second
	cfg.Params = map[string]string{
		"time_zone":          "'+00:00'",
		"sql_mode":           "'NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'",
		"foreign_key_checks": "0",
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", cfg.Addr, err)
	}
	pool := sql.OpenDB(connector)
	pool.SetMaxOpenConns(maxConns)
	pool.SetMaxIdleConns(maxConns)
	pool.SetConnMaxIdleTime(5 * time.Minute)
	return pool, nil
}

// openSource opens a small pool to the source for queries (flavor).
func openSource(db config.DBConfig) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User = db.User
	cfg.Passwd = db.Password
	cfg.Net = "tcp"
	cfg.Addr = net.JoinHostPort(db.Host, strconv.Itoa(db.Port))
	cfg.Timeout = 10 * time.Second
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", cfg.Addr, err)
	}
	pool := sql.OpenDB(connector)
	pool.SetMaxOpenConns(2)
	return pool, nil
}

// detectFlavor asks the server for its version.
func detectFlavor(ctx context.Context, db *sql.DB) (string, error) {
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return "", fmt.Errorf("detect source flavor with SELECT VERSION(): %w", err)
	}
	if strings.Contains(strings.ToLower(v), "mariadb") {
		return config.FlavorMariaDB, nil
	}
	return config.FlavorMySQL, nil
}

// mysqlErrorCode returns the server error number in err's chain, 0 if none.
func mysqlErrorCode(err error) uint16 {
	var me *mysql.MySQLError
	if asMySQLError(err, &me) {
		return me.Number
	}
	return 0
}
