package etcdutil

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// benign are error-level messages an embedded etcd logs on every normal
// start or stop; they would drown the errors worth seeing.
var benign = map[string]bool{
	"setting up serving from embedded etcd failed.": true,
	"failed to update storage version":              true,
}

// quietCore drops the benign messages and passes everything else on.
type quietCore struct{ zapcore.Core }

func (c quietCore) With(fields []zapcore.Field) zapcore.Core {
	return quietCore{c.Core.With(fields)}
}

func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if benign[e.Message] {
		return ce
	}
	return c.Core.Check(e, ce)
}

// ServerLogger wraps logger for an embedded etcd server: errors only, and
// without the messages every normal start and stop produces.
func ServerLogger(logger *zap.Logger) *zap.Logger {
	return logger.WithOptions(
		zap.IncreaseLevel(zap.ErrorLevel),
		zap.WrapCore(func(c zapcore.Core) zapcore.Core { return quietCore{c} }),
	)
}
