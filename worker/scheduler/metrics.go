package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dmworker/dm-worker/pkg/metricsutil"
)

// Metrics are the scheduler's Prometheus metrics. Create them with
// NewMetrics and pass them in Config; a nil *Metrics records nothing.
type Metrics struct {
	moves    *prometheus.CounterVec
	leader   prometheus.Gauge
	unplaced prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg; with a nil reg
// they are not registered but still usable. A metric reg already holds is
// shared.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dm", Subsystem: "scheduler", Name: "moves_total",
			Help: "Source bindings this worker changed while leading the scheduler, by reason (worker-dead, unbound, stale).",
		}, []string{"reason"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "dm", Subsystem: "scheduler", Name: "leader",
			Help: "1 while this worker leads the scheduler, else 0.",
		}),
		unplaced: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "dm", Subsystem: "scheduler", Name: "unplaced_sources",
			Help: "Sources with a config and no alive bound worker for which the leader found no free worker, at its last pass.",
		}),
	}
	if reg != nil {
		m.moves = metricsutil.Register(reg, m.moves)
		m.leader = metricsutil.Register(reg, m.leader)
		m.unplaced = metricsutil.Register(reg, m.unplaced)
	}
	return m
}

// moved counts one applied move.
func (m *Metrics) moved(reason string) {
	if m == nil {
		return
	}
	m.moves.WithLabelValues(reason).Inc()
}

// setLeader records whether this worker leads.
func (m *Metrics) setLeader(leading bool) {
	if m == nil {
		return
	}
	v := 0.0
	if leading {
		v = 1
	}
	m.leader.Set(v)
}

// setUnplaced records the number of unplaced sources.
func (m *Metrics) setUnplaced(n int) {
	if m == nil {
		return
	}
	m.unplaced.Set(float64(n))
}
