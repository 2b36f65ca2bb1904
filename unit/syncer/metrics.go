package syncer

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the sync unit's Prometheus metrics, shared by every sync unit
// of the process (labelled by task and source). Create one with NewMetrics,
// register it once, and pass it to New; a nil *Metrics records nothing.
type Metrics struct {
	rows  *prometheus.CounterVec
	ddls  *prometheus.CounterVec
	lag   *prometheus.GaugeVec
	batch *prometheus.HistogramVec
	size  *prometheus.HistogramVec
}

// NewMetrics creates the metrics (unregistered).
func NewMetrics() *Metrics {
	return &Metrics{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dm", Subsystem: "sync", Name: "rows_total",
			Help: "Row changes applied to the target, by type (insert, update, delete).",
		}, []string{"task", "source", "type"}),
		ddls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dm", Subsystem: "sync", Name: "ddls_total",
			Help: "DDL statements applied (or skipped/replaced by handle-error) on the target.",
		}, []string{"task", "source"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "dm", Subsystem: "sync", Name: "lag_seconds",
			Help: "Seconds between the source writing the last event read and now; 0 when caught up.",
		}, []string{"task", "source"}),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "dm", Subsystem: "sync", Name: "batch_duration_seconds",
			Help:    "Time to apply one batch (one target transaction).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"task", "source"}),
		size: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "dm", Subsystem: "sync", Name: "batch_size",
			Help:    "Row changes per batch.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}, []string{"task", "source"}),
	}
}

// Register registers every metric with r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	var errList []error
	for _, c := range []prometheus.Collector{m.rows, m.ddls, m.lag, m.batch, m.size} {
		errList = append(errList, r.Register(c))
	}
	return errors.Join(errList...)
}

// unitMetrics are the series of one unit; nil-safe.
type unitMetrics struct {
	m            *Metrics
	task, source string
}

// rows counts n applied row changes of kind k.
func (u *unitMetrics) rows(k changeKind, n uint64) {
	if u == nil || u.m == nil {
		return
	}
	u.m.rows.WithLabelValues(u.task, u.source, k.String()).Add(float64(n))
}

func (u *unitMetrics) ddl() {
	if u == nil || u.m == nil {
		return
	}
	u.m.ddls.WithLabelValues(u.task, u.source).Inc()
}

func (u *unitMetrics) setLag(seconds float64) {
	if u == nil || u.m == nil {
		return
	}
	u.m.lag.WithLabelValues(u.task, u.source).Set(seconds)
}

func (u *unitMetrics) batch(n int, d time.Duration) {
	if u == nil || u.m == nil {
		return
	}
	u.m.batch.WithLabelValues(u.task, u.source).Observe(d.Seconds())
	u.m.size.WithLabelValues(u.task, u.source).Observe(float64(n))
}

// forget deletes the unit's series (on Close/Kill).
func (u *unitMetrics) forget() {
	if u == nil || u.m == nil {
		return
	}
	labels := prometheus.Labels{"task": u.task, "source": u.source}
	u.m.rows.DeletePartialMatch(labels)
	u.m.ddls.DeletePartialMatch(labels)
	u.m.lag.DeletePartialMatch(labels)
	u.m.batch.DeletePartialMatch(labels)
	u.m.size.DeletePartialMatch(labels)
}
