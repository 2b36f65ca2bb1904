package worker

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/binlog/fanout"
	"github.com/dmworker/dm-worker/pkg/binlog/upstream"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/stream"
)

// StreamRuntimeBuilder builds the stream runtime of one bound source: meta
// is the worker's meta store (nil with metaErr when it cannot be used),
// relay returns the relay reader while relay runs for the source, else
// nil.
type StreamRuntimeBuilder func(src *config.SourceConfig, meta *stream.Meta, metaErr error,
	relay func() binlog.StreamOpener, logger *zap.Logger) *StreamRuntime

// OpenStreamMeta opens the worker's stream meta store at
// <dataDir>/stream/meta.db, creating the directory (0750).
func OpenStreamMeta(dataDir string) (*stream.Meta, error) {
	dir := filepath.Join(dataDir, "stream")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create the stream meta directory %s: %w", dir, err)
	}
	return stream.OpenMeta(filepath.Join(dir, "meta.db"))
}

// NewStreamRuntimeBuilder is the builder of the real stream runtime: tasks
// read the relay when it runs, else the source over a replication
// connection of their own; schemas, snapshots and positions come over one
// connection pool to the source, opened lazily, whose connections come
// from sources, the worker's budget of source connections (nil: a pool of
// its own), where the tasks' binlog dumps are counted too.
func NewStreamRuntimeBuilder(metrics *Metrics, sources *dbconn.Budget) StreamRuntimeBuilder {
	return func(src *config.SourceConfig, meta *stream.Meta, metaErr error,
		relay func() binlog.StreamOpener, logger *zap.Logger) *StreamRuntime {
		db := &lazySourceDB{src: src, budget: sources}
		hubs := newStreamHubs(metrics, logger.With(zap.String("source", src.SourceID)))
		return &StreamRuntime{
			Meta: meta, MetaErr: metaErr,
			NewTask: func(cfg *config.StreamConfig, start stream.Checkpoint,
				save func(context.Context, stream.Checkpoint) error, log *zap.Logger) (StreamTask, error) {
				conn, err := db.get()
				if err != nil {
					return nil, err
				}
				inner, err := stream.NewSink(cfg.Name, cfg.Sink, log)
				if err != nil {
					return nil, err
				}
				sink := newMeasuredSink(inner, cfg.Name, metrics)
				tc := stream.TaskConfig{
					Stream: cfg, Source: src, Opener: relay, DB: conn, Sources: sources, Sink: sink, Save: save, Start: start, Logger: log,
					Shared: hubs.opener(cfg.Name),
				}
				if meta != nil {
					tc.SaveLocal = func(_ context.Context, cp stream.Checkpoint) error {
						if err := meta.SaveCheckpoint(cfg.Name, cp); err != nil {
							return errs.Wrap(err, CodeStreamMetaUnavailable, "stream %q: save its checkpoint", cfg.Name)
						}
						return nil
					}
				}
				t, err := stream.NewTask(tc)
				if err != nil {
					_ = sink.Close()
					return nil, err
				}
				return t, nil
			},
			Current: func(ctx context.Context) (binlog.Location, error) {
				conn, err := db.get()
				if err != nil {
					return binlog.Location{}, err
				}
				return stream.CurrentLocation(ctx, conn)
			},
			Close: func() {
				hubs.close()
				db.close()
			},
		}
	}
}

// streamHubs are the shared binlog readers of one bound source's stream
// tasks, one per reading mode (a stream reads the relay while it runs for
// the source, else the source): each event is read and decoded once for
// every stream attached (pkg/binlog/fanout). A failover or rebind builds a
// new stream runtime, and with it new hubs.
type streamHubs struct {
	relay, source *fanout.Hub
	// independent: every stream reads on its own (bench-only, see
	// independentEnv).
	independent bool
}

// independentEnv, set to 1 in the worker's environment, makes every stream
// read the binlog on its own as before the shared reader: only for the
// benchmark that compares the two (tests/bench/stream_fanout_test.go);
// not a supported setting.
const independentEnv = "DM_WORKER_BENCH_STREAM_INDEPENDENT"

func newStreamHubs(m *Metrics, log *zap.Logger) *streamHubs {
	hub := func(mode string, silence time.Duration) *fanout.Hub {
		cfg := fanout.Config{Silence: silence, Logger: log.With(zap.String("hub", mode))}
		if m != nil {
			cfg.Metrics = fanout.Metrics{
				Shared:   m.StreamHubSubscribers.WithLabelValues(mode, "shared"),
				Private:  m.StreamHubSubscribers.WithLabelValues(mode, "private"),
				Attaches: m.StreamHubMoves.WithLabelValues(mode, "attach"),
				Detaches: m.StreamHubMoves.WithLabelValues(mode, "detach"),
				Rewinds:  m.StreamHubMoves.WithLabelValues(mode, "rewind"),
			}
		}
		return fanout.New(cfg)
	}
	return &streamHubs{relay: hub("relay", 0), source: hub("source", upstream.SilenceLimit),
		independent: os.Getenv(independentEnv) == "1"}
}

// opener is the stream named name's TaskConfig.Shared; nil when streams
// read independently.
func (h *streamHubs) opener(name string) func(relay bool, own, hub func() (binlog.StreamOpener, error)) binlog.StreamOpener {
	if h.independent {
		return nil
	}
	return func(relay bool, own, hub func() (binlog.StreamOpener, error)) binlog.StreamOpener {
		if relay {
			return h.relay.Opener(name, own, hub)
		}
		return h.source.Opener(name, own, hub)
	}
}

// close stops both hubs and waits for their readers.
func (h *streamHubs) close() {
	h.relay.Close()
	h.source.Close()
}

// streamPoolSize bounds the connections of the streams' pool to their
// source (the budget bounds them further): each stream's fill-history or
// incremental snapshot reads over one connection at a time, its schema
// and position queries over one more.
const streamPoolSize = 64

// lazySourceDB is a connection pool to the source opened at first use, so
// a source worker without streams never connects for them.
type lazySourceDB struct {
	src    *config.SourceConfig
	budget *dbconn.Budget // nil: a pool of its own

	mu sync.Mutex
	db *sql.DB // guarded by mu; nil until the first get
}

func (l *lazySourceDB) get() (*sql.DB, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.db != nil {
		return l.db, nil
	}
	ep, err := dbconn.NewEndpoint(l.src.From, dbconn.SourceRef(l.src.SourceID))
	if err != nil {
		return nil, err
	}
	db, err := l.budget.Open(ep, ep.DriverConfig(), "streams", streamPoolSize)
	if err != nil {
		return nil, fmt.Errorf("open a connection pool to source %q: %w", l.src.SourceID, err)
	}
	l.db = db
	return db, nil
}

func (l *lazySourceDB) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.db != nil {
		_ = l.db.Close()
		l.db = nil
	}
}

// measuredSink counts a stream's acknowledged events and batches and times
// its sink's acknowledgements.
type measuredSink struct {
	stream.Sink
	stream string
	m      *Metrics
}

// newMeasuredSink wraps inner: a stream.BufferedSink (the file sink) stays
// one, so that the task's group commit still sees it.
func newMeasuredSink(inner stream.Sink, name string, m *Metrics) stream.Sink {
	ms := &measuredSink{Sink: inner, stream: name, m: m}
	if bs, ok := inner.(stream.BufferedSink); ok {
		return &measuredBufferedSink{measuredSink: ms, inner: bs}
	}
	return ms
}

// measuredBufferedSink is a measuredSink of a stream.BufferedSink: a
// batch counts as acknowledged, and its latency ends, when SyncTo covered
// it.
type measuredBufferedSink struct {
	*measuredSink
	inner stream.BufferedSink

	mu      sync.Mutex
	pending []pendingBatch // written, not yet synced; guarded by mu
}

// pendingBatch is a batch WriteBuffered wrote.
type pendingBatch struct {
	mark   int64
	events int
	start  time.Time
}

// WriteBuffered is the sink's WriteBuffered, measured.
func (s *measuredBufferedSink) WriteBuffered(ctx context.Context, batch []stream.Event) (int64, error) {
	start := time.Now()
	mark, err := s.inner.WriteBuffered(ctx, batch)
	if err != nil {
		s.m.StreamBatches.WithLabelValues(s.stream, "error").Inc()
		return 0, err
	}
	s.mu.Lock()
	s.pending = append(s.pending, pendingBatch{mark: mark, events: len(batch), start: start})
	s.mu.Unlock()
	return mark, nil
}

// SyncTo is the sink's SyncTo, measured.
func (s *measuredBufferedSink) SyncTo(mark int64) error {
	if err := s.inner.SyncTo(mark); err != nil {
		s.m.StreamBatches.WithLabelValues(s.stream, "error").Inc()
		return err
	}
	s.mu.Lock()
	n := 0
	for n < len(s.pending) && s.pending[n].mark <= mark {
		n++
	}
	done := s.pending[:n:n]
	s.pending = s.pending[n:]
	s.mu.Unlock()
	for _, b := range done {
		s.m.StreamSinkLatency.WithLabelValues(s.stream).Observe(time.Since(b.start).Seconds())
		s.m.StreamBatches.WithLabelValues(s.stream, "ok").Inc()
		s.m.StreamEvents.WithLabelValues(s.stream).Add(float64(b.events))
	}
	return nil
}

// BatchLimits are the sink's.
func (s *measuredBufferedSink) BatchLimits() (events, bytes int) { return s.inner.BatchLimits() }

// Write is the sink's Write, measured.
func (s *measuredSink) Write(ctx context.Context, batch []stream.Event) error {
	start := time.Now()
	err := s.Sink.Write(ctx, batch)
	if err != nil {
		s.m.StreamBatches.WithLabelValues(s.stream, "error").Inc()
		return err
	}
	s.m.StreamSinkLatency.WithLabelValues(s.stream).Observe(time.Since(start).Seconds())
	s.m.StreamBatches.WithLabelValues(s.stream, "ok").Inc()
	s.m.StreamEvents.WithLabelValues(s.stream).Add(float64(len(batch)))
	return nil
}
