package etcdtest

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/etcdutil"
)

// serverLogger logs the embedded server's errors to stderr.
func serverLogger() (*zap.Logger, error) {
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	cfg.Sampling = nil
	lg, err := cfg.Build()
	if err != nil {
		return nil, fmt.Errorf("etcdtest: build server logger: %w", err)
	}
	return etcdutil.ServerLogger(lg), nil
}
