package ha

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/stage"
)

// StreamItem is what etcd holds for one stream task of a source, read at one
// revision.
type StreamItem struct {
	Name           string
	Config         *config.StreamConfig // nil when the config key is absent
	ConfigRevision int64                // ModRevision of the config key (0 when absent)
	Stage          *Stage               // nil when absent
	// Err is set when the config or stage value is malformed or the key
	// holds an invalid name; the item is still listed.
	Err error
}

// StreamSnapshot is every stream of a source that has its config or stage
// key, by stream name, at Revision.
type StreamSnapshot struct {
	Revision int64
	Items    map[string]*StreamItem
}

// PutStreamConfig writes P/stream/config/{cfg.SourceID}/{cfg.Name}.
func (s *Store) PutStreamConfig(ctx context.Context, cfg *config.StreamConfig) (int64, error) {
	if cfg == nil {
		return 0, errors.New("ha: put stream config: nil config")
	}
	if err := validateNames(cfg.SourceID, "stream", cfg.Name); err != nil {
		return 0, fmt.Errorf("ha: put stream config: %w", err)
	}
	return s.put(ctx, s.keys.StreamConfig(cfg.SourceID, cfg.Name), cfg)
}

// DeleteStreamConfig deletes P/stream/config/{source}/{stream}.
func (s *Store) DeleteStreamConfig(ctx context.Context, source, stream string) (int64, error) {
	return s.del(ctx, s.keys.StreamConfig(source, stream))
}

// PutStreamStage writes P/stage/stream/{st.Source}/{st.Task}.
func (s *Store) PutStreamStage(ctx context.Context, st Stage) (int64, error) {
	if err := validateStage("stream stage", "stream", st, stage.Stage.IsExpectable); err != nil {
		return 0, err
	}
	return s.put(ctx, s.keys.StreamStage(st.Source, st.Task), st)
}

// DeleteStreamStage deletes P/stage/stream/{source}/{stream}, which drops
// the stream task.
func (s *Store) DeleteStreamStage(ctx context.Context, source, stream string) (int64, error) {
	return s.del(ctx, s.keys.StreamStage(source, stream))
}

// GetStreams reads the configs and stages of every stream of source in one
// transaction.
func (s *Store) GetStreams(ctx context.Context, source string) (StreamSnapshot, error) {
	if err := config.ValidateName("source", source); err != nil {
		return StreamSnapshot{}, fmt.Errorf("ha: get streams: %w", err)
	}
	prefixes := []string{s.keys.StreamConfigPrefix(source), s.keys.StreamStagePrefix(source)}
	kvs, rev, err := s.txn(ctx, "get streams of source "+source,
		clientv3.OpGet(prefixes[0], clientv3.WithPrefix()),
		clientv3.OpGet(prefixes[1], clientv3.WithPrefix()))
	if err != nil {
		return StreamSnapshot{}, err
	}
	snap := StreamSnapshot{Revision: rev, Items: make(map[string]*StreamItem)}
	for i, list := range kvs {
		for _, kv := range list {
			name := lastSegment(string(kv.Key), prefixes[i])
			it, ok := snap.Items[name]
			if !ok {
				it = &StreamItem{Name: name}
				snap.Items[name] = it
			}
			s.fillStream(it, i, kv)
		}
	}
	return snap, nil
}

// GetStream reads the config and stage of one stream in one transaction.
// The item is nil when neither key exists.
func (s *Store) GetStream(ctx context.Context, source, stream string) (*StreamItem, int64, error) {
	if err := validateNames(source, "stream", stream); err != nil {
		return nil, 0, fmt.Errorf("ha: get stream: %w", err)
	}
	kvs, rev, err := s.txn(ctx, "get stream "+source+"/"+stream,
		clientv3.OpGet(s.keys.StreamConfig(source, stream)),
		clientv3.OpGet(s.keys.StreamStage(source, stream)))
	if err != nil {
		return nil, 0, err
	}
	var it *StreamItem
	for i, list := range kvs {
		for _, kv := range list {
			if it == nil {
				it = &StreamItem{Name: stream}
			}
			s.fillStream(it, i, kv)
		}
	}
	return it, rev, nil
}

// fillStream decodes kv, read by op i of a stream read (0 config, 1 stage),
// into it.
func (s *Store) fillStream(it *StreamItem, i int, kv *mvccpb.KeyValue) {
	var err error
	switch i {
	case 0:
		var cfg *config.StreamConfig
		if cfg, err = decodeKV(s.DecodeStreamConfig, kv); err == nil {
			it.Config, it.ConfigRevision = cfg, kv.ModRevision
		}
	case 1:
		var st Stage
		if st, err = decodeKV(s.DecodeStreamStage, kv); err == nil {
			it.Stage = &st
		}
	}
	if err != nil {
		it.Err = errors.Join(it.Err, err)
	}
}
