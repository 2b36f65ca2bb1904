// Package log builds the zap logger the binaries pass down to everything
// they start. It owns only logger construction; nothing here is global.
package log

import (
	"fmt"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"gopkg.in/natefinch/lumberjack.v2"
)

// Config says how to log.
type Config struct {
	// Level is debug, info, warn or error.
	Level string
	// Format is text or json.
	Format string
	// File, when set, receives the log (rotated at 300 MiB, 7 files kept)
	// instead of standard error.
	File string
}

// New builds a logger; the returned function flushes and closes it.
func New(cfg Config) (*zap.Logger, func(), error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(cfg.Level)); err != nil {
		return nil, nil, fmt.Errorf("log-level %q: use debug, info, warn or error", cfg.Level)
	}
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	switch cfg.Format {
	case "", "text":
		encCfg.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(encCfg)
	case "json":
		enc = zapcore.NewJSONEncoder(encCfg)
	default:
		return nil, nil, fmt.Errorf("log-format %q: use text or json", cfg.Format)
	}
	var ws zapcore.WriteSyncer = zapcore.Lock(os.Stderr)
	closeFile := func() {}
	if cfg.File != "" {
		lj := &lumberjack.Logger{Filename: cfg.File, MaxSize: 300, MaxBackups: 7}
		ws = zapcore.AddSync(lj)
		closeFile = func() { _ = lj.Close() }
	}
	logger := zap.New(zapcore.NewCore(enc, ws, lvl), zap.AddCaller())
	return logger, func() {
		_ = logger.Sync()
		closeFile()
	}, nil
}
