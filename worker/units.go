package worker

import (
	"path/filepath"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha/shardddl"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/check"
	"github.com/dmworker/dm-worker/unit/dump"
	"github.com/dmworker/dm-worker/unit/load"
	"github.com/dmworker/dm-worker/unit/syncer"
	"github.com/dmworker/dm-worker/unit/validate"
)

// FactoryBuilder builds the unit factory of one bound source. relay returns
// the relay reader while relay runs for the source, else nil; units that
// read binlog use it instead of a connection of their own.
type FactoryBuilder func(src *config.SourceConfig, relay func() binlog.StreamOpener) unit.Factory

// UnitOptions are what the real units of this build need from the process.
type UnitOptions struct {
	// DataDir is the worker's data-dir: dump directories are under it
	// unless loader.dir is absolute.
	DataDir string
	// Sync, Dump, Load and Validate hold the units' metrics; nil for none.
	Sync     *syncer.Metrics
	Dump     *dump.Metrics
	Load     *load.Metrics
	Validate *validate.Metrics
	// Budget bounds the connections of every unit and precheck to each
	// target server (the worker's target-connection-limit); nil: every
	// pool of its own size.
	Budget *dbconn.Budget
	// Sources bounds the connections of every unit, validator and
	// precheck to each source server (source-connection-limit), counts
	// their binlog dumps and learns each source's flavor once; nil: every
	// pool of its own size, the flavor asked by each unit.
	Sources *dbconn.Budget
	// Logger logs the prechecks; units log through their subtask's logger.
	Logger *zap.Logger
	// Etcd and Prefix reach the cluster's etcd, where the sync units of
	// sharding tasks coordinate their shard DDL locks (ha/shardddl).
	// Without a client a sharding task's sync unit fails with a clear
	// error.
	Etcd   *clientv3.Client
	Prefix string
}

// NewUnitFactory is the factory builder of the real data-plane units of
// this build: dump, load and sync (every task mode), the validator, and the
// precheck of every subtask's requirements (unit/check) before its first
// unit runs.
func NewUnitFactory(o UnitOptions) FactoryBuilder {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return func(src *config.SourceConfig, relay func() binlog.StreamOpener) unit.Factory {
		return unit.NewRegistry(map[unit.Type]unit.Constructor{
			unit.TypeDump: func(cfg *config.SubTaskConfig, logger *zap.Logger) (unit.Unit, error) {
				d, err := dump.New(cfg, src, DumpDir(o.DataDir, cfg), o.Dump, logger)
				if err != nil {
					return nil, err
				}
				d.UseSourceBudget(o.Sources)
				return d, nil
			},
			unit.TypeLoad: func(cfg *config.SubTaskConfig, logger *zap.Logger) (unit.Unit, error) {
				l, err := load.New(cfg, src, DumpDir(o.DataDir, cfg), o.Load, logger)
				if err != nil {
					return nil, err
				}
				l.UseConnBudget(o.Budget)
				return l, nil
			},
			unit.TypeSync: func(cfg *config.SubTaskConfig, logger *zap.Logger) (unit.Unit, error) {
				s, err := syncer.New(cfg, src, relay, o.Sync, logger)
				if err != nil {
					return nil, err
				}
				s.UseConnBudget(o.Budget)
				s.UseSourceBudget(o.Sources)
				if cfg.ShardMode != "" && o.Etcd != nil {
					c, err := shardddl.New(o.Etcd, o.Prefix, cfg.Name, cfg.SourceID, logger)
					if err != nil {
						return nil, err
					}
					s.UseShardDDL(c)
				}
				return s, nil
			},
		}, func(cfg *config.SubTaskConfig, sync unit.SyncSource, logger *zap.Logger) (unit.Validator, error) {
			v, err := validate.New(cfg, src, relay, sync, o.Validate, logger)
			if err != nil {
				return nil, err
			}
			v.UseConnBudget(o.Budget)
			v.UseSourceBudget(o.Sources)
			return v, nil
		}).WithPrecheck(check.PrecheckBudgeted(src, check.Budgets{Targets: o.Budget, Sources: o.Sources}, o.Logger))
	}
}

// DumpDir is the dump directory of subtask cfg: <loader.dir>/<task>, where
// loader.dir defaults to <data-dir>/dump and a relative loader.dir is taken
// relative to data-dir (DM task files often say "./dumped_data"). Every
// task has a directory of its own, so tasks sharing a loader.dir do not
// collide.
func DumpDir(dataDir string, cfg *config.SubTaskConfig) string {
	base := cfg.Loader.Dir
	switch {
	case base == "":
		base = filepath.Join(dataDir, "dump")
	case !filepath.IsAbs(base):
		base = filepath.Join(dataDir, base)
	}
	return filepath.Join(base, cfg.Name)
}
