package dump

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dmworker/dm-worker/pkg/metricsutil"
)

// Metrics are the dump unit's Prometheus metrics, shared by every dump unit
// of the process (labelled by task and source). Create one with NewMetrics
// and pass it to New; a nil *Metrics records nothing.
type Metrics struct {
	rows     *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	chunks   *prometheus.CounterVec
	lockHeld *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg; with a nil
// reg they are not registered but still usable. A metric reg already holds
// (a second NewMetrics on one registry) is shared.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	labels := []string{"task", "source"}
	m := &Metrics{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dm", Subsystem: "dump", Name: "rows_total",
			Help: "Rows written to chunk files by the dump unit.",
		}, labels),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dm", Subsystem: "dump", Name: "bytes_total",
			Help: "Bytes written to chunk files by the dump unit.",
		}, labels),
		chunks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dm", Subsystem: "dump", Name: "chunks_total",
			Help: "Chunk files finished (fsynced and renamed) by the dump unit.",
		}, labels),
		lockHeld: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "dm", Subsystem: "dump", Name: "lock_held_seconds",
			Help: "How long the last snapshot held FLUSH TABLES WITH READ LOCK (0 for the binlog-snapshot method).",
		}, labels),
	}
	if reg != nil {
		m.rows = metricsutil.Register(reg, m.rows)
		m.bytes = metricsutil.Register(reg, m.bytes)
		m.chunks = metricsutil.Register(reg, m.chunks)
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
	u.m.rows.WithLabelValues(u.task, u.source).Add(float64(rows))
	u.m.bytes.WithLabelValues(u.task, u.source).Add(float64(bytes))
	u.m.chunks.WithLabelValues(u.task, u.source).Inc()
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
	labels := prometheus.Labels{"task": u.task, "source": u.source}
	u.m.rows.DeletePartialMatch(labels)
	u.m.bytes.DeletePartialMatch(labels)
	u.m.chunks.DeletePartialMatch(labels)
	u.m.lockHeld.DeletePartialMatch(labels)
}
