package relay

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the relay's Prometheus collectors, labelled by source. The
// creator registers them once with Register.
type Metrics struct {
	BytesWritten  *prometheus.CounterVec
	EventsWritten *prometheus.CounterVec
	LagBytes      *prometheus.GaugeVec
	LagSeconds    *prometheus.GaugeVec
	Reconnects    *prometheus.CounterVec
	PurgedFiles   *prometheus.CounterVec
}

// NewMetrics creates the collectors.
func NewMetrics() *Metrics {
	labels := []string{"source"}
	return &Metrics{
		BytesWritten: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "dm", Subsystem: "relay",
			Name: "written_bytes_total", Help: "Bytes of binlog events written to relay files."}, labels),
		EventsWritten: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "dm", Subsystem: "relay",
			Name: "written_events_total", Help: "Binlog events written to relay files."}, labels),
		LagBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "dm", Subsystem: "relay",
			Name: "lag_bytes", Help: "Bytes the relay is behind SHOW MASTER STATUS (within the source's current file; its position when the relay is in an older file)."}, labels),
		LagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "dm", Subsystem: "relay",
			Name: "lag_seconds", Help: "Age of the last event written while the relay is behind the source; 0 when caught up."}, labels),
		Reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "dm", Subsystem: "relay",
			Name: "reconnects_total", Help: "Reconnections to the source after an interrupted binlog dump."}, labels),
		PurgedFiles: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "dm", Subsystem: "relay",
			Name: "purged_files_total", Help: "Relay files removed by the purger."}, labels),
	}
}

// Register registers every collector with reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	var errList []error
	for _, c := range []prometheus.Collector{m.BytesWritten, m.EventsWritten, m.LagBytes, m.LagSeconds, m.Reconnects, m.PurgedFiles} {
		if err := reg.Register(c); err != nil {
			errList = append(errList, err)
		}
	}
	if err := errors.Join(errList...); err != nil {
		return fmt.Errorf("relay: register metrics: %w", err)
	}
	return nil
}
