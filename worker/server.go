package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/pkg/backoff"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/secret"
	"github.com/dmworker/dm-worker/pkg/workqueue"
	"github.com/dmworker/dm-worker/stream"
	"github.com/dmworker/dm-worker/worker/scheduler"
)

// ServerConfig is what a Server is built from.
type ServerConfig struct {
	// Name is the worker name; Addr the status address others reach it at.
	Name string
	Addr string
	// Client is an etcd client the Server uses but does not close.
	Client       *clientv3.Client
	Prefix       string
	KeepaliveTTL time.Duration
	// NewFactory builds the unit factory of each bound source.
	NewFactory FactoryBuilder
	NewRelay   RelayFactory
	// NewStreams builds the stream runtime of each bound source; nil: the
	// worker does not run stream tasks (their keys are not watched).
	NewStreams StreamRuntimeBuilder
	// StreamMeta is the worker's stream meta store, opened by the caller
	// (OpenStreamMeta); StreamMetaErr says why it could not be, for the
	// status of every stream. The Server does not close it.
	StreamMeta    *stream.Meta
	StreamMetaErr error
	// SecretKey is the --secret-key-path key (nil: none): source and
	// subtask passwords that are ciphertexts are decrypted with it before
	// connecting (DESIGN.md §4a).
	SecretKey *secret.Key
	// Budget is the worker's budget of connections to each target server,
	// the one NewFactory's units use (UnitOptions.Budget); status shows
	// each subtask's share. nil: none.
	Budget *dbconn.Budget
	// Sources is the worker's budget of connections to each source (the
	// one the units, relay and streams use); status shows the bound
	// source's connections. nil: none shown.
	Sources *dbconn.Budget
	Metrics *Metrics
	// Logger is passed down to everything; it should name the worker.
	Logger *zap.Logger
	Clock  Clock
	// StatusInterval is how often P/status/{worker} is refreshed (default 5s,
	// at most 10s by contract).
	StatusInterval time.Duration
	// CheckInterval and the watch backoffs are passed to SourceWorkers.
	CheckInterval                    time.Duration
	WatchBackoffMin, WatchBackoffMax time.Duration
	// Scheduler: the worker takes part in the scheduler's election
	// (--scheduler); SchedulerMetrics records its decisions (nil: none).
	Scheduler        bool
	SchedulerMetrics *scheduler.Metrics
}

// Server is the worker process's control plane: it registers the worker in
// etcd, keeps its keepalive lease, follows the worker's bound and relay
// keys and runs the SourceWorker of the bound source. On lease loss it
// kills the source's data plane at once, registers again and reconciles
// from a fresh snapshot.
type Server struct {
	cfg   ServerConfig
	store *ha.Store
	log   *zap.Logger

	mu sync.Mutex // guards the fields below
	sw *SourceWorker
	// swCfg is the source config sw was built with.
	swCfg     *config.SourceConfig
	relayOn   bool
	serverErr *TaskError
	// serverWarn is the config warning of the bound source's value
	// (config-unknown-field), nil when there is none.
	serverWarn *TaskError
	keepalive  *ha.Keepalive
	scheduler  *scheduler.Scheduler // this registration's; nil without --scheduler
	// runCtx is the context data-plane work of the current registration
	// runs under; cancelled on lease loss.
	runCtx context.Context
	// sealStop is set by sealSourceWorker when serve ends a registration:
	// a source worker the bound reconciler builds meanwhile is stopped
	// with it instead of kept. nil while a registration runs.
	sealStop func(*SourceWorker)
}

// kindBound is the queue-key kind of the Server's one Reconciler: the
// worker's bound source.
const kindBound = "bound"

// reconcileFunc is a Reconciler made of a function.
type reconcileFunc func(ctx context.Context, name string) error

// Reconcile calls f.
func (f reconcileFunc) Reconcile(ctx context.Context, name string) error { return f(ctx, name) }

// NewServer builds a Server; Run starts it.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.StatusInterval <= 0 || cfg.StatusInterval > 10*time.Second {
		cfg.StatusInterval = 5 * time.Second
	}
	if cfg.KeepaliveTTL <= 0 {
		cfg.KeepaliveTTL = 10 * time.Second
	}
	return &Server{
		cfg:   cfg,
		store: ha.NewStore(cfg.Client, cfg.Prefix),
		log:   cfg.Logger, // the caller's logger names the worker
	}
}

// Store is the typed etcd contract the server uses.
func (s *Server) Store() *ha.Store { return s.store }

// Run registers the worker and serves until ctx is cancelled; then it shuts
// down gracefully: stops watching, closes subtasks (checkpoints flushed) and
// revokes the lease. It returns nil after a clean shutdown, or the error
// that kept the worker from registering the first time.
func (s *Server) Run(ctx context.Context) error {
	if _, err := s.store.PutWorkerInfo(ctx, ha.WorkerInfo{Name: s.cfg.Name, Addr: s.cfg.Addr}); err != nil {
		return fmt.Errorf("register worker %q in etcd: %w", s.cfg.Name, err)
	}
	ka, err := s.store.StartKeepalive(ctx, s.cfg.Name, s.cfg.KeepaliveTTL, s.log)
	if err != nil {
		return fmt.Errorf("start keepalive of worker %q: %w", s.cfg.Name, err)
	}
	s.log.Info("worker registered", zap.String("addr", s.cfg.Addr), zap.Duration("keepalive-ttl", s.cfg.KeepaliveTTL))

	for {
		lost := s.serve(ctx, ka)
		if !lost {
			return nil
		}
		// Lease lost: the data plane was killed in serve. Register again
		// and start over from a fresh snapshot.
		ka = s.reregister(ctx)
		if ka == nil {
			return nil // ctx done while re-registering
		}
	}
}

// serve runs one registration: watches, status publishing and the bound
// reconciler, until ctx is done (returns false, after a graceful stop) or
// the lease is lost (returns true, after killing the data plane).
func (s *Server) serve(ctx context.Context, ka *ha.Keepalive) (lost bool) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	s.keepalive = ka
	s.runCtx = runCtx
	s.sealStop = nil
	s.mu.Unlock()
	// One key, "bound/", reconciled by one goroutine: any change of the
	// bound key, the relay key or a source config leads to one reconcile of
	// the bound source (a config that did not change is a no-op there).
	queue := workqueue.New(100*time.Millisecond, 5*time.Second)
	w := watcher{client: s.cfg.Client, queue: queue, metrics: s.cfg.Metrics, log: s.log,
		backoffMin: s.cfg.WatchBackoffMin, backoffMax: s.cfg.WatchBackoffMax}
	bound := queueKey(kindBound, "")
	toBound := func(string) (string, bool) { return bound, true }
	extra := func() []string { return []string{bound} }
	keys := s.store.Keys()
	watches := startWatchSet(runCtx, w,
		watchSpec{kind: "bound", prefix: keys.Bound(s.cfg.Name), exact: true, keyOf: toBound, extra: extra},
		watchSpec{kind: "relay-bound", prefix: keys.RelayBound(s.cfg.Name), exact: true, keyOf: toBound, extra: extra},
		watchSpec{kind: "source-config", prefix: keys.SourceConfigPrefix(), keyOf: toBound, extra: extra})
	var wg sync.WaitGroup
	runner := &reconcileRunner{queue: queue, metrics: s.cfg.Metrics, log: s.log,
		byKind: map[string]Reconciler{kindBound: reconcileFunc(s.reconcileBound)}}
	runner.start(runCtx, &wg, 1)
	s.startScheduler(runCtx, &wg, ka)
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.publishStatus(runCtx)
	}()

	select {
	case <-ctx.Done():
		s.log.Info("shutting down")
		queue.ShutDown()
		cancel()
		wg.Wait()
		watches.stop()
		s.sealSourceWorker((*SourceWorker).Close)
		// The caller's ctx is done; revoking needs a short life of its own.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer rcancel()
		if err := ka.Close(rctx); err != nil {
			s.log.Warn("revoke keepalive lease", zap.Error(err))
		}
		return false
	case <-ka.Lost():
		s.log.Error("keepalive lease lost: stopping the source's data plane at once; another worker may take the source")
		// Kill first, then stop the reconciler; a source worker it builds
		// meanwhile is killed as it is installed (the seal).
		s.sealSourceWorker((*SourceWorker).Kill)
		queue.ShutDown()
		cancel()
		wg.Wait()
		watches.stop()
		// The old lease is gone; Close only stops the keepalive goroutine.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer rcancel()
		_ = ka.Close(rctx)
		return true
	}
}

// reregister grants a new lease and puts the worker info again, retrying
// with backoff until it works or ctx is done (then nil).
func (s *Server) reregister(ctx context.Context) *ha.Keepalive {
	bo := backoff.New(100*time.Millisecond, 5*time.Second)
	for {
		ka, err := s.store.StartKeepalive(ctx, s.cfg.Name, s.cfg.KeepaliveTTL, s.log)
		if err == nil {
			if _, err = s.store.PutWorkerInfo(ctx, ha.WorkerInfo{Name: s.cfg.Name, Addr: s.cfg.Addr}); err == nil {
				s.log.Info("worker registered again with a new lease")
				return ka
			}
			_ = ka.Close(ctx)
		}
		s.log.Warn("re-register failed; retrying", zap.Error(err), zap.Duration("backoff", bo.Step()))
		if _, ok := bo.Wait(ctx); !ok {
			return nil
		}
	}
}

// SourceWorker returns the running source worker, or nil when unbound.
func (s *Server) SourceWorker() *SourceWorker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sw
}
