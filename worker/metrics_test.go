package worker

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetricsRegister(t *testing.T) {
	m := NewMetrics()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatalf("register: %v", err)
	}
	m.ReconcileTotal.WithLabelValues("subtask", "ok").Inc()
	m.ReconcileDuration.WithLabelValues("subtask").Observe(0.01)
	m.WatchRestarts.WithLabelValues("subtask", "compacted").Inc()
	m.SubTasks.WithLabelValues("Running").Set(2)
	m.AutoResumes.WithLabelValues("subtask").Inc()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "dm_worker_") || mf.GetHelp() == "" {
			t.Errorf("metric %q: want prefix dm_worker_ and a help text", mf.GetName())
		}
		got[mf.GetName()] = true
	}
	for _, name := range []string{"dm_worker_reconcile_total", "dm_worker_reconcile_duration_seconds",
		"dm_worker_watch_restarts_total", "dm_worker_subtasks", "dm_worker_auto_resumes_total"} {
		if !got[name] {
			t.Errorf("metric %s not gathered", name)
		}
	}
	if err := m.Register(reg); err == nil {
		t.Fatal("registering twice did not fail")
	}
}
