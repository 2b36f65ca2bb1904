package worker

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/stage"
)

// Metrics are the worker's Prometheus metrics. The owner registers them
// (Register) on the registry it serves on /metrics.
type Metrics struct {
	ReconcileTotal    *prometheus.CounterVec   // labels: kind, result ("ok", "error")
	ReconcileDuration *prometheus.HistogramVec // labels: kind
	WatchRestarts     *prometheus.CounterVec   // labels: kind, reason
	SubTasks          *prometheus.GaugeVec     // labels: stage
	AutoResumes       *prometheus.CounterVec   // labels: kind ("subtask", "relay", "stream")
	// Stream tasks: events and batches the sinks acknowledged, the time a
	// sink took to acknowledge a batch, lag and state.
	StreamEvents      *prometheus.CounterVec   // labels: stream
	StreamBatches     *prometheus.CounterVec   // labels: stream, result ("ok", "error")
	StreamSinkLatency *prometheus.HistogramVec // labels: stream
	StreamLag         *prometheus.GaugeVec     // labels: stream
	StreamState       *prometheus.GaugeVec     // labels: stream, state (1 for the current state)
	// The shared binlog readers of streams (pkg/binlog/fanout), per
	// reading mode ("relay", "source"): subscribers by how they read
	// ("shared", "private") and moves between the two.
	StreamHubSubscribers *prometheus.GaugeVec   // labels: mode, read
	StreamHubMoves       *prometheus.CounterVec // labels: mode, move ("attach", "detach", "rewind")
}

// NewMetrics creates the metrics, unregistered.
func NewMetrics() *Metrics {
	return &Metrics{
		ReconcileTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dm_worker_reconcile_total",
			Help: "Reconciliations of etcd keys to local state, by key kind and result (ok, error).",
		}, []string{"kind", "result"}),
		ReconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dm_worker_reconcile_duration_seconds",
			Help:    "Time one reconciliation took, by key kind.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
		}, []string{"kind"}),
		WatchRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dm_worker_watch_restarts_total",
			Help: "Restarts of an etcd watch from a fresh snapshot, by key kind and reason (compacted, no leader, disconnected...).",
		}, []string{"kind", "reason"}),
		SubTasks: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dm_worker_subtasks",
			Help: "Subtasks on this worker, by stage.",
		}, []string{"stage"}),
		AutoResumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dm_worker_auto_resumes_total",
			Help: "Automatic resumes after a resumable error, by kind (subtask, relay, stream).",
		}, []string{"kind"}),
		StreamEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dm_worker_stream_events_total",
			Help: "Change events a stream's sink acknowledged.",
		}, []string{"stream"}),
		StreamBatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dm_worker_stream_batches_total",
			Help: "Batches written to a stream's sink, by result (ok: acknowledged, error: failed).",
		}, []string{"stream", "result"}),
		StreamSinkLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dm_worker_stream_sink_latency_seconds",
			Help:    "Time a stream's sink took to acknowledge a batch.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9),
		}, []string{"stream"}),
		StreamLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dm_worker_stream_lag_seconds",
			Help: "How far a stream's last acknowledged event is behind the source.",
		}, []string{"stream"}),
		StreamState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dm_worker_stream_state",
			Help: "A stream's state (checking, fill-history, streaming, paused, restarting, stopped): 1 for the current one.",
		}, []string{"stream", "state"}),
		StreamHubSubscribers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dm_worker_stream_hub_subscribers",
			Help: "Stream tasks of the bound source by how they read its binlog: shared (one decode for all) or private (a reader of their own), per reading mode (relay, source).",
		}, []string{"mode", "read"}),
		StreamHubMoves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dm_worker_stream_hub_moves_total",
			Help: "Stream tasks attached to the shared binlog reader, detached from it for lagging a full buffer, and rewinds of it to a new stream's earlier position, per reading mode.",
		}, []string{"mode", "move"}),
	}
}

// Register registers every metric on reg; the errors of those that failed
// are joined.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	// Every stage shows from the start, so an idle worker exports a
	// dm_worker_subtasks series of zeros rather than nothing.
	for _, s := range stage.All() {
		m.SubTasks.WithLabelValues(string(s)).Add(0)
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.ReconcileTotal, m.ReconcileDuration, m.WatchRestarts, m.SubTasks, m.AutoResumes,
		m.StreamEvents, m.StreamBatches, m.StreamSinkLatency, m.StreamLag, m.StreamState,
		m.StreamHubSubscribers, m.StreamHubMoves} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// connCollector exports, at scrape time, the numbers of a connection
// budget per server.
type connCollector struct {
	b                                 *dbconn.Budget
	open, limit, waiting, longestWait *prometheus.Desc
	refused, timeouts                 *prometheus.Desc
	binlogReaders                     *prometheus.Desc // sources only; nil for targets
}

// NewTargetConnCollector returns the collector of budget b's metrics
// (dm_worker_target_connections_*, labelled by target host:port), for the
// registry of /metrics.
func NewTargetConnCollector(b *dbconn.Budget) prometheus.Collector {
	return newConnCollector(b, dbconn.Targets)
}

// NewSourceConnCollector returns the collector of the source budget b's
// metrics (dm_worker_source_connections_*, labelled by source host:port),
// the binlog dumps from each source included (binlog_readers).
func NewSourceConnCollector(b *dbconn.Budget) prometheus.Collector {
	return newConnCollector(b, dbconn.Sources)
}

func newConnCollector(b *dbconn.Budget, kind dbconn.Kind) *connCollector {
	name := kind.String() // target, source
	desc := func(metric, help string) *prometheus.Desc {
		return prometheus.NewDesc("dm_worker_"+name+"_connections_"+metric, help, []string{name}, nil)
	}
	c := &connCollector{b: b,
		open:        desc("open", "Connections the worker holds to a "+name+" server (open or being dialed), over all tasks; binlog dumps not counted."),
		limit:       desc("limit", "The worker's limit of connections to a "+name+" ("+name+"-connection-limit; lower for a while after the server refused connections)."),
		waiting:     desc("waiting", "Callers waiting for a connection to a "+name+"."),
		longestWait: desc("longest_wait_seconds", "How long the longest waiting caller has waited for a connection to a "+name+"."),
		refused:     desc("refused_total", "New connections a "+name+" refused for lack of connections (errors 1040, 1203, 1226); each was retried."),
		timeouts:    desc("wait_timeouts_total", "Callers that waited in vain for a connection to a "+name+" (they got a resumable error)."),
	}
	if kind == dbconn.Sources {
		c.binlogReaders = desc("binlog_readers", "Binlog dumps the worker reads from a source (the relay, or each task, validator or stream reading it directly): one connection each, outside the limit.")
	}
	return c
}

// Describe sends the descriptions of every metric.
func (c *connCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.open, c.limit, c.waiting, c.longestWait, c.refused, c.timeouts} {
		ch <- d
	}
	if c.binlogReaders != nil {
		ch <- c.binlogReaders
	}
}

// Collect sends the budget's current numbers.
func (c *connCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.b.Stats() {
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(st.Open), st.Addr)
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(st.EffectiveLimit), st.Addr)
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(st.Waiting), st.Addr)
		ch <- prometheus.MustNewConstMetric(c.longestWait, prometheus.GaugeValue, st.LongestWait.Seconds(), st.Addr)
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(st.Refusals), st.Addr)
		ch <- prometheus.MustNewConstMetric(c.timeouts, prometheus.CounterValue, float64(st.Timeouts), st.Addr)
		if c.binlogReaders != nil {
			ch <- prometheus.MustNewConstMetric(c.binlogReaders, prometheus.GaugeValue, float64(st.BinlogReaders), st.Addr)
		}
	}
}
