package load

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dmworker/dm-worker/pkg/metricsutil"
)

// Metrics are the load unit's Prometheus counters, shared by every load
// unit of the process (labelled by task and source). Create one with
// NewMetrics and pass it to New; a nil *Metrics records nothing.
type Metrics struct {
	metricsutil.ChunkCounters
}

// NewMetrics creates the metrics and registers them with reg; a nil reg
// leaves them unregistered (tests). A collector already registered under
// the same name is reused.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return &Metrics{ChunkCounters: metricsutil.NewChunkCounters(reg, "load",
		"Rows loaded into the target (committed chunks).",
		"Bytes of chunk files loaded into the target (committed chunks).",
		"Chunk files loaded into the target, each in one transaction with its record.")}
}

// unitMetrics are the series of one unit; nil-safe.
type unitMetrics struct {
	m            *Metrics
	task, source string
}

// chunk counts one committed chunk.
func (u *unitMetrics) chunk(rows, bytes int64) {
	if u == nil || u.m == nil {
		return
	}
	u.m.Add(u.task, u.source, rows, bytes)
}

// forget deletes the unit's series (on Close/Kill).
func (u *unitMetrics) forget() {
	if u == nil || u.m == nil {
		return
	}
	u.m.Forget(u.task, u.source)
}
