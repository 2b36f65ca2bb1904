package ha

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dmworker/dm-worker/pkg/onlineddl"

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

// kindStreamCheckpoint is the key kind of the stream checkpoint mirror.
const kindStreamCheckpoint = "/stream/checkpoint/"

// StreamCheckpoint is P/stream/checkpoint/{source}/{stream}.
func (k Keys) StreamCheckpoint(source, stream string) string {
	return k.StreamCheckpointPrefix(source) + stream
}

// StreamCheckpointPrefix is P/stream/checkpoint/{source}/.
func (k Keys) StreamCheckpointPrefix(source string) string {
	return k.perSource(kindStreamCheckpoint, source)
}

// StreamCheckpoint is the value of P/stream/checkpoint/{source}/{stream}
// (DESIGN.md §3): the last location whose events the sink acknowledged. It
// has no lease: it outlives the worker, and a stream deployed on a worker
// whose local meta store lacks it starts here.
type StreamCheckpoint struct {
	BinlogName string `json:"binlog-name"`
	BinlogPos  uint32 `json:"binlog-pos"`
	BinlogGTID string `json:"binlog-gtid"`
	// SnapshotDone is set once fill-history finished (or was not asked
	// for); a stream whose checkpoint lacks it runs fill-history again.
	SnapshotDone bool      `json:"snapshot-done"`
	Time         time.Time `json:"time"`
	// Txn is set while the sink acknowledged a part of the transaction
	// that starts at binlog-name/binlog-pos (binlog-gtid excludes it): its
	// last acknowledged event. A reader that ignores it resumes at the
	// transaction's start, which replays that part (at least once).
	Txn *StreamTxnProgress `json:"txn,omitempty"`
	// OnlineDDL (online-ddl on) are the recorded DDLs of the shadow tables
	// of online schema changes not cut over at this checkpoint: a stream
	// resumed from the mirror on another worker still delivers them at the
	// cut-over.
	OnlineDDL []StreamOnlineDDL `json:"online-ddl,omitempty"`

	// Unknown lists the paths of fields of the value the worker does not
	// know (to be reported, never dropped silently); nil when none.
	Unknown []string `json:"-"`
}

// StreamOnlineDDL is one shadow table's record in a stream checkpoint.
type StreamOnlineDDL struct {
	Schema string           `json:"schema"`
	Real   string           `json:"real-table"`
	Shadow string           `json:"shadow-table"`
	Stmts  []onlineddl.Stmt `json:"stmts"`
}

// StreamTxnProgress is the "txn" object of a stream checkpoint: the last
// acknowledged event inside the transaction the checkpoint starts, by its
// identity's coordinates <binlog-name>:<binlog-pos>:<row> (":d" suffixed
// when key-delete), the transaction's GTID and how many of its events
// were acknowledged.
type StreamTxnProgress struct {
	BinlogName string `json:"binlog-name"`
	BinlogPos  uint32 `json:"binlog-pos"`
	Row        int    `json:"row"`
	KeyDelete  bool   `json:"key-delete,omitempty"`
	GTID       string `json:"gtid,omitempty"`
	Events     int64  `json:"events"`
}

// PutStreamCheckpoint writes P/stream/checkpoint/{source}/{stream}, without
// a lease. The checkpoint must name a binlog file.
func (s *Store) PutStreamCheckpoint(ctx context.Context, source, stream string, cp StreamCheckpoint) (int64, error) {
	if err := validateNames(source, "stream", stream); err != nil {
		return 0, fmt.Errorf("ha: put stream checkpoint: %w", err)
	}
	if cp.BinlogName == "" {
		return 0, fmt.Errorf("ha: put stream checkpoint of %s/%s: binlog-name is empty; a checkpoint is a location in the source's binlog", source, stream)
	}
	return s.put(ctx, s.keys.StreamCheckpoint(source, stream), cp)
}

// GetStreamCheckpoint reads P/stream/checkpoint/{source}/{stream}; found is
// false when the key is absent. A malformed value is found, with an error
// wrapping ErrMalformed.
func (s *Store) GetStreamCheckpoint(ctx context.Context, source, stream string) (StreamCheckpoint, bool, error) {
	if err := validateNames(source, "stream", stream); err != nil {
		return StreamCheckpoint{}, false, fmt.Errorf("ha: get stream checkpoint: %w", err)
	}
	cp, found, _, err := getOne(ctx, s, s.keys.StreamCheckpoint(source, stream), s.DecodeStreamCheckpoint)
	return cp, found, err
}

// GetStreamCheckpoints returns the checkpoint of every stream of source by
// stream name. Malformed keys are left out and reported in a *KeyErrors
// next to the map.
func (s *Store) GetStreamCheckpoints(ctx context.Context, source string) (map[string]StreamCheckpoint, int64, error) {
	if err := config.ValidateName("source", source); err != nil {
		return nil, 0, fmt.Errorf("ha: get stream checkpoints: %w", err)
	}
	return getRange(ctx, s, s.keys.StreamCheckpointPrefix(source), s.DecodeStreamCheckpoint)
}

// DeleteStreamCheckpoint deletes P/stream/checkpoint/{source}/{stream}.
func (s *Store) DeleteStreamCheckpoint(ctx context.Context, source, stream string) (int64, error) {
	return s.del(ctx, s.keys.StreamCheckpoint(source, stream))
}

// DecodeStreamCheckpoint decodes P/stream/checkpoint/{source}/{stream}
// leniently (unknown fields are listed in Unknown); the zero value on
// delete. A value without binlog-name is malformed.
func (s *Store) DecodeStreamCheckpoint(key string, value []byte) (StreamCheckpoint, error) {
	if _, _, err := s.keys.parse2(key, kindStreamCheckpoint, "stream"); err != nil || value == nil {
		return StreamCheckpoint{}, err
	}
	const what = "stream checkpoint"
	var cp StreamCheckpoint
	notes, err := config.DecodeValue(what, value, &cp, config.Lenient)
	if err != nil {
		return StreamCheckpoint{}, malformed(what, key, err)
	}
	if cp.BinlogName == "" {
		return StreamCheckpoint{}, malformed(what, key, errors.New("binlog-name is missing or empty"))
	}
	cp.Unknown = notes.Unknown
	return cp, nil
}
