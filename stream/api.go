package stream

import (
	"context"
	"strconv"
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
	// rec, when set, is the event's sink record with a newline,
	// {"key":<Key>,"value":<Value>}\n, Key and Value being parts of it
	// (the encoder lays a row change out so): appendSinkRecord copies it
	// in one piece. (Writing such records to the file by writev(2) without
	// a copy cost half again the CPU of copying them into one buffer and
	// one write(2): measured, not done.)
	rec []byte
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
	// Location is a transaction boundary: the end of the last transaction
	// whose events the sink acknowledged, with the GTID set there. When
	// Txn is set it is also the start of the transaction the sink
	// acknowledged a part of (its GTID set excludes that transaction).
	Location binlog.Location `json:"location"`
	// Txn is set while the sink acknowledged some, not all, events of the
	// transaction that starts at Location: a resume reopens the binlog at
	// Location and drops that transaction's events up to and including
	// the last acknowledged one. nil at a transaction boundary.
	Txn *TxnProgress `json:"txn,omitempty"`
	// SnapshotDone is set once fill-history finished (or was not asked for).
	SnapshotDone bool `json:"snapshot-done"`
	// Snapshot is the per-table progress while fill-history runs, by
	// "db.table".
	Snapshot map[string]TableProgress `json:"snapshot,omitempty"`
	// OnlineDDL (online-ddl on) holds the recorded DDLs of the shadow
	// tables of online schema changes under way at Location.
	OnlineDDL []OnlineDDLRecord `json:"online-ddl,omitempty"`
	Time      time.Time         `json:"time"`
}

// TxnProgress is how far into one transaction the sink acknowledged: the
// identity (<source>:<File>:<Pos>:<Row>, suffixed ":d" when Delete) of
// the last acknowledged event of the transaction and how many of its
// events were acknowledged. It names a point inside a transaction for a
// Checkpoint whose Location is that transaction's start.
type TxnProgress struct {
	// File, Pos and Row are the binlog coordinates of the last
	// acknowledged event, as in its identity and "source" block.
	File string `json:"binlog-name"`
	Pos  uint32 `json:"binlog-pos"`
	Row  int    `json:"row"`
	// Delete: that event is the delete half (identity suffixed ":d") of an
	// update that changed the row's key; its create half was not
	// acknowledged.
	Delete bool `json:"key-delete,omitempty"`
	// GTID is the transaction's GTID ("" without GTIDs): with it, a resume
	// recognises the transaction among others the source sends first.
	GTID string `json:"gtid,omitempty"`
	// Events counts the transaction's acknowledged events; a resume that
	// reads the transaction at other binlog coordinates (a failover with
	// GTIDs) drops this many of its first events instead.
	Events int64 `json:"events"`
}

// String is the identity-like form shown in logs: <file>:<pos>:<row>[:d]
// (#<events>).
func (p *TxnProgress) String() string {
	if p == nil {
		return ""
	}
	s := p.File + ":" + strconv.FormatUint(uint64(p.Pos), 10) + ":" + strconv.Itoa(p.Row)
	if p.Delete {
		s += ":d"
	}
	return s + " (#" + strconv.FormatInt(p.Events, 10) + ")"
}
