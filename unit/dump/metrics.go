package dump

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dmworker/dm-worker/pkg/metricsutil"
)

// Metrics are the dump unit's Prometheus metrics, shared by every dump unit
// of the process (labelled by task and source). Create one with NewMetrics
// and pass it to New; a nil *Metrics records nothing.
type Metrics struct {
	metricsutil.ChunkCounters
	lockHeld *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg; with a nil
// reg they are not registered but still usable. A metric reg already holds
// (a second NewMetrics on one registry) is shared.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ChunkCounters: metricsutil.NewChunkCounters(reg, "dump",
			"Rows written to chunk files by the dump unit.",
			"Bytes written to chunk files by the dump unit.",
			"Chunk files finished (fsynced and renamed) by the dump unit."),
		lockHeld: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "dm", Subsystem: "dump", Name: "lock_held_seconds",
			Help: "How long the last snapshot held FLUSH TABLES WITH READ LOCK (0 for the binlog-snapshot method).",
		}, []string{"task", "source"}),
	}
	if reg != nil {
		m.lockHeld = metricsutil.Register(reg, m.lockHeld)
	}
	return m
}

// unitMetrics are the series of one unit; nil-safe.
type unitMetrics struct {
	m            *Metrics
	task, source string
}

func (u *unitMetrics) chunk(rows, bytes int64) {
	if u == nil || u.m == nil {
		return
	}
	u.m.Add(u.task, u.source, rows, bytes)
}

func (u *unitMetrics) setLockHeld(seconds float64) {
	if u == nil || u.m == nil {
		return
	}
	u.m.lockHeld.WithLabelValues(u.task, u.source).Set(seconds)
}

// forget deletes the unit's series (on Close/Kill).
func (u *unitMetrics) forget() {
	if u == nil || u.m == nil {
		return
	}
	u.m.Forget(u.task, u.source)
	u.m.lockHeld.DeletePartialMatch(prometheus.Labels{"task": u.task, "source": u.source})
}
