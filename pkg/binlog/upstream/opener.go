// Package upstream reads a source's binlog straight from the source over a
// replication connection of its own: the binlog.StreamOpener that the sync
// unit and stream tasks use when relay does not run for the source, the
// replica server id such a connection announces, and the source's current
// binlog position (MasterStatus, read through the caller's SQL connection).
//
// It owns the replication connection it opens and nothing else: no files,
// no checkpoints, no SQL connections.
package upstream

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/backoff"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/dbconn"
)

// serverIDBase is the start of the range generated replica server ids fall
// in, far above ids people assign by hand.
const serverIDBase = 1 << 30

// ServerID derives a stable replica server id from the name of the reader
// (a task, or "stream/<name>" for a stream task) and the source's name, in
// [2^30, 2^31).
func ServerID(name, source string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name + "\x00" + source))
	return serverIDBase + h.Sum32()%serverIDBase
}

// The source sends a heartbeat every Heartbeat when it has no event; a
// stream from the source that is silent for SilenceLimit is taken for dead
// (readers enforce it: the Opener sets no read deadline).
const (
	Heartbeat    = 5 * time.Second
	SilenceLimit = 3 * Heartbeat
)

// EventCache is how many parsed events go-mysql's BinlogSyncer may hold
// between its reading goroutine and the consumer (its EventCacheCount,
// 10,240 by default). A parsed row event costs about three times its size
// (row images as Go values beside the packet), so with the default a
// consumer slower than the network (every sync unit applying a large
// transaction) held ~10,000 events of up to 8 KiB each: 330-530 MiB of
// RSS for the sync unit alone. A few dozen events keep the parser and the
// consumer overlapping; memory is then bounded by EventCache times the
// largest event.
const EventCache = 64

// Opener reads binlog straight from the source over a replication
// connection of its own; it is the binlog.StreamOpener used when relay does
// not run for the source. Open and Close may be called from different
// goroutines.
type Opener struct {
	cfg     replication.BinlogSyncerConfig
	ep      *dbconn.Endpoint
	useGTID bool
	readers *dbconn.Budget // counts the open dump (BinlogReader); nil: no one

	mu     sync.Mutex
	syncer *replication.BinlogSyncer // the open stream's; nil when closed
	done   func()                    // ends the open stream's count
}

var _ binlog.StreamOpener = (*Opener)(nil)

// NewOpener returns an Opener for the source src, reached through ep (its
// TLS settings and error descriptions), announcing itself as replica
// serverID. flavor is the source's (mysql.MariaDBFlavor or
// mysql.MySQLFlavor); src.From.Password must be resolved already. The
// open dump counts as a binlog reader of the source in readers, the
// worker's budget of source connections (nil: not counted).
func NewOpener(src *config.SourceConfig, ep *dbconn.Endpoint, flavor string, serverID uint32, readers *dbconn.Budget) *Opener {
	o := &Opener{
		ep:      ep,
		useGTID: src.EnableGTID,
		readers: readers,
		cfg: replication.BinlogSyncerConfig{
			ServerID:        serverID,
			Flavor:          flavor,
			Host:            src.From.Host,
			Port:            uint16(src.From.Port),
			User:            src.From.User,
			Password:        src.From.Password,
			TLSConfig:       ep.TLS,
			HeartbeatPeriod: Heartbeat,
			EventCacheCount: EventCache,
			// No ReadTimeout: go-mysql would set a read deadline before
			// every packet. A DeadlineDialer bounds the handshake, the read
			// loop's silence limit the dump.
			// A lost connection ends the stream with an error, so the reader
			// fails with a resumable error and restarts from its checkpoint.
			DisableRetrySync: true,
			Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		},
	}
	binlog.Decoding(&o.cfg)
	return o
}

// Open starts a binlog dump at loc: at loc.GTID when the source uses GTID
// (enable-gtid) or no file is known, else at loc.Name/loc.Pos. A stream
// opened before is closed first. A source that refuses the connection for
// lack of connections ("Too many connections") is asked again with
// backoff (100ms doubling to 5s) for up to dbconn.DefaultMaxConnWait
// before its error is returned: back-pressure, not a failed reader.
func (o *Opener) Open(ctx context.Context, loc binlog.Location) (binlog.Streamer, error) {
	o.Close()
	bo := backoff.New(100*time.Millisecond, 5*time.Second)
	began := time.Now()
	for {
		st, err := o.open(ctx, loc)
		if err == nil || !dbconn.IsTooManyConnections(err) || time.Since(began) >= dbconn.DefaultMaxConnWait {
			return st, err
		}
		if !backoff.Sleep(ctx, backoff.RealClock{}, bo.Next()) {
			return nil, ctx.Err()
		}
	}
}

// open is one attempt of Open.
func (o *Opener) open(ctx context.Context, loc binlog.Location) (binlog.Streamer, error) {
	dl := &binlog.DeadlineDialer{Timeout: SilenceLimit}
	cfg := o.cfg
	cfg.Dialer = dl.Dial
	s := replication.NewBinlogSyncer(cfg)
	var (
		st  *replication.BinlogStreamer
		err error
	)
	if loc.GTID != "" && (o.useGTID || loc.Name == "") {
		var set mysql.GTIDSet
		set, err = mysql.ParseGTIDSet(o.cfg.Flavor, loc.GTID)
		if err == nil {
			st, err = s.StartSyncGTID(set)
		}
	} else {
		st, err = s.StartSync(mysql.Position{Name: loc.Name, Pos: loc.Pos})
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("start binlog dump from %s:%d at %s (gtid %q): %w",
			o.cfg.Host, o.cfg.Port, loc, loc.GTID, o.ep.ConnectError(err))
	}
	if err := ctx.Err(); err != nil {
		s.Close()
		return nil, err
	}
	if err := dl.Clear(); err != nil {
		s.Close()
		return nil, fmt.Errorf("binlog dump from %s:%d: %w", o.cfg.Host, o.cfg.Port, err)
	}
	o.mu.Lock()
	o.syncer, o.done = s, o.readers.BinlogReader(o.ep.Addr())
	o.mu.Unlock()
	return st, nil
}

// Close ends the open stream, if any.
func (o *Opener) Close() {
	o.mu.Lock()
	s, done := o.syncer, o.done
	o.syncer, o.done = nil, nil
	o.mu.Unlock()
	if s != nil {
		s.Close()
		done()
	}
}
