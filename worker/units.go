package worker

import (
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/syncer"
)

// FactoryBuilder builds the unit factory of one bound source. relay returns
// the relay reader while relay runs for the source, else nil; units that
// read binlog use it instead of a connection of their own.
type FactoryBuilder func(src *config.SourceConfig, relay func() binlog.StreamOpener) unit.Factory

// NewUnitFactory is the factory builder of the real data-plane units of
// this build: the sync unit (task-mode incremental). Task modes whose units
// are not in it are rejected with a clear error when a task is reconciled.
func NewUnitFactory(syncMetrics *syncer.Metrics) FactoryBuilder {
	return func(src *config.SourceConfig, relay func() binlog.StreamOpener) unit.Factory {
		return unit.NewRegistry(map[unit.Type]unit.Constructor{
			unit.TypeSync: func(cfg *config.SubTaskConfig, logger *zap.Logger) (unit.Unit, error) {
				return syncer.New(cfg, src, relay, syncMetrics, logger)
			},
		}, nil)
	}
}
