package relay

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
)

// upstream is what the relay needs to know about the server it pulls from.
type upstream struct {
	mariadb bool
	uuid    string // upstream id naming the subdirectory (see the package doc)
}

// openDB opens a pool to the source; it connects lazily.
func openDB(from config.DBConfig) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = from.User, from.Password
	cfg.Net = "tcp"
	cfg.Addr = net.JoinHostPort(from.Host, strconv.Itoa(from.Port))
	cfg.Timeout = 10 * time.Second
	cfg.ReadTimeout = 30 * time.Second
	cfg.WriteTimeout = 30 * time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("relay: source address %s: %w", cfg.Addr, err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(time.Minute)
	return db, nil
}

// detectUpstream asks the source for its flavor (when flavor is "") and id.
func detectUpstream(ctx context.Context, db *sql.DB, flavor string) (upstream, error) {
	var up upstream
	switch strings.ToLower(flavor) {
	case config.FlavorMariaDB:
		up.mariadb = true
	case config.FlavorMySQL:
	default:
		var version string
		if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
			return up, fmt.Errorf("relay: detect the source's flavor: %w", err)
		}
		up.mariadb = strings.Contains(strings.ToLower(version), "mariadb")
	}
	if up.mariadb {
		var serverID, domain uint64
		if err := db.QueryRowContext(ctx, "SELECT @@server_id, @@gtid_domain_id").Scan(&serverID, &domain); err != nil {
			return up, fmt.Errorf("relay: read the source's @@server_id and @@gtid_domain_id: %w", err)
		}
		up.uuid = fmt.Sprintf("mariadb-%d-%d", serverID, domain)
		return up, nil
	}
	if err := db.QueryRowContext(ctx, "SELECT @@server_uuid").Scan(&up.uuid); err != nil {
		return up, fmt.Errorf("relay: read the source's @@server_uuid: %w", err)
	}
	return up, nil
}

// oldestBinlog returns the first file of SHOW BINARY LOGS.
func oldestBinlog(ctx context.Context, db *sql.DB) (string, error) {
	rows, err := db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		return "", fmt.Errorf("relay: SHOW BINARY LOGS: %w", err)
	}
	defer func() { _ = rows.Close() }()
	cols, err := rows.Columns()
	if err != nil {
		return "", fmt.Errorf("relay: SHOW BINARY LOGS: %w", err)
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return "", fmt.Errorf("relay: SHOW BINARY LOGS: %w", err)
		}
		return "", fmt.Errorf("relay: SHOW BINARY LOGS returned no file: is log_bin on at the source?")
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return "", fmt.Errorf("relay: SHOW BINARY LOGS: %w", err)
	}
	return string(vals[0]), nil
}

// masterStatus returns SHOW MASTER STATUS's file and position.
func masterStatus(ctx context.Context, db *sql.DB) (binlog.Location, error) {
	rows, err := db.QueryContext(ctx, "SHOW MASTER STATUS")
	if err != nil {
		return binlog.Location{}, fmt.Errorf("relay: SHOW MASTER STATUS: %w", err)
	}
	defer func() { _ = rows.Close() }()
	cols, err := rows.Columns()
	if err != nil {
		return binlog.Location{}, fmt.Errorf("relay: SHOW MASTER STATUS: %w", err)
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return binlog.Location{}, fmt.Errorf("relay: SHOW MASTER STATUS: %w", err)
		}
		return binlog.Location{}, fmt.Errorf("relay: SHOW MASTER STATUS returned nothing: is log_bin on at the source?")
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil || len(vals) < 2 {
		return binlog.Location{}, fmt.Errorf("relay: SHOW MASTER STATUS: %w", err)
	}
	pos, err := strconv.ParseUint(string(vals[1]), 10, 32)
	if err != nil {
		return binlog.Location{}, fmt.Errorf("relay: SHOW MASTER STATUS position %q: %w", vals[1], err)
	}
	return binlog.Location{Name: string(vals[0]), Pos: uint32(pos)}, nil
}

// ServerID returns the replica server id the relay registers with: the
// configured one, or a stable hash of worker and source in
// [0x40000000, 0x7fffffff], far above the ids people give servers by hand.
func ServerID(configured uint32, worker, source string) uint32 {
	if configured != 0 {
		return configured
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(worker + "\x00" + source))
	return 0x40000000 + h.Sum32()%0x3fffffff
}
