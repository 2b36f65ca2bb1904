package syncer

import (
	"database/sql"
	"fmt"

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
func (s *Syncer) openTarget(ep *dbconn.Endpoint, maxConns int) (*sql.DB, error) {
	cfg := ep.DriverConfig()
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
