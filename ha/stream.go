package ha

import (
	"context"
	"errors"
	"fmt"

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

// streamKind is a stream's keys: config, stage.
var streamKind = itemKind[*StreamItem]{
	what:     "stream",
	nameKind: "stream",
	newItem:  func(name string) *StreamItem { return &StreamItem{Name: name} },
	parts: []itemPart[*StreamItem]{
		part(Keys.StreamConfigPrefix, (*Store).DecodeStreamConfig, func(it *StreamItem, cfg *config.StreamConfig, rev int64) {
			it.Config, it.ConfigRevision = cfg, rev
		}),
		part(Keys.StreamStagePrefix, (*Store).DecodeStreamStage, func(it *StreamItem, st Stage, _ int64) { it.Stage = &st }),
	},
}

// GetStreams reads the configs and stages of every stream of source in one
// transaction.
func (s *Store) GetStreams(ctx context.Context, source string) (StreamSnapshot, error) {
	items, rev, err := getItems(ctx, s, &streamKind, source)
	if err != nil {
		return StreamSnapshot{}, err
	}
	return StreamSnapshot{Revision: rev, Items: items}, nil
}

// GetStream reads the config and stage of one stream in one transaction.
// The item is nil when neither key exists.
func (s *Store) GetStream(ctx context.Context, source, stream string) (*StreamItem, int64, error) {
	return getItem(ctx, s, &streamKind, source, stream)
}
