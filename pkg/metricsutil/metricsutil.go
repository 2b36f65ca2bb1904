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

// ChunkCounters count what a data-copy unit (dump, load) moved:
// dm_<subsystem>_rows_total, _bytes_total and _chunks_total, labelled by
// task and source.
type ChunkCounters struct {
	Rows, Bytes, Chunks *prometheus.CounterVec
}

// NewChunkCounters creates the counters of subsystem with their help texts
// and registers them with reg (see Register); with a nil reg they are not
// registered but still usable.
func NewChunkCounters(reg prometheus.Registerer, subsystem, rowsHelp, bytesHelp, chunksHelp string) ChunkCounters {
	vec := func(name, help string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "dm", Subsystem: subsystem, Name: name, Help: help},
			[]string{"task", "source"})
		if reg == nil {
			return v
		}
		return Register(reg, v)
	}
	return ChunkCounters{
		Rows:   vec("rows_total", rowsHelp),
		Bytes:  vec("bytes_total", bytesHelp),
		Chunks: vec("chunks_total", chunksHelp),
	}
}

// Add counts one chunk of rows and bytes of task and source.
func (c ChunkCounters) Add(task, source string, rows, bytes int64) {
	c.Rows.WithLabelValues(task, source).Add(float64(rows))
	c.Bytes.WithLabelValues(task, source).Add(float64(bytes))
	c.Chunks.WithLabelValues(task, source).Inc()
}

// Forget deletes the series of task and source.
func (c ChunkCounters) Forget(task, source string) {
	labels := prometheus.Labels{"task": task, "source": source}
	c.Rows.DeletePartialMatch(labels)
	c.Bytes.DeletePartialMatch(labels)
	c.Chunks.DeletePartialMatch(labels)
}
