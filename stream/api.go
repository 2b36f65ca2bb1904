package stream

import (
	"context"
	"time"

	"github.com/dmworker/dm-worker/pkg/binlog"
)

// Event is one change event ready for a sink (DESIGN.md §4).
type Event struct {
	// ID is the event identity <source>:<file>:<pos>:<row>: the NATS
	// Nats-Msg-Id, the Kafka header dm-event-id, the webhook
	// Idempotency-Key of a batch's first event.
	ID string
	// Key is the JSON of the row's key columns, e.g. {"id":7}; for a DDL
	// event, the JSON of {"db":…,"table":…}.
	Key []byte
	// Value is the JSON of the event in the stream's format.
	Value []byte
	// DB and Table name the table (Table empty for a database DDL); the
	// NATS subject is <subject>.<db>.<table>.
	DB, Table string
	// Op is "c", "u", "d", "r" or "ddl".
	Op string
}

// Sink delivers batches of events in order. Implementations bound what
// they keep in flight and retry transient failures with backoff inside
// Write until ctx is done.
type Sink interface {
	// Probe checks that the sink can take events (the readiness check of
	// state checking): nil when it can, else an error saying why, naming
	// the sink and what to do.
	Probe(ctx context.Context) error
	// Write delivers batch in order and returns nil only once the sink has
	// acknowledged every event (file: fsynced; webhook: 2xx; NATS: publish
	// acks; Kafka: produce acks). The checkpoint moves only after that.
	Write(ctx context.Context, batch []Event) error
	// Close releases connections and files; it does not fail events
	// already acknowledged.
	Close() error
}

// TableProgress is the fill-history progress of one table.
type TableProgress struct {
	Done bool `json:"done"`
	// Cursor is the key of the last row emitted, as text per key column
	// (empty before the first chunk).
	Cursor []string `json:"cursor,omitempty"`
	Rows   int64    `json:"rows"`
}

// Checkpoint is where a stream task resumes: the last location whose
// events the sink acknowledged, and the fill-history progress.
type Checkpoint struct {
	Location binlog.Location `json:"location"`
	// SnapshotDone is set once fill-history finished (or was not asked for).
	SnapshotDone bool `json:"snapshot-done"`
	// Snapshot is the per-table progress while fill-history runs, by
	// "db.table".
	Snapshot map[string]TableProgress `json:"snapshot,omitempty"`
	Time     time.Time                `json:"time"`
}
