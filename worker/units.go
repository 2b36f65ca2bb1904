package worker

import (
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/check"
	"github.com/dmworker/dm-worker/unit/syncer"
)

// FactoryBuilder builds the unit factory of one bound source. relay returns
// the relay reader while relay runs for the source, else nil; units that
// read binlog use it instead of a connection of their own.
type FactoryBuilder func(src *config.SourceConfig, relay func() binlog.StreamOpener) unit.Factory

// UnitOptions are what the real units of this build need from the process.
type UnitOptions struct {
	// Sync holds the sync unit's metrics; nil for none.
	Sync *syncer.Metrics
	// Logger logs the prechecks; units log through their subtask's logger.
	Logger *zap.Logger
}

// NewUnitFactory is the factory builder of the real data-plane units of
// this build: the sync unit, and the precheck of every subtask's
// requirements (unit/check) before its first unit runs.
func NewUnitFactory(o UnitOptions) FactoryBuilder {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return func(src *config.SourceConfig, relay func() binlog.StreamOpener) unit.Factory {
		return unit.NewRegistry(map[unit.Type]unit.Constructor{
			unit.TypeSync: func(cfg *config.SubTaskConfig, logger *zap.Logger) (unit.Unit, error) {
				return syncer.New(cfg, src, relay, o.Sync, logger)
			},
		}, nil).WithPrecheck(check.Precheck(src, o.Logger))
	}
}
