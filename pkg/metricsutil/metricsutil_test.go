package metricsutil

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegisterReusesTheRegisteredCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "x_total", Help: "x"}
	first := Register(reg, prometheus.NewCounterVec(opts, []string{"l"}))
	second := Register(reg, prometheus.NewCounterVec(opts, []string{"l"}))
	if first != second {
		t.Fatal("a second registration under the same name did not return the first collector")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a different collector under the same name must panic")
		}
	}()
	Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "x_total", Help: "other"}, []string{"other"}))
}
