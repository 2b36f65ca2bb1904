package load

import (
	"sync"
	"time"
)

// Status is the load unit's progress as shown in a subtask's "progress".
// Totals are of the whole dump; done counts include chunks loaded by
// earlier runs (before a pause or a crash). Rows and Bytes are those of the
// chunks done, as the manifest counts them (a chunk whose rows a filter
// rule skips is done too); the Prometheus counters count what went into
// the target.
type Status struct {
	DumpID      string `json:"dump-id"`
	Dir         string `json:"dir"`
	TablesTotal int    `json:"tables-total"`
	TablesDone  int    `json:"tables-done"`
	ChunksTotal int    `json:"chunks-total"`
	ChunksDone  int    `json:"chunks-done"`
	RowsTotal   int64  `json:"rows-total"`
	Rows        int64  `json:"rows"`
	BytesTotal  int64  `json:"bytes-total"`
	Bytes       int64  `json:"bytes"`
	// RowsPerSecond is the rate of the current (or last) run, as the dump
	// unit shows it.
	RowsPerSecond float64 `json:"rows-per-second"`
	// ETASeconds is the time left at that rate; absent when unknown or done.
	ETASeconds *float64 `json:"eta-seconds,omitempty"`
	Finished   bool     `json:"finished"`
}

// progress is the unit's running state behind Status; safe for concurrent
// use.
type progress struct {
	mu sync.Mutex
	// guarded by mu:
	st         Status
	tableLeft  map[int]int // manifest table index -> chunks not yet loaded
	runStart   time.Time
	runRows    int64
	lastUpdate time.Time
}

// reset starts counting a dump: totals, and what earlier runs loaded.
func (p *progress) reset(st Status, tableLeft map[int]int, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.st, p.tableLeft = st, tableLeft
	p.runStart, p.runRows, p.lastUpdate = now, 0, now
	p.countDoneTables()
}

func (p *progress) countDoneTables() {
	done := 0
	for _, left := range p.tableLeft {
		if left == 0 {
			done++
		}
	}
	p.st.TablesDone = done
}

// chunkDone counts one chunk of table committed now.
func (p *progress) chunkDone(table int, rows, bytes int64, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.st.ChunksDone++
	p.st.Rows += rows
	p.st.Bytes += bytes
	p.runRows += rows
	p.lastUpdate = now
	if p.tableLeft[table] > 0 {
		p.tableLeft[table]--
		if p.tableLeft[table] == 0 {
			p.st.TablesDone++
		}
	}
}

// finish marks the load finished.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.st.Finished = true
}

// snapshot returns the status with the rate of the current run (rows
// committed over the time from its start to its last commit) and the ETA
// at that rate.
func (p *progress) snapshot() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.st
	if el := p.lastUpdate.Sub(p.runStart).Seconds(); el > 0 && p.runRows > 0 {
		st.RowsPerSecond = float64(p.runRows) / el
	}
	if st.RowsPerSecond > 0 && !st.Finished && st.RowsTotal > st.Rows {
		eta := float64(st.RowsTotal-st.Rows) / st.RowsPerSecond
		st.ETASeconds = &eta
	}
	return st
}
