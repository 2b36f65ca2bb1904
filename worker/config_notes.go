package worker

import (
	"fmt"
	"reflect"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
)

// CodeConfigUnknownField is the status warning for fields of a config value
// in etcd that the worker does not know (DESIGN.md §3): the value is used
// without them, and the warning names each field's path so that whoever
// wrote the value can fix it. It is listed in the worker's "errors" only,
// never in a subtask's own errors, since the subtask runs.
const CodeConfigUnknownField = "config-unknown-field"

// configWarning returns the status entry for the unknown fields of a
// decoded etcd value of what (e.g. `subtask "t1"`), nil when there are none,
// and logs the unknown and the ignored DM fields when changed is set (once
// per new config revision, not at every reconcile).
func configWarning(log *zap.Logger, what, key string, n config.DecodeNotes, now time.Time, changed bool) *errs.Error {
	if changed && len(n.Ignored) > 0 {
		log.Info("config value holds DM fields without effect here", zap.String("key", key), zap.Strings("fields", n.Ignored))
	}
	if len(n.Unknown) == 0 {
		return nil
	}
	if changed {
		log.Warn("config value holds unknown fields; they are not used", zap.String("key", key), zap.Strings("fields", n.Unknown))
	}
	e := errs.Entry(errs.New(CodeConfigUnknownField, false,
		"%s: etcd value %s: %s; the rest of the value is used", what, key, n.UnknownWarning()), now)
	return &e
}

// setTaskWarn records (or, with nil, clears) the config warning of a task.
func (w *SourceWorker) setTaskWarn(name string, warn *errs.Error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if warn == nil {
		delete(w.taskWarns, name)
		return
	}
	if old, ok := w.taskWarns[name]; ok && old.Message == warn.Message {
		return // keep the time it was first seen
	}
	w.taskWarns[name] = *warn
}

// subTaskWarning is configWarning for a subtask's config value.
func (w *SourceWorker) subTaskWarning(name string, cfg *config.SubTaskConfig, changed bool, log *zap.Logger) *errs.Error {
	key := w.cfg.Store.Keys().SubTaskConfig(w.source, name)
	return configWarning(log, fmt.Sprintf("subtask %q", name), key, cfg.Notes, w.cfg.Clock.Now(), changed)
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
	warn := configWarning(s.log, fmt.Sprintf("source %q", source), s.store.Keys().SourceConfig(source), cfg.Notes, s.cfg.Clock.Now(), changed)
	switch {
	case warn == nil:
		s.serverWarn = nil
	case s.serverWarn == nil || s.serverWarn.Message != warn.Message:
		s.serverWarn = &TaskError{Error: *warn}
	}
}
