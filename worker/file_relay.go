package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/periodic"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/pkg/supervise"
	"github.com/dmworker/dm-worker/relay"
)

// RelayOptions configure the relays NewRelayFactory creates.
type RelayOptions struct {
	// Worker is the worker's name, used for the generated replica server id.
	Worker string
	// Metrics may be nil; the creator registers them.
	Metrics *relay.Metrics
	// Sources is the worker's budget of source connections (relay.Config);
	// nil: the relay's own pool.
	Sources *dbconn.Budget
	Clock   Clock
	// MasterStatusInterval is how often SHOW MASTER STATUS is refreshed
	// for status while the relay runs (default 5s).
	MasterStatusInterval time.Duration
	// Reconnect backoff and retries before the relay pauses with the error
	// (see relay.Config); zero values take the relay's defaults.
	BackoffMin, BackoffMax time.Duration
	MaxRetries             int
}

// NewRelayFactory returns a RelayFactory whose holders keep the relay in
// relayDir itself, as DESIGN.md lays it out: <relay-dir>/<upstream-id>.<suffix>/.
// A worker rebound to another source meets a different upstream id, which
// starts a new subdirectory.
func NewRelayFactory(relayDir string, opts RelayOptions) RelayFactory {
	if opts.Clock == nil {
		opts.Clock = RealClock{}
	}
	if opts.MasterStatusInterval <= 0 {
		opts.MasterStatusInterval = 5 * time.Second
	}
	return func(ctx context.Context, cfg *config.SourceConfig, logger *zap.Logger) (RelayHolder, error) {
		dir := relayDir
		r, err := relay.New(relay.Config{
			Dir: dir, Source: cfg, Worker: opts.Worker, Logger: logger, Metrics: opts.Metrics,
			BackoffMin: opts.BackoffMin, BackoffMax: opts.BackoffMax, MaxRetries: opts.MaxRetries,
			Now: opts.Clock.Now, Sources: opts.Sources,
		})
		if err != nil {
			return nil, fmt.Errorf("open relay of source %q in %s: %w", cfg.SourceID, dir, err)
		}
		h := &FileRelay{relay: r, cfg: cfg, opts: opts, log: logger.Named("relay-holder"),
			pull: supervise.NewWork(ctx), purger: supervise.NewWork(ctx)}
		h.lifecycle = newLifecycle(fmt.Sprintf("relay of source %q", cfg.SourceID), h.resume)
		return h, nil
	}
}

// FileRelay is the RelayHolder of a relay kept in local binlog files. Its
// stage, last error and explicit-pause mark are the shared lifecycle.
type FileRelay struct {
	lifecycle
	relay *relay.Relay
	cfg   *config.SourceConfig
	opts  RelayOptions
	log   *zap.Logger

	pull   *supervise.Work // the running pull
	purger *supervise.Work // the background purger, from Start to Close

	mu      sync.Mutex // guards the fields below
	master  string
	readers int
}

var _ RelayHolder = (*FileRelay)(nil)

// Name names the relay in the checker's logs.
func (h *FileRelay) Name() string { return "relay/" + h.cfg.SourceID }

// Kind labels the relay in auto-resume metrics.
func (h *FileRelay) Kind() string { return "relay" }

// Reader returns a new relay reader for one consumer; the sync unit and
// stream tasks read the relay through it.
func (h *FileRelay) Reader() binlog.StreamOpener {
	h.mu.Lock()
	h.readers++
	n := h.readers
	h.mu.Unlock()
	return h.relay.NewReader(fmt.Sprintf("reader-%d", n))
}

// NewReader returns a relay reader with a name shown when it blocks a purge.
func (h *FileRelay) NewReader(name string) *relay.Reader { return h.relay.NewReader(name) }

// AddPurgeBlocker adds a source of positions the purger must keep (paused
// or new subtasks that still need relay files).
func (h *FileRelay) AddPurgeBlocker(b relay.Blocker) { h.relay.AddBlocker(b) }

// Start starts pulling (New → Running) and the background purger. Like a
// subtask's Run, the relay keeps ctx's values but not its cancellation: it
// runs until Pause or Close, or until the context the holder was created
// with ends.
func (h *FileRelay) Start(ctx context.Context) error {
	h.ops.Lock()
	defer h.ops.Unlock()
	if err := h.start(); err != nil {
		return err
	}
	// Nothing ran before: the purger starts at once.
	if err := h.purger.Start(ctx, func(ctx context.Context) { h.relay.RunPurger(ctx, h.cfg.Purge) }); err != nil {
		return err
	}
	h.run(ctx)
	return nil
}

// run starts the pull of a Running or Resuming relay; ops is held. An
// error of the pull pauses the relay with it.
func (h *FileRelay) run(ctx context.Context) {
	h.log.Info("relay running")
	h.runWork(ctx, h.pull, h.opts.Clock, h.pullBinlog, func(err error) {
		if err != nil {
			h.log.Error("relay paused by an error", zap.Error(err), zap.Bool("resumable", errs.IsResumable(err)))
		}
	})
}

// pullBinlog pulls binlog into the relay and refreshes the master status
// beside it, until ctx is done or the pull fails.
func (h *FileRelay) pullBinlog(ctx context.Context) error {
	mctx, stopMaster := context.WithCancel(ctx)
	masterDone := make(chan struct{})
	go func() {
		defer close(masterDone)
		h.refreshMaster(mctx)
	}()
	err := h.relay.Run(ctx)
	stopMaster()
	<-masterDone
	return err
}

// refreshMaster refreshes SHOW MASTER STATUS until ctx is done.
func (h *FileRelay) refreshMaster(ctx context.Context) {
	periodic.Run(ctx, h.opts.MasterStatusInterval, periodic.Now, func(ctx context.Context) {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		loc, err := h.relay.MasterStatus(qctx)
		cancel()
		if err == nil {
			h.mu.Lock()
			h.master = loc.String()
			h.mu.Unlock()
		}
	})
}

// Pause stops pulling and keeps what was written; the checker never
// resumes an explicit pause.
func (h *FileRelay) Pause(ctx context.Context) error {
	h.ops.Lock()
	defer h.ops.Unlock()
	err := h.pauseWork(ctx, h.pull)
	h.log.Info("relay paused")
	return err
}

// resume is the relay's part of Resume and AutoResume; it runs under ops.
func (h *FileRelay) resume(ctx context.Context, auto bool) error {
	return h.restartWork(ctx, auto, h.pull, h.run)
}

// Close stops pulling and the purger, waits for both and releases the
// relay; the stage becomes Stopped.
func (h *FileRelay) Close() {
	h.ops.Lock()
	defer h.ops.Unlock()
	stopped := h.stopWork(h.pull, func() {
		_ = h.purger.Stop(context.Background(), h.what) // waits as long as the purger takes
		if err := h.relay.Close(); err != nil {
			h.log.Warn("close relay", zap.Error(err))
		}
	})
	if stopped {
		h.log.Info("relay stopped")
	}
}

// Kill is Close: the relay flushes only what it already wrote, which is
// as fast as stopping without it.
func (h *FileRelay) Kill() { h.Close() }

// Status is the relay object of the worker status.
func (h *FileRelay) Status() RelayStatus {
	written := h.relay.Written()
	pullErr := h.relay.Err()
	stg, errors := h.snapshot()
	h.mu.Lock()
	master := h.master
	h.mu.Unlock()
	st := RelayStatus{
		Enabled: true, Stage: stg, RelayBinlogGTID: written.GTID,
		MasterBinlog: master, RelayDir: h.relay.Dir(), Errors: errors,
	}
	if !written.IsZero() {
		st.RelayBinlog = written.String()
	}
	if len(errors) == 0 && pullErr != nil && stg == stage.Running {
		// Retrying a reconnect: shown while it lasts, not a failed run.
		st.Errors = append(st.Errors, errs.Entry(pullErr, h.opts.Clock.Now()))
	}
	return st
}

// Purge removes relay files (POST /api/v1/relay/purge).
func (h *FileRelay) Purge(ctx context.Context, req PurgeRequest) ([]string, error) {
	purged, err := h.relay.Purge(ctx, relay.PurgeRequest{Inactive: req.Inactive, Filename: req.Filename, Time: req.Time})
	var forbidden *relay.PurgeForbiddenError
	switch {
	case errors.As(err, &forbidden):
		return nil, &APIError{http.StatusConflict, CodePurgeForbidden, forbidden.Error()}
	case errors.Is(err, relay.ErrFileNotFound):
		return nil, &APIError{http.StatusBadRequest, CodeBadRequest, err.Error()}
	}
	return purged, err
}
