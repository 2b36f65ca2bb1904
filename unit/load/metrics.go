package load

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dmworker/dm-worker/pkg/metricsutil"
)

// Metrics are the load unit's Prometheus counters, shared by every load
// unit of the process (labelled by task and source). Create one with
// NewMetrics and pass it to New; a nil *Metrics records nothing.
type Metrics struct {
	rows   *prometheus.CounterVec
	bytes  *prometheus.CounterVec
	chunks *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg; a nil reg
// leaves them unregistered (tests). A collector already registered under
// the same name is reused.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "dm", Subsystem: "load", Name: name, Help: help},
			[]string{"task", "source"})
	}
	m := &Metrics{
		rows:   vec("rows_total", "Rows loaded into the target (committed chunks)."),
		bytes:  vec("bytes_total", "Bytes of chunk files loaded into the target (committed chunks)."),
		chunks: vec("chunks_total", "Chunk files loaded into the target, each in one transaction with its record."),
	}
	if reg == nil {
		return m
	}
	m.rows = metricsutil.Register(reg, m.rows)
	m.bytes = metricsutil.Register(reg, m.bytes)
	m.chunks = metricsutil.Register(reg, m.chunks)
	return m
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
	u.m.rows.WithLabelValues(u.task, u.source).Add(float64(rows))
	u.m.bytes.WithLabelValues(u.task, u.source).Add(float64(bytes))
	u.m.chunks.WithLabelValues(u.task, u.source).Inc()
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
}
