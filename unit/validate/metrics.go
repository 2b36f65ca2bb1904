package validate

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dmworker/dm-worker/pkg/metricsutil"
	"github.com/dmworker/dm-worker/unit"
)

// Metrics are the validators' Prometheus metrics, shared by every validator
// of the process (labelled by task and source). A nil *Metrics records
// nothing.
type Metrics struct {
	pending *prometheus.GaugeVec
	checked *prometheus.CounterVec
	errors  *prometheus.GaugeVec
	lag     *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg (or reuses
// the ones reg already holds).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	labels := []string{"task", "source"}
	return &Metrics{
		pending: metricsutil.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "dm", Subsystem: "validator", Name: "pending_rows",
			Help: "Changed rows read from the binlog and not judged yet.",
		}, labels)),
		checked: metricsutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dm", Subsystem: "validator", Name: "rows_checked_total",
			Help: "Row comparisons made on the target.",
		}, labels)),
		errors: metricsutil.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "dm", Subsystem: "validator", Name: "errors",
			Help: "Validation errors by state (new, ignored, resolved).",
		}, append(labels, "state"))),
		lag: metricsutil.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "dm", Subsystem: "validator", Name: "lag_seconds",
			Help: "Age of the oldest row change waiting to be judged; 0 when none waits.",
		}, labels)),
	}
}

// unitMetrics are the series of one validator; nil-safe.
type unitMetrics struct {
	m            *Metrics
	task, source string
}

func (u *unitMetrics) setPending(n int, lag float64) {
	if u.m == nil {
		return
	}
	u.m.pending.WithLabelValues(u.task, u.source).Set(float64(n))
	u.m.lag.WithLabelValues(u.task, u.source).Set(lag)
}

func (u *unitMetrics) addChecked(n int) {
	if u.m != nil {
		u.m.checked.WithLabelValues(u.task, u.source).Add(float64(n))
	}
}

func (u *unitMetrics) setCounts(c unit.ValidationErrorCounts) {
	if u.m == nil {
		return
	}
	u.m.errors.WithLabelValues(u.task, u.source, StateNew).Set(float64(c.New))
	u.m.errors.WithLabelValues(u.task, u.source, StateIgnored).Set(float64(c.Ignored))
	u.m.errors.WithLabelValues(u.task, u.source, StateResolved).Set(float64(c.Resolved))
}
