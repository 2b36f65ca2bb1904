package worker

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
)

// valueNotes are the fields of one etcd value that decoding noticed.
type valueNotes struct {
	key              string
	unknown, ignored []string
}

// configWarning returns the status entry for the unknown fields of the
// decoded etcd values of what (e.g. `subtask "t1"`), nil when there are
// none, and logs the unknown and the ignored DM fields when changed is set
// (once per new value, not at every reconcile).
func configWarning(log *zap.Logger, what string, now time.Time, changed bool, values ...valueNotes) *errs.Error {
	var parts []string
	for _, v := range values {
		if changed && len(v.ignored) > 0 {
			log.Info("config value holds DM fields without effect here", zap.String("key", v.key), zap.Strings("fields", v.ignored))
		}
		if len(v.unknown) == 0 {
			continue
		}
		if changed {
			log.Warn("etcd value holds unknown fields; they are not used", zap.String("key", v.key), zap.Strings("fields", v.unknown))
		}
		parts = append(parts, fmt.Sprintf("etcd value %s: %s", v.key,
			config.DecodeNotes{Unknown: v.unknown}.UnknownWarning()))
	}
	if len(parts) == 0 {
		return nil
	}
	e := errs.Entry(errs.New(CodeConfigUnknownField, false,
		"%s: %s; the rest of the value is used", what, strings.Join(parts, "; ")), now)
	return &e
}

// setSourceWarn records the config warning of the bound source's value
// (cfg nil clears it); the fields are logged when the value changed.
func (s *Server) setSourceWarn(source string, cfg *config.SourceConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cfg == nil {
		s.serverWarn = nil
		return
	}
	changed := s.swCfg == nil || !reflect.DeepEqual(s.swCfg.Notes, cfg.Notes)
	warn := configWarning(s.log, fmt.Sprintf("source %q", source), s.cfg.Clock.Now(), changed,
		valueNotes{key: s.store.Keys().SourceConfig(source), unknown: cfg.Notes.Unknown, ignored: cfg.Notes.Ignored})
	switch {
	case warn == nil:
		s.serverWarn = nil
	case s.serverWarn == nil || s.serverWarn.Message != warn.Message:
		s.serverWarn = &TaskError{Error: *warn}
	}
}
