package syncer

import (
	"sync/atomic"
	"time"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/unit"
)

// counters are the unit's running totals; atomics, read by Status at any
// time.
type counters struct {
	rows         [3]atomic.Uint64 // by changeKind
	filtered     [3]atomic.Uint64 // changes expression filters skipped, by changeKind
	ddls         atomic.Uint64
	skippedDDLs  atomic.Uint64
	transactions atomic.Uint64
	batches      atomic.Uint64
}

// Status is the sync unit's progress as shown in a subtask's "progress".
type Status struct {
	// Binlog is the location read so far, "file:pos" in the source's
	// coordinates; BinlogGTID the GTID set executed up to there.
	Binlog     string `json:"binlog"`
	BinlogGTID string `json:"binlog-gtid"`
	// Checkpoint is the last location saved in the target (every change
	// before it is applied).
	Checkpoint     string `json:"checkpoint"`
	CheckpointGTID string `json:"checkpoint-gtid,omitempty"`
	// LagSeconds is how far the applied changes are behind the source
	// (0 when caught up).
	LagSeconds float64 `json:"lag-seconds"`
	Inserts    uint64  `json:"inserts"`
	Updates    uint64  `json:"updates"`
	Deletes    uint64  `json:"deletes"`
	// FilteredInserts, FilteredUpdates and FilteredDeletes count the row
	// changes expression filters kept off the target.
	FilteredInserts uint64 `json:"filtered-inserts,omitempty"`
	FilteredUpdates uint64 `json:"filtered-updates,omitempty"`
	FilteredDeletes uint64 `json:"filtered-deletes,omitempty"`
	DDLs            uint64 `json:"ddls"`
	// SkippedDDLs counts the statements of the binlog that are never
	// replicated (triggers, procedures, functions, events, views,
	// accounts...: pkg/ddlkind), each logged when skipped.
	SkippedDDLs  uint64   `json:"skipped-ddls"`
	Transactions uint64   `json:"transactions"`
	Batches      uint64   `json:"batches"`
	QueueDepth   int      `json:"queue-depth"`
	SafeMode     bool     `json:"safe-mode"`
	Warnings     []string `json:"warnings,omitempty"`
	// StuckOn is the location ("file:pos", start of the event) of the DDL
	// the target rejected, which handle-error can skip or replace.
	StuckOn string `json:"stuck-on,omitempty"`
}

// progress is the part of Status the read loop updates; guarded by
// Syncer.mu.
type progress struct {
	binlog, gtid   string
	checkpoint     string
	checkpointGTID string
	eventTime      time.Time // timestamp of the last event read; zero when caught up
	safeMode       bool
	warnings       []string
	warned         map[tableName]bool
	fkWarned       map[string]bool // foreign key warnings given
	exprWarned     map[string]bool // expression filter warnings given
	stuckOn        string
	// shard is the lock shown as "shard-ddl" (shard.go); shardSince when
	// its table began to wait.
	shard      *unit.ShardDDLStatus
	shardSince time.Time
	// shardConflict is the optimistic lock whose conflict paused the
	// unit: shown while no run shows a lock, until a run passes the DDL.
	shardConflict *unit.ShardDDLStatus
	// read is the location read so far and applied the newest location
	// all of whose changes are on the target (SyncProgress).
	read, applied binlog.Location
}

// publishApplied records that every change before loc is on the target.
func (s *Syncer) publishApplied(loc binlog.Location) {
	s.mu.Lock()
	s.prog.applied = loc
	s.mu.Unlock()
}

// SyncBehind reports whether the running unit is catching up: the last
// event it read was written catchUpLag or more ago (unit.SyncSource).
func (s *Syncer) SyncBehind() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.disp != nil && s.disp.catchingUp.Load()
}

// SyncProgress is the running unit's progress for the subtask's
// validator (unit.SyncSource): every change before applied is committed on
// the target, and nothing after read has been read yet, so nothing after
// it can be on the target. ok is false between runs. Safe for concurrent
// use with Process.
func (s *Syncer) SyncProgress() (applied, read binlog.Location, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disp == nil {
		return binlog.Location{}, binlog.Location{}, false
	}
	return s.prog.applied, s.prog.read, true
}
