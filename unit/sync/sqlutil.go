package syncer

import (
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/dbconn"
)

// quoteName quotes an identifier with backticks.
func quoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// openTarget opens a pool to the target. Sessions use UTC for TIMESTAMP
// values (the binlog carries them as UTC instants), a permissive sql_mode
// that keeps zero dates and explicit zeros in AUTO_INCREMENT columns, and no
// foreign key checks (parallel apply orders changes by row, not by table).
func openTarget(db config.DBConfig, maxConns int) (*sql.DB, error) {
	cfg := dbconn.DriverConfig(db)
	cfg.InterpolateParams = true
	// Batches travel as one multi-statement query (see execTx).
	cfg.MultiStatements = true
	cfg.ParseTime = false
	cfg.Params = map[string]string{
		"time_zone":          "'+00:00'",
		"sql_mode":           "'NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'",
		"foreign_key_checks": "0",
	}
	pool, err := dbconn.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	pool.SetMaxOpenConns(maxConns)
	pool.SetMaxIdleConns(maxConns)
	pool.SetConnMaxIdleTime(5 * time.Minute)
	return pool, nil
}

// openSource opens a small pool to the source for queries (flavor).
func openSource(db config.DBConfig) (*sql.DB, error) {
	pool, err := dbconn.Open(dbconn.DriverConfig(db))
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	pool.SetMaxOpenConns(2)
	return pool, nil
}

// mysqlErrorCode returns the server error number in err's chain, 0 if none.
func mysqlErrorCode(err error) uint16 {
	var me *mysql.MySQLError
	if asMySQLError(err, &me) {
		return me.Number
	}
	return 0
}
