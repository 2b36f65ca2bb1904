package dump

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
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
		m.rows = register(reg, m.rows)
		m.bytes = register(reg, m.bytes)
		m.chunks = register(reg, m.chunks)
		m.lockHeld = register(reg, m.lockHeld)
	}
	return m
}

// register registers c with reg, or returns the collector reg already has
// under its name. Any other registration error is a programming error.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic("dump: register metrics: " + err.Error())
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
