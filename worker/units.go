package worker

import (
	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/unit"
)

// FactoryBuilder builds the unit factory of one bound source. relay returns
// the relay reader while relay runs for the source, else nil; units that
// read binlog use it instead of a connection of their own.
type FactoryBuilder func(src *config.SourceConfig, relay func() binlog.StreamOpener) unit.Factory

// NewUnitFactory is the factory builder of the real data-plane units of
// this build. Task modes whose units are not in it are rejected with a
// clear error when a task is reconciled.
func NewUnitFactory() FactoryBuilder {
	return func(*config.SourceConfig, func() binlog.StreamOpener) unit.Factory {
		return unit.NewRegistry(map[unit.Type]unit.Constructor{}, nil)
	}
}
