package worker

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"go.uber.org/zap"
)

// reconcileBound converges the SourceWorker to the worker's bound key, the
// source config as of the bound key's read, and the relay-bound key.
func (s *Server) reconcileBound(ctx context.Context, _ string) error {
	src, cfg, connCfg, err := s.readBound(ctx)
	if err != nil || cfg == nil {
		return err
	}
	rb, rok, _, err := s.store.GetRelayBound(ctx, s.cfg.Name)
	if err != nil {
		return fmt.Errorf("read relay key: %w", err)
	}
	wantRelay := cfg.EnableRelay || (rok && rb.Source == src)
	sw, runCtx := s.ensureSourceWorker(src, cfg, connCfg, wantRelay)
	if sw == nil {
		return nil // the registration is ending
	}
	s.mu.Lock()
	relayOn := s.relayOn
	s.relayOn = wantRelay
	s.mu.Unlock()
	switch {
	case wantRelay && !relayOn:
		sw.EnableRelay(runCtx)
	case !wantRelay && relayOn:
		sw.DisableRelay()
	}
	return nil
}

// readBound reads the bound key and the bound source's config as of the
// same revision. It returns the source and its config as decoded (cfg,
// compared with the next read) and with the password resolved (connCfg,
// for the data plane); a nil cfg means there is nothing to run: the worker
// is unbound (its source worker is closed) or the config cannot be used
// (recorded in status). An error means retry (etcd unreachable).
func (s *Server) readBound(ctx context.Context) (src string, cfg, connCfg *config.SourceConfig, err error) {
	b, ok, rev, err := s.store.GetBound(ctx, s.cfg.Name)
	if err != nil {
		return "", nil, nil, fmt.Errorf("read bound source: %w", err)
	}
	if !ok {
		s.setServerErr(nil)
		s.setSourceWarn("", nil)
		if s.stopSourceWorker((*SourceWorker).Close) {
			s.log.Info("unbound: source worker closed")
		}
		return "", nil, nil, nil
	}
	cfg, err = s.store.GetSourceConfigAt(ctx, b.Source, rev)
	switch {
	case errors.Is(err, ha.ErrMalformed):
		s.setServerErr(errs.New(CodeSourceConfigInvalid, false,
			"source %q: malformed config in etcd: %v; put a valid source config", b.Source, err))
		return "", nil, nil, nil
	case err != nil:
		return "", nil, nil, fmt.Errorf("read config of bound source %q: %w", b.Source, err)
	case cfg == nil:
		s.setSourceWarn("", nil)
		s.setServerErr(errs.New(CodeSourceConfigMissing, false,
			"worker is bound to source %q but %s does not exist; create the source first",
			b.Source, s.store.Keys().SourceConfig(b.Source)))
		s.stopSourceWorker((*SourceWorker).Close)
		return "", nil, nil, nil
	}
	s.setSourceWarn(b.Source, cfg)
	if err := cfg.Validate(); err != nil {
		s.setServerErr(errs.New(CodeSourceConfigInvalid, false, "source %q: %v", b.Source, err))
		return "", nil, nil, nil
	}
	connCfg, err = resolveSource(cfg, s.cfg.SecretKey)
	if err != nil {
		s.setServerErr(err)
		return "", nil, nil, nil
	}
	s.setServerErr(nil)
	return b.Source, cfg, connCfg, nil
}

// ensureSourceWorker returns the source worker of src and the context it
// runs under, restarting it when the bound source or its config changed
// and starting it (subtasks enabled, relay not yet) when there is none.
// It returns nil once serve has sealed the source worker (the
// registration is ending): one it started meanwhile is stopped again.
func (s *Server) ensureSourceWorker(src string, cfg, connCfg *config.SourceConfig, wantRelay bool) (*SourceWorker, context.Context) {
	s.mu.Lock()
	sw, swCfg, runCtx, sealed := s.sw, s.swCfg, s.runCtx, s.sealStop != nil
	s.mu.Unlock()
	if sealed {
		return nil, nil
	}
	if sw != nil && (sw.Source() != src || !reflect.DeepEqual(swCfg, cfg)) {
		s.log.Info("bound source or its config changed; restarting the source worker",
			zap.String("old", sw.Source()), zap.String("new", src))
		s.stopSourceWorker((*SourceWorker).Close)
		sw = nil
	}
	if sw != nil {
		return sw, runCtx
	}
	var nsw *SourceWorker
	relay := func() binlog.StreamOpener { return nsw.relayOpener() }
	factory := s.cfg.NewFactory(connCfg, relay)
	var streams *StreamRuntime
	if s.cfg.NewStreams != nil {
		streams = s.cfg.NewStreams(connCfg, s.cfg.StreamMeta, s.cfg.StreamMetaErr, relay, s.log)
	}
	nsw = NewSourceWorker(SourceWorkerConfig{
		Source: connCfg, Store: s.store, Factory: withSecrets(factory, s.cfg.SecretKey), SecretKey: s.cfg.SecretKey,
		NewRelay: s.cfg.NewRelay,
		Metrics:  s.cfg.Metrics, Logger: s.log, Clock: s.cfg.Clock,
		CheckInterval:   s.cfg.CheckInterval,
		WatchBackoffMin: s.cfg.WatchBackoffMin, WatchBackoffMax: s.cfg.WatchBackoffMax,
		Streams: streams,
	})
	nsw.Start(runCtx)
	if wantRelay {
		// Before the subtasks: their binlog readers then wait for the
		// relay instead of each opening a dump of its own.
		nsw.EnableRelay(runCtx)
	}
	nsw.EnableSubTasks(runCtx)
	s.mu.Lock()
	sealStop := s.sealStop
	if sealStop == nil {
		s.sw, s.swCfg, s.relayOn = nsw, cfg, wantRelay
	}
	s.mu.Unlock()
	if sealStop != nil {
		s.log.Info("registration ending: the source worker just started is stopped again", zap.String("source", src))
		sealStop(nsw)
		return nil, nil
	}
	s.log.Info("bound to source", zap.String("source", src), zap.Bool("relay", wantRelay))
	return nsw, runCtx
}

// stopSourceWorker stops the current source worker with stop (Close or
// Kill) and then forgets it, so status shows it until it has stopped; it
// reports whether there was one. Only the bound reconciler, or serve once
// the reconciler has ended, calls it.
func (s *Server) stopSourceWorker(stop func(*SourceWorker)) bool {
	s.mu.Lock()
	sw := s.sw
	s.mu.Unlock()
	if sw == nil {
		return false
	}
	stop(sw)
	s.mu.Lock()
	if s.sw == sw {
		s.sw, s.swCfg, s.relayOn = nil, nil, false
	}
	s.mu.Unlock()
	return true
}

// sealSourceWorker stops the current source worker with stop (Close or
// Kill) and seals the slot until the next registration: a source worker
// the bound reconciler builds meanwhile is stopped with stop as it is
// installed, so serve sweeps once.
func (s *Server) sealSourceWorker(stop func(*SourceWorker)) {
	s.mu.Lock()
	s.sealStop = stop
	s.mu.Unlock()
	s.stopSourceWorker(stop)
}

func (s *Server) setServerErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.serverErr = nil
		return
	}
	s.log.Error("bound source cannot run", zap.Error(err))
	s.serverErr = &TaskError{Error: errs.Entry(err, s.cfg.Clock.Now())}
}
