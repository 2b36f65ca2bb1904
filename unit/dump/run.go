package dump

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// tableState is one selected table during a run.
type tableState struct {
	idx int // index in the manifest's Tables
	ref tableRef
	// info is set by the table's job before it pushes any chunk job.
	info *tableInfo

	// guarded by runState.mu:
	chunks  []dumpfile.Chunk // by seq; File empty until written
	planned bool             // every chunk job is pushed
	written int
}

// runState is one run's shared state.
type runState struct {
	d      *Dumper
	q      *queue
	tables []*tableState

	mu sync.Mutex
	// guarded by mu:
	err           error // the first failure
	unplanned     int   // tables whose chunks are not all pushed yet
	chunksPlanned int
}

// run dumps unless dir holds the finished dump of the current config.
func (d *Dumper) run(ctx context.Context) error {
	if d.source == nil {
		return errs.New(CodeDumpConfig, false, "dump: Process before Init")
	}
	if err := makeDir(d.dir); err != nil {
		return err
	}
	m, why, err := finishedDump(d.dir, d.cfg.Name, d.cfg.SourceID, d.fp, d.cfg.StrictCollation())
	if err != nil {
		return err
	}
	if m != nil {
		d.logger.Info("the dump directory holds the finished dump of this config; reusing it",
			zap.String("dump-id", m.DumpID), zap.String("dir", d.dir), zap.Stringer("snapshot", m.Start))
		d.showFinished(m)
		return nil
	}
	if why != "" {
		d.logger.Warn("the dump directory holds an unusable dump: "+why, zap.String("dir", d.dir))
	}
	if err := clearDir(d.dir); err != nil {
		return err
	}
	return d.dump(ctx)
}

// dump takes a fresh snapshot and writes every chunk, then the manifest.
func (d *Dumper) dump(ctx context.Context) error {
	started := time.Now()
	d.prog.reset(started)
	// The readers, the lock session and one spare; Update may have
	// changed threads since Init.
	readers := d.readers()
	if d.sources == nil {
		d.source.SetMaxOpenConns(readers + 2)
	} else {
		d.sources.Resize(d.source, readers+2)
	}
	// Every session of the snapshot is open at once: their tokens of the
	// source budget are taken together, so that dumps starting together
	// never each hold part of theirs and wait for the rest.
	release, err := d.sources.Reserve(ctx, d.source, readers+1)
	if err != nil {
		return errs.Wrap(err, CodeDumpSnapshot, "dump: take %d connections to the source for the snapshot", readers+1)
	}
	snap, err := takeSnapshot(ctx, d.source, readers, d.lockWait, d.logger)
	release()
	if err != nil {
		return err
	}
	defer snap.close()
	m := &dumpfile.Manifest{
		DumpID: newDumpID(), Task: d.cfg.Name, Source: d.cfg.SourceID, Fingerprint: d.fp,
		Method: snap.method, LockHeld: snap.held, Start: snap.start, StartedAt: started.UTC(),
	}
	d.logger.Info("dump snapshot taken", zap.String("dump-id", m.DumpID), zap.String("method", snap.method),
		zap.Duration("lock-held", snap.held), zap.Stringer("snapshot", snap.start), zap.String("gtid", snap.start.GTID),
		zap.Int("readers", len(snap.readers)))
	d.metrics.setLockHeld(snap.held.Seconds())
	d.prog.update(func(p *progress) {
		p.stage, p.dumpID, p.method, p.lockHeld = StageDumping, m.DumpID, snap.method, snap.held
		p.start = snap.start
	})
	schemas, refs, err := selection(ctx, snap.readers[0], d.tables, d.osc, d.logger)
	if err != nil {
		return err
	}
	m.Schemas = schemas
	// Recorded in either mode, so that the load of this dump can honour
	// collation_compatible strict whatever the task says then; only
	// strict needs them now.
	if m.Collations, err = readCollations(ctx, snap.readers[0]); err != nil {
		if d.cfg.StrictCollation() {
			return err
		}
		d.logger.Warn("the dump does not record the source's default collations; a later collation_compatible strict dumps again", zap.Error(err))
	}
	if len(refs) == 0 {
		d.logger.Warn("the block-allow list selects no table of the source; the dump is empty", zap.Int("schemas", len(schemas)))
	}
	rs := &runState{d: d, q: newQueue(), unplanned: len(refs)}
	for i, r := range refs {
		rs.tables = append(rs.tables, &tableState{idx: i, ref: r})
	}
	d.prog.update(func(p *progress) { p.tablesTotal = len(refs) })
	if err := rs.work(ctx, snap.readers); err != nil {
		return err
	}
	snap.close()
	return d.finish(ctx, m, rs)
}

// finish reads the source's end location and writes the manifest.
func (d *Dumper) finish(ctx context.Context, m *dumpfile.Manifest, rs *runState) error {
	end, err := d.endLocation(ctx)
	if err != nil {
		return err
	}
	var files []string
	for _, t := range rs.tables {
		m.Tables = append(m.Tables, dumpfile.Table{
			Schema: t.ref.schema, Name: t.ref.name, CreateSQL: t.info.createSQL, Columns: t.info.columns,
			KeyColumns: keyNames(t.info.key), Chunks: t.chunks,
		})
		for _, c := range t.chunks {
			files = append(files, c.File)
		}
	}
	// Every chunk file is made durable before the manifest names it.
	if err := dumpfile.Sync(d.dir, files, d.threads); err != nil {
		return errs.New(CodeDumpDir, false, "dump: %w", err)
	}
	m.End, m.FinishedAt = end, time.Now().UTC()
	if err := dumpfile.WriteManifest(d.dir, m); err != nil {
		return errs.New(CodeDumpDir, false, "dump: %w", err)
	}
	d.logger.Info("dump finished", zap.String("dump-id", m.DumpID), zap.Int("tables", len(m.Tables)),
		zap.Int("chunks", m.Chunks()), zap.Int64("rows", m.Rows()), zap.Int64("bytes", m.Bytes()),
		zap.Duration("took", m.FinishedAt.Sub(m.StartedAt)), zap.Stringer("end", end))
	d.prog.update(func(p *progress) { p.stage, p.finished = StageFinished, time.Now() })
	return nil
}

// endLocation reads the source's current binlog end.
func (d *Dumper) endLocation(ctx context.Context) (binlog.Location, error) {
	c, err := d.source.Conn(ctx)
	if err != nil {
		return binlog.Location{}, errs.Wrap(err, CodeDumpSnapshot, "dump: connect to the source")
	}
	defer func() { _ = c.Close() }() // back to the pool; nothing to report
	return masterStatus(ctx, c)
}

// showFinished shows a reused dump in status.
func (d *Dumper) showFinished(m *dumpfile.Manifest) {
	d.prog.rows.Store(m.Rows())
	d.prog.bytes.Store(m.Bytes())
	d.prog.update(func(p *progress) {
		p.stage, p.dumpID, p.method, p.lockHeld = StageFinished, m.DumpID, m.Method, m.LockHeld
		p.start = m.Start
		p.started, p.finished = m.StartedAt, m.FinishedAt
		p.tablesTotal, p.tablesDone = len(m.Tables), len(m.Tables)
		p.chunksTotal, p.chunksDone = m.Chunks(), m.Chunks()
	})
}

// newDumpID is 16 random hex digits.
func newDumpID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// work runs one worker per reader until every table is written.
func (rs *runState) work(ctx context.Context, readers []*sql.Conn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, rs.q.abort)
	defer stop()
	for _, t := range rs.tables {
		rs.q.push(job{table: t})
	}
	var wg sync.WaitGroup
	for _, c := range readers {
		wg.Go(func() {
			if err := rs.worker(ctx, c); err != nil {
				rs.fail(err)
				cancel()
			}
		})
	}
	wg.Wait()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.err == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return rs.err
}

func (rs *runState) fail(err error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.err == nil || errors.Is(rs.err, context.Canceled) {
		rs.err = err
	}
}

// worker runs jobs on its reader until the queue ends.
func (rs *runState) worker(ctx context.Context, c *sql.Conn) error {
	for {
		j, ok := rs.q.pop()
		if !ok {
			return nil
		}
		var err error
		if j.table != nil {
			err = rs.plan(ctx, c, j.table)
		} else {
			err = rs.write(ctx, c, j.chunk)
		}
		rs.q.done()
		if err != nil {
			return err
		}
	}
}
