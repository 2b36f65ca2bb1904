package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	binlogupstream "github.com/dmworker/dm-worker/pkg/binlog/upstream"
	"github.com/dmworker/dm-worker/pkg/dbconn"
)

// Error codes of the relay.
const (
	CodeRelayPull         = "relay-pull"     // pulling from the source failed
	CodeRelayWrite        = "relay-write"    // writing relay files failed
	CodeRelayPosition     = "relay-position" // the source sent events that do not follow the relay's position
	CodeRelayUpstream     = "relay-upstream" // the upstream changed and the relay cannot continue
	CodePositionNotFound  = "relay-position-not-found"
	CodePositionPurged    = "relay-position-purged"
	CodeReaderClosed      = "relay-reader-closed"
	CodeRelayFileNotFound = "relay-file-not-found"
)

// Config configures a Relay.
type Config struct {
	// Dir is the relay directory of the source; the Relay owns it.
	Dir    string
	Source *config.SourceConfig
	// Worker is the worker's name; with the source id it makes the
	// replica server id when Source.ServerID is 0.
	Worker string
	Logger *zap.Logger
	// Metrics may be nil.
	Metrics *Metrics
	// BackoffMin and BackoffMax bound the delay between reconnects
	// (defaults 200ms and 5s); MaxRetries resumable failures in a row end
	// Run with the last error (default 10; negative retries forever).
	BackoffMin, BackoffMax time.Duration
	MaxRetries             int
	// SyncInterval is the least time between two fsyncs (with their meta
	// update) while data keeps arriving, so it bounds how long written
	// transactions stay without one (default 1s). Readers see whole
	// transactions at once, durable or not; after a power loss the relay
	// pulls again what was not durable (see Run).
	SyncInterval time.Duration
	// Now tells the time (default time.Now).
	Now func() time.Time
	// Sources is the worker's budget of source connections: the relay's
	// query pool (two connections at most: status, the flavor, KILL of
	// its dump) takes its connections there and the binlog dump counts
	// as the source's binlog reader; nil: a pool of its own.
	Sources *dbconn.Budget
}

func (c Config) withDefaults() Config {
	if c.BackoffMin <= 0 {
		c.BackoffMin = 200 * time.Millisecond
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = max(5*time.Second, c.BackoffMin)
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 10
	}
	if c.SyncInterval <= 0 {
		c.SyncInterval = time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Blocker reports a position some consumer outside the relay (a paused or
// new subtask) still needs; ok is false when it needs none now.
type Blocker func() (blocker string, loc binlog.Location, ok bool)

// Relay is the relay of one source: one writer (Run) at a time, any number
// of Readers, and the purger.
type Relay struct {
	cfg     Config
	log     *zap.Logger
	db      *sql.DB
	ep      *dbconn.Endpoint // how db and the binlog dump reach the source
	source  string
	running sync.Mutex // held by Run
	// pendingPeak is the most bytes the writer ever held unwritten: bounded
	// by about flushSize plus one event, whatever the transactions' size.
	pendingPeak atomic.Int64
	// syncHook, when set (by tests, before Run), sees every sync point
	// made durable, and whether its meta was written.
	syncHook func(p syncPoint, metaWritten bool)

	mu sync.Mutex // guards the fields below
	// active is the file the writer appends to and its size; readers read
	// it up to size only.
	active activeFile
	// wake is closed and replaced whenever active or written changes.
	wake     chan struct{}
	written  binlog.Location
	lastErr  error
	lastTS   uint32 // timestamp of the last event written
	master   binlog.Location
	readers  map[*stream]readerPos
	blockers []Blocker
	closed   bool
}

// activeFile is the writer's current file.
type activeFile struct {
	sub, name string
	size      int64
}

// readerPos is where a registered reader stands.
type readerPos struct {
	reader string
	file   relayFile
}

// New opens the relay directory, recovers its last file (see Run) and
// returns the relay. It does not connect to the source.
func New(cfg Config) (*Relay, error) {
	cfg = cfg.withDefaults()
	if cfg.Source == nil {
		return nil, errors.New("relay: no source config")
	}
	if err := os.MkdirAll(cfg.Dir, dirMode); err != nil {
		return nil, fmt.Errorf("relay: create relay directory: %w", err)
	}
	rec, err := recoverDir(cfg.Dir, cfg.Source.Flavor != config.FlavorMySQL)
	if err != nil {
		return nil, err
	}
	ep, db, err := openDB(cfg.Source, cfg.Sources)
	if err != nil {
		return nil, err
	}
	r := &Relay{
		cfg: cfg,
		// The caller's logger already names the source.
		log:     cfg.Logger.Named("relay"),
		db:      db,
		ep:      ep,
		source:  cfg.Source.SourceID,
		wake:    make(chan struct{}),
		readers: make(map[*stream]readerPos),
	}
	r.publishRecovered(rec)
	return r, nil
}

func (r *Relay) publishRecovered(rec recovered) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec.file != "" {
		r.active = activeFile{sub: rec.sub.Name, name: rec.file, size: rec.scan.end}
		r.written = binlog.Location{Name: rec.resume.Name, Pos: rec.resume.Pos, GTID: rec.gtid.String()}
	}
	r.broadcast()
}

// broadcast wakes every waiting reader; r.mu is held.
func (r *Relay) broadcast() {
	close(r.wake)
	r.wake = make(chan struct{})
}

// Notify returns a channel closed at the next change of the relay: a
// transaction written, a new file, an error.
func (r *Relay) Notify() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wake
}

// Dir is the relay directory.
func (r *Relay) Dir() string { return r.cfg.Dir }

// Written is the source location of the last transaction boundary written,
// with the GTID set executed up to it.
func (r *Relay) Written() binlog.Location {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.written
}

// Err is the error the writer is retrying after, nil while it pulls fine.
func (r *Relay) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

func (r *Relay) setErr(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastErr = err
	r.broadcast()
}

// MasterStatus queries SHOW MASTER STATUS, remembers it and updates the lag
// metrics.
func (r *Relay) MasterStatus(ctx context.Context) (binlog.Location, error) {
	loc, err := binlogupstream.MasterStatus(ctx, r.db)
	if err != nil {
		return loc, fmt.Errorf("relay: %w", err)
	}
	r.mu.Lock()
	r.master = loc
	written, ts := r.written, r.lastTS
	r.mu.Unlock()
	if m := r.cfg.Metrics; m != nil {
		lagBytes, lagSec := 0.0, 0.0
		if loc.Compare(binlog.Location{Name: written.Name, Pos: written.Pos}) > 0 {
			if loc.Name == written.Name {
				lagBytes = float64(loc.Pos - written.Pos)
			} else {
				lagBytes = float64(loc.Pos)
			}
			if ts != 0 {
				lagSec = max(0, r.cfg.Now().Sub(time.Unix(int64(ts), 0)).Seconds())
			}
		}
		m.LagBytes.WithLabelValues(r.source).Set(lagBytes)
		m.LagSeconds.WithLabelValues(r.source).Set(lagSec)
	}
	return loc, nil
}

// Close releases the relay's connection pool and wakes readers, which then
// fail with CodeReaderClosed. Run must have returned.
func (r *Relay) Close() error {
	r.mu.Lock()
	r.closed = true
	r.broadcast()
	r.mu.Unlock()
	if err := r.db.Close(); err != nil {
		return fmt.Errorf("relay: close source pool: %w", err)
	}
	return nil
}
