package load

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetricsRegisterOnceAndReuse(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := NewMetrics(reg)
	b := NewMetrics(reg) // a second unit package instance in one binary: reuses the series
	u := &unitMetrics{m: a, task: "t", source: "s"}
	u.chunk(10, 100)
	(&unitMetrics{m: b, task: "t", source: "s"}).chunk(5, 50)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			got[f.GetName()] += m.GetCounter().GetValue()
		}
	}
	if got["dm_load_rows_total"] != 15 || got["dm_load_bytes_total"] != 150 || got["dm_load_chunks_total"] != 2 {
		t.Fatalf("gathered %v", got)
	}
	u.forget()
	if families, _ := reg.Gather(); len(families) != 0 {
		t.Fatalf("series left after forget: %v", families)
	}
	var none *unitMetrics
	none.chunk(1, 1) // nil-safe
	(&unitMetrics{}).chunk(1, 1)
	NewMetrics(nil).Rows.WithLabelValues("t", "s").Inc() // unregistered but usable
}
