// Package metricsutil holds the one Prometheus helper the units share:
// registering a collector, or reusing the one a registry already holds
// under the same name (a second unit metrics set on one registry).
package metricsutil

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c with reg and returns it, or returns the collector
// of the same type reg already holds under c's name. Any other registration
// error is a programming error of the binary and panics, as MustRegister
// does.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
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
	panic("register metrics: " + err.Error())
}
