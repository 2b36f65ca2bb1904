package relay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/backoff"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
)

// Run pulls the source's binlog into the relay until ctx is done (then it
// returns nil after flushing) or a failure that retrying cannot fix.
//
// Every (re)start first recovers the relay directory: the files from the
// meta's on are checked (see the package doc), the last file left is
// truncated to the end of its last complete transaction and the meta is
// reconciled with it, so pulling resumes right after the last complete
// transaction, with no gap and no duplicate. Pulling starts, in
// order of preference, from there; from the meta's GTID set when the
// subdirectory has no file yet or the upstream server changed (a new
// subdirectory); from relay-binlog-gtid or relay-binlog-name; from the
// oldest binlog of the source.
//
// A resumable failure (lost connection, source restarting) is retried after
// a pkg/backoff delay from BackoffMin to BackoffMax (reset once a connection
// wrote events) while Err reports it; after MaxRetries failures in a row Run
// returns the last one. Only one Run may be active at a time.
func (r *Relay) Run(ctx context.Context) error {
	if !r.running.TryLock() {
		return errors.New("relay: Run is already active for this relay")
	}
	defer r.running.Unlock()
	bo := backoff.New(r.cfg.BackoffMin, r.cfg.BackoffMax)
	failures := 0
	for {
		progressed, err := r.runOnce(ctx)
		if ctx.Err() != nil {
			r.setErr(nil)
			return nil
		}
		if progressed {
			failures = 0
			bo.Reset()
		}
		if !errs.IsResumable(err) {
			r.setErr(err)
			return err
		}
		// A source refusing connections for lack of them is back-pressure:
		// the relay waits with backoff and does not give up.
		if !dbconn.IsTooManyConnections(err) {
			failures++
		}
		r.setErr(err)
		if m := r.cfg.Metrics; m != nil {
			m.Reconnects.WithLabelValues(r.source).Inc()
		}
		if r.cfg.MaxRetries > 0 && failures >= r.cfg.MaxRetries {
			return fmt.Errorf("relay: giving up after %d failures in a row: %w", failures, err)
		}
		delay := bo.Next()
		r.log.Warn("relay interrupted; reconnecting", zap.Duration("backoff", delay), zap.Error(err))
		if !backoff.Sleep(ctx, backoff.RealClock{}, delay) {
			r.setErr(nil)
			return nil
		}
	}
}

// writer is the state of one connection's pulling; owned by Run.
//
// Until the dump starts, runOnce is its only user. Once it has started,
// the pump goroutine appends events (handleEvent, passThrough) while
// runOnce publishes, takes sync points and watches for a dead source on a
// ticker (tick); mu serialises the two. The syncer goroutine makes the sync
// points durable, in order, without mu (syncQueue).
type writer struct {
	r       *Relay
	root    string
	mariadb bool

	mu   sync.Mutex // guards the fields below
	subs []subdir
	sub  subdir

	file       *os.File
	fileName   string
	offset     int64 // bytes of whole transactions in file (what readers may read)
	spilled    int64 // bytes of the open transaction written after offset (see spill)
	delta      int64 // source position = offset + delta
	deltaKnown bool
	headerEnd  int64 // offset after the magic and the format description event
	hasGroup   bool  // a whole event group is in the file (or pending for it)
	checksum   bool
	nextName   string // file announced by a rotate event, created at its format description event

	tracker txnTracker
	// pending holds events not yet written: pending[:complete] end whole
	// transactions, the rest is the open one. Whole transactions are
	// written (flushPending) at flushSize or on the next tick; an open
	// transaction is written ahead (spill) once flushSize of it is pending.
	pending        []byte
	complete       int
	completeEvents int    // events in pending[:complete]
	completeTS     uint32 // timestamp of the last transaction boundary in pending
	gtid           *gtidSet
	dirty          bool // written since the last sync point
	lastSync       time.Time
	syncSeq        uint64     // sync points taken
	newFile        bool       // the file was created since the last sync point
	q              *syncQueue // sync points waiting for the disk, in order

	events     int    // events appended by this connection
	unreported int    // events appended but not yet counted in metrics
	seen       uint64 // events received, heartbeats included
	seenAtTick uint64 // seen at the last tick
	alive      time.Time
	failed     error // the first error of handleEvent or tick; the stream is dead

	// metaSeq is the sync point whose meta was written last; guarded by
	// q.exec.
	metaSeq uint64
}

// runOnce recovers, connects and pulls until an error. progressed reports
// whether any event was written.
func (r *Relay) runOnce(ctx context.Context) (progressed bool, err error) {
	up, rec, err := r.recoverFor(ctx)
	if err != nil {
		return false, err
	}
	w := r.newWriter(up.mariadb, rec)
	defer w.closeFile()

	dl := &binlog.DeadlineDialer{Timeout: deadAfter}
	p := r.dumpParams(up.mariadb, dl)
	d, err := dialDump(ctx, p)
	if err != nil {
		return false, r.dumpError(r.ep.ConnectError(err))
	}
	defer r.cfg.Sources.BinlogReader(r.ep.Addr())()
	defer func() { _ = d.close() }()
	if err := w.startDump(ctx, d, p, rec, up.uuid); err != nil {
		return false, err
	}
	// The handshake and the dump command are done: from now on the
	// ticker's watchdog detects a dead source, not a read deadline.
	if err := dl.Clear(); err != nil {
		return false, r.dumpError(err)
	}
	r.setErr(nil)
	return w.stream(ctx, d)
}

// recoverFor asks the source what upstream server it is, then recovers the
// relay directory (see Run) and publishes what it holds to readers.
func (r *Relay) recoverFor(ctx context.Context) (_ upstream, _ recovered, err error) {
	src := r.cfg.Source
	flavor := src.Flavor
	if r.cfg.Sources != nil {
		// Learned once for the worker's every reader of the source.
		if flavor, err = r.cfg.Sources.Flavor(ctx, r.ep, flavor); err != nil {
			return upstream{}, recovered{}, errs.Wrap(err, CodeRelayPull, "relay of source %q: connect to %s:%d", r.source, src.From.Host, src.From.Port)
		}
	}
	up, err := detectUpstream(ctx, r.db, flavor)
	if err != nil {
		return up, recovered{}, errs.Wrap(err, CodeRelayPull, "relay of source %q: connect to %s:%d", r.source, src.From.Host, src.From.Port)
	}
	rec, err := recoverDir(r.cfg.Dir, up.mariadb)
	if err != nil {
		return up, rec, errs.New(CodeRelayWrite, false, "relay of source %q: recover %s: %w", r.source, r.cfg.Dir, err)
	}
	r.publishRecovered(rec)
	return up, rec, nil
}

// newWriter is the writer of one connection, continuing the recovered
// directory with its GTID set (an empty one of the flavor when it has none).
func (r *Relay) newWriter(mariadb bool, rec recovered) *writer {
	now := time.Now()
	w := &writer{r: r, root: r.cfg.Dir, subs: rec.subs, sub: rec.sub, mariadb: mariadb, gtid: rec.gtid, lastSync: now, alive: now,
		q: newSyncQueue()}
	if w.gtid == nil {
		w.gtid = newGTIDSet(mariadb)
	}
	return w
}

// dumpParams are the binlog dump parameters of one connection, dialed
// through dl.
func (r *Relay) dumpParams(mariadb bool, dl *binlog.DeadlineDialer) dumpParams {
	src := r.cfg.Source
	p := dumpParams{
		addr:     net.JoinHostPort(src.From.Host, strconv.Itoa(src.From.Port)),
		user:     src.From.User,
		password: src.From.Password,
		tls:      r.ep.TLS,
		// No read deadline per packet: dl bounds the handshake, the
		// ticker's watchdog the dump.
		dial:      dl.Dial,
		serverID:  ServerID(src.ServerID, r.cfg.Worker, src.SourceID),
		port:      uint16(src.From.Port),
		mariadb:   mariadb,
		heartbeat: heartbeatPeriod,
	}
	if mariadb {
		p.flags = replication.BINLOG_SEND_ANNOTATE_ROWS_EVENT
	}
	return p
}

// startDump starts the binlog dump where the recovered directory rec ends,
// in Run's order of preference, on the upstream server uuid: a new
// subdirectory from the GTID set when the upstream changed; the last file
// from its end; the subdirectory's GTID set; the configured or oldest
// position in a new subdirectory.
func (w *writer) startDump(ctx context.Context, d *dumpConn, p dumpParams, rec recovered, uuid string) error {
	var err error
	switch {
	case rec.sub.Name != "" && rec.sub.UUID != uuid:
		if err := w.changeUpstream(rec.sub.UUID, uuid); err != nil {
			return err
		}
		err = w.startGTID(d, p, w.gtid)
	case rec.file != "":
		w.fileName = rec.file
		if err := w.openAppend(rec); err != nil {
			return err
		}
		w.r.log.Info("relay resuming", zap.Stringer("from", rec.resume), zap.String("gtid", w.gtid.String()))
		err = d.dumpFrom(p, rec.resume.Name, rec.resume.Pos)
	case rec.sub.Name != "" && !w.gtid.empty():
		err = w.startGTID(d, p, w.gtid)
	default:
		if rec.sub.Name == "" {
			if err := w.newSubdir(uuid); err != nil {
				return err
			}
		}
		err = w.startFromConfig(ctx, d, p)
	}
	if err != nil {
		return w.r.dumpError(w.r.ep.ConnectError(err))
	}
	return nil
}

// changeUpstream starts a new subdirectory for the upstream server to, which
// replaced from: positions mean nothing there, so the relay continues from
// its GTID set, and cannot without one.
func (w *writer) changeUpstream(from, to string) error {
	if w.gtid.empty() {
		return errs.New(CodeRelayUpstream, false,
			"relay of source %q: the upstream server changed from %s to %s and the relay has no GTID set to continue from; "+
				"set relay-binlog-gtid or relay-binlog-name and move the relay directory %s away", w.r.source, from, to, w.r.cfg.Dir)
	}
	w.r.log.Info("upstream server changed; starting a new relay subdirectory",
		zap.String("from", from), zap.String("to", to), zap.String("gtid", w.gtid.String()))
	return w.newSubdir(to)
}

// dumpError is pullError for a failure to start the binlog dump.
func (r *Relay) dumpError(err error) error {
	src := r.cfg.Source
	return pullError(err, "relay of source %q: start binlog dump from %s:%d", r.source, src.From.Host, src.From.Port)
}

func (w *writer) startGTID(d *dumpConn, p dumpParams, set *gtidSet) error {
	gs, err := set.goMySQL()
	if err != nil {
		return err
	}
	w.r.log.Info("relay starting from GTID set", zap.String("gtid", set.String()), zap.String("subdir", w.sub.Name))
	return d.dumpGTID(p, gs)
}

func (w *writer) startFromConfig(ctx context.Context, d *dumpConn, p dumpParams) error {
	src := w.r.cfg.Source
	if src.RelayBinlogGTID != "" {
		set, err := parseGTIDSet(w.mariadb, src.RelayBinlogGTID)
		if err != nil {
			return errs.New(CodeRelayPull, false, "relay of source %q: relay-binlog-gtid: %w", w.r.source, err)
		}
		w.gtid = set
		return w.startGTID(d, p, set)
	}
	name := src.RelayBinlogName
	if name == "" {
		var err error
		if name, err = oldestBinlog(ctx, w.r.db); err != nil {
			return err
		}
	}
	w.r.log.Info("relay starting from binlog file", zap.String("file", name), zap.String("subdir", w.sub.Name))
	return d.dumpFrom(p, name, magicSize)
}

func (w *writer) newSubdir(uuid string) error {
	sd, err := addSubdir(w.root, w.subs, uuid)
	if err != nil {
		return errs.New(CodeRelayWrite, false, "relay of source %q: %w", w.r.source, err)
	}
	w.subs = append(w.subs, sd)
	w.sub = sd
	w.closeFile()
	w.fileName = ""
	return nil
}

func (w *writer) dir() string { return filepath.Join(w.root, w.sub.Name) }

func (w *writer) openAppend(rec recovered) error {
	f, err := os.OpenFile(filepath.Join(w.dir(), rec.file), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return errs.New(CodeRelayWrite, false, "relay of source %q: open %s: %w", w.r.source, rec.file, err)
	}
	w.file = f
	w.offset, w.spilled = rec.scan.end, 0
	w.delta, w.deltaKnown = rec.scan.delta, true
	w.checksum = rec.scan.checksum
	w.tracker = txnTracker{checksum: w.checksum}
	return nil
}

func (w *writer) closeFile() {
	if w.file != nil {
		_ = w.file.Close()
		w.file = nil
	}
}

// sync writes the whole transactions of pending, queues a sync point of
// the file and waits until it and every point before it are durable (see
// syncQueue). The open transaction, if any, is not part of it. w.mu is
// held throughout; the syncer runs the points of ticks and rotations
// without it.
func (w *writer) sync() error {
	if w.file != nil {
		w.dirty = true
		if err := w.queueSync(false); err != nil {
			return err
		}
	}
	return w.q.run(w.finishSync)
}

// queueSync writes the whole transactions of pending and, when anything
// was written since the last sync point, queues a new one for the syncer;
// last makes it the file's final point. w.mu is held.
func (w *writer) queueSync(last bool) error {
	p, err := w.prepareSync()
	if err != nil || p == nil {
		return err
	}
	p.last = last
	w.q.push(p)
	return nil
}

// rotateOut ends the current file at a rotation to next: its final sync
// point is queued, and the syncer closes the file after its fsync, while
// the next file is created and written. Only when maxClosingFiles files
// (or maxClosingBytes) already wait for the disk does it wait for them.
// w.mu is held.
func (w *writer) rotateOut(next string) error {
	if w.file != nil {
		w.dirty = true
		if err := w.queueSync(true); err != nil {
			return err
		}
		w.file = nil
	}
	w.nextName = next
	if w.q.tooManyClosing() {
		return w.q.run(w.finishSync)
	}
	return nil
}

// prepareSync writes the whole transactions of pending and, when anything
// was written since the last sync point, takes a new one; w.mu is held.
func (w *writer) prepareSync() (*syncPoint, error) {
	if w.file == nil {
		return nil, nil
	}
	if err := w.flushPending(); err != nil {
		return nil, err
	}
	if !w.dirty {
		return nil, nil
	}
	m := Meta{BinlogName: w.fileName, BinlogPos: magicSize, BinlogGTID: w.gtid.String()}
	if w.deltaKnown {
		m.BinlogPos = uint32(w.offset + w.delta)
	}
	w.syncSeq++
	w.dirty = false
	w.lastSync = time.Now()
	p := &syncPoint{file: w.file, name: w.fileName, dir: w.dir(), meta: m, seq: w.syncSeq, syncDir: w.newFile, size: int64(w.offset)}
	w.newFile = false
	return p, nil
}

// pullError classifies a failure of the binlog dump. An error the server
// answered with is resumable when errs says so (1236, a position the
// source does not have, is not); anything else - a lost, reset or bad
// connection, a read timeout - is resumable.
func pullError(err error, format string, args ...any) error {
	var coded *errs.Coded
	if errors.As(err, &coded) {
		return err
	}
	var myErr *mysql.MyError
	resumable := !errors.As(err, &myErr) || errs.IsResumable(err)
	if errors.Is(err, context.Canceled) {
		resumable = false
	}
	return errs.New(CodeRelayPull, resumable, format+": %w", append(args, err)...)
}
