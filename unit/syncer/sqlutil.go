package syncer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/filter"
)

// UseConnBudget makes the unit's target pool take its connections from b,
// the worker's budget of connections to each target (nil: a pool of its
// own). Call it before Init.
func (s *Syncer) UseConnBudget(b *dbconn.Budget) { s.budget = b }

// UseSourceBudget makes the unit learn the source's flavor from b, the
// worker's budget of source connections (once per source, for every
// task), and count its own binlog dump there when it reads the source
// directly (nil: a connection of its own for the flavor). Call it before
// Init.
func (s *Syncer) UseSourceBudget(b *dbconn.Budget) { s.sources = b }

// openTarget opens a pool of at most maxConns connections to the target,
// from the unit's connection budget. Sessions use UTC for TIMESTAMP
// values (the binlog carries them as UTC instants; a time_zone in the
// target's session block is overridden, as in DM), and unless the session
// block sets them, a permissive sql_mode that keeps zero dates and explicit
// zeros in AUTO_INCREMENT columns, and no foreign key checks: DDL,
// checkpoints and tables no foreign key touches run that way; a batch sets
// the source session's setting around the statements of foreign key group
// tables (foreign_keys.go).
//
// No code of the unit holds a connection of the pool while it waits for
// another (each apply worker, the checkpoint flush and the DDL applier use
// one at a time), so a budget smaller than the pool cannot deadlock it.
func (s *Syncer) openTarget(ep *dbconn.Endpoint, maxConns int, isolationVar string) (*sql.DB, error) {
	cfg := ep.DriverConfig()
	if isolationVar != "" && !hasParam(cfg, "tx_isolation") && !hasParam(cfg, "transaction_isolation") {
		dbconn.SetDefaultParam(cfg, isolationVar, "'READ-COMMITTED'")
	}
	cfg.InterpolateParams = true
	// Batches travel as one multi-statement query (see execTx).
	cfg.MultiStatements = true
	cfg.ParseTime = false
	dbconn.SetDefaultParam(cfg, "sql_mode", "'NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'")
	dbconn.SetDefaultParam(cfg, "foreign_key_checks", "0")
	cfg.Params["time_zone"] = "'+00:00'"
	pool, err := s.budget.Open(ep, cfg, s.cfg.Name, maxConns)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	return pool, nil
}

// tableName is a schema-qualified table name.
type tableName = filter.TableName

func hasParam(cfg *mysql.Config, name string) bool {
	_, ok := cfg.Params[name]
	return ok
}

// readCommittedVar is the session variable that sets the target's
// transaction isolation ("transaction_isolation", or "tx_isolation" on
// MariaDB before 11.1), or "" when the target must keep its own level: it
// writes a statement binlog, for which InnoDB refuses READ COMMITTED.
//
// The sync unit reads nothing inside its transactions and writes by key,
// so READ COMMITTED changes no result; it takes no gap locks, so batches
// of appliers writing one table (the shards of a merge, from several
// workers) do not deadlock on each other's gaps at the ends of their key
// ranges (docs/benchmarks.md, "Shard merge").
func readCommittedVar(ctx context.Context, db *sql.DB) (string, error) {
	var logBin int
	var format string
	if err := db.QueryRowContext(ctx, "SELECT @@global.log_bin, @@global.binlog_format").Scan(&logBin, &format); err != nil {
		return "", err
	}
	if logBin == 1 && strings.EqualFold(format, "STATEMENT") {
		return "", nil
	}
	var name, value string
	err := db.QueryRowContext(ctx, "SHOW VARIABLES LIKE 'transaction_isolation'").Scan(&name, &value)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "tx_isolation", nil
	case err != nil:
		return "", err
	}
	return "transaction_isolation", nil
}
