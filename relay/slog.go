package relay

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
)

// zapHandler passes go-mysql's slog records to the relay's zap logger.
// go-mysql logs every reconnect and rotation at Info and Error; the relay
// reports those itself, so they are logged at Debug here.
type zapHandler struct {
	log   *zap.Logger
	attrs []zap.Field
}

func (h zapHandler) Enabled(_ context.Context, _ slog.Level) bool {
	return h.log.Core().Enabled(zap.DebugLevel)
}

func (h zapHandler) Handle(_ context.Context, rec slog.Record) error {
	fields := append([]zap.Field{zap.String("level", rec.Level.String())}, h.attrs...)
	rec.Attrs(func(a slog.Attr) bool {
		fields = append(fields, zap.Any(a.Key, a.Value.Any()))
		return true
	})
	h.log.Debug(rec.Message, fields...)
	return nil
}

func (h zapHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := zapHandler{log: h.log, attrs: append([]zap.Field(nil), h.attrs...)}
	for _, a := range attrs {
		out.attrs = append(out.attrs, zap.Any(a.Key, a.Value.Any()))
	}
	return out
}

func (h zapHandler) WithGroup(name string) slog.Handler {
	return zapHandler{log: h.log.Named(name), attrs: h.attrs}
}
