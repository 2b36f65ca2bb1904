package etcdtest

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// benign are error-level messages the embedded server logs on every normal
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

// serverLogger logs the embedded server's errors to stderr.
func serverLogger() (*zap.Logger, error) {
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	cfg.Sampling = nil
	lg, err := cfg.Build(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return quietCore{c} }))
	if err != nil {
		return nil, fmt.Errorf("etcdtest: build server logger: %w", err)
	}
	return lg, nil
}
