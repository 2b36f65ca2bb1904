package ha

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/config"
)

// PutSourceConfig writes P/source/config/{cfg.SourceID}.
func (s *Store) PutSourceConfig(ctx context.Context, cfg *config.SourceConfig) (int64, error) {
	if cfg == nil {
		return 0, errors.New("ha: put source config: nil config")
	}
	if err := config.ValidateName("source", cfg.SourceID); err != nil {
		return 0, fmt.Errorf("ha: put source config: %w", err)
	}
	return s.put(ctx, s.keys.SourceConfig(cfg.SourceID), cfg)
}

// GetSourceConfig reads P/source/config/{source}; it returns nil, rev, nil
// when the key is absent.
func (s *Store) GetSourceConfig(ctx context.Context, source string) (*config.SourceConfig, int64, error) {
	if err := config.ValidateName("source", source); err != nil {
		return nil, 0, fmt.Errorf("ha: get source config: %w", err)
	}
	cfg, _, rev, err := getOne(ctx, s, s.keys.SourceConfig(source), s.DecodeSourceConfig)
	return cfg, rev, err
}

// GetSourceConfigAt reads P/source/config/{source} as it was at revision
// rev; nil, nil when it did not exist then.
func (s *Store) GetSourceConfigAt(ctx context.Context, source string, rev int64) (*config.SourceConfig, error) {
	if err := config.ValidateName("source", source); err != nil {
		return nil, fmt.Errorf("ha: get source config: %w", err)
	}
	cfg, _, _, err := getOne(ctx, s, s.keys.SourceConfig(source), s.DecodeSourceConfig, clientv3.WithRev(rev))
	return cfg, err
}

// GetSourceConfigs returns every source config by source name. Malformed
// keys are left out and reported in a *KeyErrors next to the map.
func (s *Store) GetSourceConfigs(ctx context.Context) (map[string]*config.SourceConfig, int64, error) {
	return getRange(ctx, s, s.keys.SourceConfigPrefix(), s.DecodeSourceConfig)
}

// DeleteSourceConfig deletes P/source/config/{source}.
func (s *Store) DeleteSourceConfig(ctx context.Context, source string) (int64, error) {
	return s.del(ctx, s.keys.SourceConfig(source))
}

// putBound writes b at key(b.Worker), for the bound and relay bound kinds;
// what names the kind in errors.
func (s *Store) putBound(ctx context.Context, what string, key func(worker string) string, b Bound) (int64, error) {
	if err := validateBound(b); err != nil {
		return 0, fmt.Errorf("ha: put %s: %w", what, err)
	}
	return s.put(ctx, key(b.Worker), b)
}

func validateBound(b Bound) error {
	if err := config.ValidateName("worker", b.Worker); err != nil {
		return err
	}
	return config.ValidateName("source", b.Source)
}

// getBound reads key(worker) with dec, for the bound and relay bound kinds;
// found is false when absent.
func (s *Store) getBound(ctx context.Context, what string, key func(worker string) string, dec Decoder[Bound],
	worker string) (b Bound, found bool, rev int64, err error) {
	if err := config.ValidateName("worker", worker); err != nil {
		return Bound{}, false, 0, fmt.Errorf("ha: get %s: %w", what, err)
	}
	return getOne(ctx, s, key(worker), dec)
}

// PutBound writes P/source/bound/{b.Worker}.
func (s *Store) PutBound(ctx context.Context, b Bound) (int64, error) {
	return s.putBound(ctx, "bound", s.keys.Bound, b)
}

// GetBound reads P/source/bound/{worker}; found is false when absent.
func (s *Store) GetBound(ctx context.Context, worker string) (b Bound, found bool, rev int64, err error) {
	return s.getBound(ctx, "bound", s.keys.Bound, s.DecodeBound, worker)
}

// GetBounds returns every bound by worker name. Malformed keys are left out
// and reported in a *KeyErrors next to the map.
func (s *Store) GetBounds(ctx context.Context) (map[string]Bound, int64, error) {
	return getRange(ctx, s, s.keys.BoundPrefix(), s.DecodeBound)
}

// DeleteBound deletes P/source/bound/{worker}.
func (s *Store) DeleteBound(ctx context.Context, worker string) (int64, error) {
	return s.del(ctx, s.keys.Bound(worker))
}

// PutRelayBound writes P/source/relay/{b.Worker}.
func (s *Store) PutRelayBound(ctx context.Context, b Bound) (int64, error) {
	return s.putBound(ctx, "relay bound", s.keys.RelayBound, b)
}

// GetRelayBound reads P/source/relay/{worker}; found is false when absent.
func (s *Store) GetRelayBound(ctx context.Context, worker string) (b Bound, found bool, rev int64, err error) {
	return s.getBound(ctx, "relay bound", s.keys.RelayBound, s.DecodeRelayBound, worker)
}

// GetRelayBounds returns every relay bound by worker name. Malformed keys
// are left out and reported in a *KeyErrors next to the map.
func (s *Store) GetRelayBounds(ctx context.Context) (map[string]Bound, int64, error) {
	return getRange(ctx, s, s.keys.RelayBoundPrefix(), s.DecodeRelayBound)
}

// DeleteRelayBound deletes P/source/relay/{worker}.
func (s *Store) DeleteRelayBound(ctx context.Context, worker string) (int64, error) {
	return s.del(ctx, s.keys.RelayBound(worker))
}

// PutRelayStage writes P/stage/relay/{st.Source}; st.Task must be empty.
func (s *Store) PutRelayStage(ctx context.Context, st Stage) (int64, error) {
	if err := config.ValidateName("source", st.Source); err != nil {
		return 0, fmt.Errorf("ha: put relay stage: %w", err)
	}
	if st.Task != "" {
		return 0, fmt.Errorf("ha: put relay stage of source %s: task must be empty, got %q", st.Source, st.Task)
	}
	if !st.Expect.IsExpectable() {
		return 0, fmt.Errorf("ha: put relay stage of source %s: %q is not Running, Paused or Stopped", st.Source, st.Expect)
	}
	return s.put(ctx, s.keys.RelayStage(st.Source), st)
}

// GetRelayStage reads P/stage/relay/{source}; found is false when absent.
func (s *Store) GetRelayStage(ctx context.Context, source string) (st Stage, found bool, rev int64, err error) {
	if err := config.ValidateName("source", source); err != nil {
		return Stage{}, false, 0, fmt.Errorf("ha: get relay stage: %w", err)
	}
	return getOne(ctx, s, s.keys.RelayStage(source), s.DecodeRelayStage)
}

// DeleteRelayStage deletes P/stage/relay/{source}.
func (s *Store) DeleteRelayStage(ctx context.Context, source string) (int64, error) {
	return s.del(ctx, s.keys.RelayStage(source))
}
