package relay

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/dbconn"
)

// upstream is what the relay needs to know about the server it pulls from.
type upstream struct {
	mariadb bool
	uuid    string // upstream id naming the subdirectory (see the package doc)
}

// openDB opens a pool to the source, from budget b (nil: a pool of its
// own); it connects lazily. ep is how every connection of the relay
// reaches the source (TLS included).
func openDB(src *config.SourceConfig, b *dbconn.Budget) (*dbconn.Endpoint, *sql.DB, error) {
	ep, err := dbconn.NewEndpoint(src.From, dbconn.SourceRef(src.SourceID))
	if err != nil {
		return nil, nil, fmt.Errorf("relay: %w", err)
	}
	cfg := ep.DriverConfig()
	cfg.ReadTimeout = 30 * time.Second
	cfg.WriteTimeout = 30 * time.Second
	if b != nil {
		db, err := b.Open(ep, cfg, "relay", 2)
		if err != nil {
			return nil, nil, fmt.Errorf("relay: source: %w", err)
		}
		return ep, db, nil
	}
	db, err := ep.Open(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("relay: source: %w", err)
	}
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(time.Minute)
	return ep, db, nil
}

// detectUpstream asks the source for its flavor (when flavor is "") and id.
func detectUpstream(ctx context.Context, db *sql.DB, flavor string) (upstream, error) {
	var up upstream
	switch strings.ToLower(flavor) {
	case config.FlavorMariaDB:
		up.mariadb = true
	case config.FlavorMySQL:
	default:
		detected, err := dbconn.DetectFlavor(ctx, db)
		if err != nil {
			return up, fmt.Errorf("relay: %w", err)
		}
		up.mariadb = detected == config.FlavorMariaDB
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
