package dump

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/dmworker/dm-worker/pkg/binlog"
)

// Stages of a dump as Status shows them.
const (
	StageNew      = "new"      // not started
	StageSnapshot = "snapshot" // taking the snapshot
	StageDumping  = "dumping"  // writing chunks
	StageFinished = "finished" // the manifest is written (or an old one reused)
)

// Status is the dump unit's progress as shown in a subtask's "progress".
type Status struct {
	Stage  string `json:"stage"`
	DumpID string `json:"dump-id,omitempty"`
	// Method is the snapshot method (dumpfile.MethodFlushLock or
	// dumpfile.MethodBinlogSnapshot); LockHeldSeconds how long FLUSH
	// TABLES WITH READ LOCK was held.
	Method          string  `json:"method,omitempty"`
	LockHeldSeconds float64 `json:"lock-held-seconds"`
	// Snapshot is the snapshot's binlog location, "file:pos", and
	// SnapshotGTID its GTID set.
	Snapshot     string `json:"snapshot,omitempty"`
	SnapshotGTID string `json:"snapshot-gtid,omitempty"`
	TablesTotal  int    `json:"tables-total"`
	TablesDone   int    `json:"tables-done"`
	// ChunksTotal is 0 until every table's chunk boundaries are known.
	ChunksTotal int   `json:"chunks-total"`
	ChunksDone  int   `json:"chunks-done"`
	Rows        int64 `json:"rows"`
	Bytes       int64 `json:"bytes"`
	// RowsPerSecond is the rate over the run so far.
	RowsPerSecond float64 `json:"rows-per-second"`
	// ETASeconds estimates the time left from the chunks done so far;
	// absent while the number of chunks is not known.
	ETASeconds *float64 `json:"eta-seconds,omitempty"`
	Dir        string   `json:"dir"`
}

// progress is the state of the current run behind Status. Counters are
// atomics written by the workers; the rest is guarded by mu.
type progress struct {
	rows, bytes atomic.Int64

	mu sync.Mutex
	// guarded by mu:
	stage       string
	dumpID      string
	method      string
	lockHeld    time.Duration
	start       binlog.Location // the snapshot's; zero until taken
	started     time.Time
	finished    time.Time
	tablesTotal int
	tablesDone  int
	chunksTotal int // 0 until known
	chunksDone  int
}

// status builds a Status at now.
func (p *progress) status(dir string, now time.Time) Status {
	p.mu.Lock()
	st := Status{
		Stage: p.stage, DumpID: p.dumpID, Method: p.method, LockHeldSeconds: p.lockHeld.Seconds(),
		SnapshotGTID: p.start.GTID,
		TablesTotal:  p.tablesTotal, TablesDone: p.tablesDone,
		ChunksTotal: p.chunksTotal, ChunksDone: p.chunksDone, Dir: dir,
	}
	if !p.start.IsZero() {
		st.Snapshot = p.start.String()
	}
	started, finished := p.started, p.finished
	p.mu.Unlock()
	st.Rows, st.Bytes = p.rows.Load(), p.bytes.Load()
	if st.Stage == "" {
		st.Stage = StageNew
	}
	if started.IsZero() {
		return st
	}
	end := now
	if !finished.IsZero() {
		end = finished
	}
	elapsed := end.Sub(started).Seconds()
	if elapsed > 0 {
		st.RowsPerSecond = float64(st.Rows) / elapsed
	}
	if st.ChunksTotal > 0 && st.ChunksDone > 0 {
		eta := elapsed * float64(st.ChunksTotal-st.ChunksDone) / float64(st.ChunksDone)
		st.ETASeconds = &eta
	}
	return st
}

// reset starts a new run's progress.
func (p *progress) reset(now time.Time) {
	p.rows.Store(0)
	p.bytes.Store(0)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stage, p.dumpID, p.method, p.lockHeld = StageSnapshot, "", "", 0
	p.start = binlog.Location{}
	p.started, p.finished = now, time.Time{}
	p.tablesTotal, p.tablesDone, p.chunksTotal, p.chunksDone = 0, 0, 0, 0
}

// snapshot returns the snapshot's location once it is taken.
func (p *progress) snapshot() (binlog.Location, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.start, !p.start.IsZero()
}

// update runs f with mu held.
func (p *progress) update(f func(p *progress)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}
