package dump

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestMetrics: a dump counts rows, bytes and chunks under its task and
// source, a second NewMetrics on one registry shares the collectors, and
// Kill forgets the unit's series.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	if again := NewMetrics(reg); again.Rows != m.Rows {
		t.Fatal("a second NewMetrics on one registry did not share the collectors")
	}
	src := startSource(t)
	src.Exec(t, "CREATE DATABASE app")
	src.Exec(t, "CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(10))")
	src.Exec(t, "INSERT INTO app.t SELECT seq, 'abc' FROM app.seq_1_to_250")
	cfg, scfg := configs(src, mariadbtest.SourceUser, mariadbtest.SourcePassword, 2, 100)
	d, err := New(cfg, scfg, t.TempDir(), m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Kill()
	if err := d.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	man := process(t, d)
	got := gather(t, reg)
	want := map[string]float64{
		"dm_dump_rows_total": float64(man.Rows()), "dm_dump_bytes_total": float64(man.Bytes()),
		"dm_dump_chunks_total": float64(man.Chunks()), "dm_dump_lock_held_seconds": man.LockHeld.Seconds(),
	}
	for name, w := range want {
		if v, ok := got[name]; !ok || v != w {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, w)
		}
	}
	if man.LockHeld <= 0 {
		t.Errorf("lock held %v", man.LockHeld)
	}
	d.Kill()
	if got := gather(t, reg); len(got) != 0 {
		t.Errorf("series after Kill: %v", got)
	}
}

// gather returns the value of every series of task1/mysql-01 by metric name.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["task"] != "task1" || labels["source"] != "mysql-01" {
				t.Errorf("%s has labels %v", f.GetName(), labels)
			}
			if c := m.GetCounter(); c != nil {
				out[f.GetName()] = c.GetValue()
			} else if g := m.GetGauge(); g != nil {
				out[f.GetName()] = g.GetValue()
			}
		}
	}
	return out
}
