package load

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/unit/dump"
	"github.com/dmworker/dm-worker/unit/dumpfile"
	"github.com/dmworker/dm-worker/unit/syncer/syncmeta"
)

// runState is what one run shares with its chunk workers.
type runState struct {
	dumpID string
	store  *metaStore
}

// run loads the dump in l.dir: everything not yet recorded in the target,
// then the finish record (and the hand-off to sync), then the cleanup.
func (l *Loader) run(ctx context.Context) error {
	if l.db == nil {
		return errs.New(CodeLoadConfig, false, "load: subtask %q: Process before a successful Init", l.cfg.Name)
	}
	m, err := dumpfile.ReadManifest(l.dir)
	if err != nil && !errors.Is(err, dumpfile.ErrNoManifest) {
		return errs.New(CodeLoadDump, false, "load: %w; clean the target tables and restart the task with `dmctl task start --remove-meta` to dump again", err)
	}
	st, err := l.store.read(ctx, l.db)
	if err != nil {
		return err
	}
	if st.finished {
		l.logger.Info("load already finished", zap.String("dump-id", st.dumpID))
		if m != nil && m.DumpID == st.dumpID {
			l.cleanup(m)
		}
		l.prog.reset(Status{DumpID: st.dumpID, Dir: l.dir}, nil, time.Now())
		l.prog.finish()
		return nil
	}
	if err := l.checkDump(m, st); err != nil {
		return err
	}
	if l.cfg.TaskMode == config.ModeAll {
		start := m.Start
		l.start.Store(&start)
	}
	if err := l.store.begin(ctx, l.db, m.DumpID); err != nil {
		return err
	}
	plans, err := l.prepareTables(ctx, m)
	if err != nil {
		return err
	}
	jobs := l.pending(m, plans, st)
	l.logger.Info("loading dump", zap.String("dump-id", m.DumpID), zap.String("dir", l.dir),
		zap.Int("chunks", m.Chunks()), zap.Int("chunks-to-load", len(jobs)), zap.Int("pool-size", l.cfg.Loader.PoolSize))
	r := &runState{dumpID: m.DumpID, store: l.store}
	if err := l.loadChunks(ctx, r, jobs, max(1, l.cfg.Loader.PoolSize)); err != nil {
		return err
	}
	if err := l.addAllIndexes(ctx, plans); err != nil {
		return err
	}
	// Mode all hands the source over to the sync unit; mode full leaves the
	// same checkpoint, so that an incremental task of the same name started
	// without meta resumes exactly where the dump's snapshot ends.
	handOff := syncmeta.HandOff(l.cfg.MetaSchema, l.cfg.Name, l.cfg.SourceID, m.Start, m.End)
	if err := l.store.finish(ctx, l.db, m.DumpID, l.prog.snapshot().Rows, handOff); err != nil {
		return err
	}
	l.prog.finish()
	s := l.prog.snapshot()
	l.logger.Info("load finished", zap.String("dump-id", m.DumpID), zap.Int64("rows", s.Rows), zap.Int64("bytes", s.Bytes),
		zap.Float64("rows-per-second", s.RowsPerSecond), zap.Stringer("start", m.Start), zap.Stringer("safe-until", m.End))
	l.cleanup(m)
	return nil
}

// checkDump refuses a missing dump, and a dump other than the one whose
// chunks the target already holds.
func (l *Loader) checkDump(m *dumpfile.Manifest, st *loadState) error {
	fix := "clean the target tables of the task and restart it with `dmctl task start --remove-meta`"
	if m == nil {
		if st.hasStatus || len(st.chunks) > 0 {
			return errs.New(CodeLoadDump, false, "load: the target holds %d loaded chunks of dump %s for source %s, but %s has no finished dump "+
				"(the dump files were removed, or the task moved to another worker); %s",
				len(st.chunks), st.anyDumpID(), l.cfg.SourceID, l.dir, fix)
		}
		return errs.New(CodeLoadDump, false, "load: no finished dump in %s for task %q source %s; restart the task so that the dump unit runs",
			l.dir, l.cfg.Name, l.cfg.SourceID)
	}
	if m.Task != l.cfg.Name || m.Source != l.cfg.SourceID {
		return errs.New(CodeLoadDump, false, "load: the dump in %s is of task %q source %s, not of task %q source %s; point loader.dir elsewhere",
			l.dir, m.Task, m.Source, l.cfg.Name, l.cfg.SourceID)
	}
	if changed := selectionChanged(m.Fingerprint, dump.Fingerprint(l.cfg, l.src)); changed != "" {
		return errs.New(CodeLoadDump, false, "load: the dump %s in %s was taken before %s of the task changed, so it does not hold "+
			"the tables the task now selects; %s", m.DumpID, l.dir, changed, fix)
	}
	if ids, counts := st.otherDumps(m.DumpID); len(ids) > 0 {
		return errs.New(CodeLoadDump, false, "load: the dump in %s (dump %s) was taken again (the task's config changed, or the old dump "+
			"was incomplete) while the target already holds %d chunks of dump %s for source %s; %s",
			l.dir, m.DumpID, counts[ids[0]], ids[0], l.cfg.SourceID, fix)
	}
	for _, t := range m.Tables {
		for _, c := range t.Columns {
			if c.Load != dumpfile.LoadRaw && c.Load != dumpfile.LoadBit {
				return errs.New(CodeLoadDump, false, "load: column %s of table %s in dump %s has loader %q, which this build does not know; "+
					"run the same dm-worker version for dump and load", sqlschema.QuoteName(c.Name), sqlschema.QuoteName(t.Schema)+"."+sqlschema.QuoteName(t.Name), m.DumpID, c.Load)
			}
		}
	}
	return nil
}

// pending returns the chunks of m not yet recorded, one chunk of each table
// in turn (so workers spread over tables), and resets the progress.
func (l *Loader) pending(m *dumpfile.Manifest, plans []tablePlan, st *loadState) []*job {
	prog := Status{DumpID: m.DumpID, Dir: l.dir, TablesTotal: len(m.Tables), ChunksTotal: m.Chunks(),
		RowsTotal: m.Rows(), BytesTotal: m.Bytes()}
	left := make(map[int]int, len(m.Tables))
	var jobs []*job
	for seq := 0; ; seq++ {
		more := false
		for i := range m.Tables {
			t := &m.Tables[i]
			if seq >= len(t.Chunks) {
				continue
			}
			more = true
			c := t.Chunks[seq]
			if _, done := st.chunks[c.File]; done {
				prog.ChunksDone++
				prog.Rows += c.Rows
				prog.Bytes += c.Bytes
				continue
			}
			left[i]++
			if d := plans[i].indexes; d != nil {
				d.left.Add(1)
			}
			jobs = append(jobs, &job{plan: &plans[i], chunk: c})
		}
		if !more {
			break
		}
	}
	for i := range m.Tables {
		if _, ok := left[i]; !ok {
			left[i] = 0
		}
	}
	l.prog.reset(prog, left, time.Now())
	return jobs
}

// cleanup removes the chunk files and the manifest of m from l.dir unless
// loader.cleanup-dump-file is false; failures are warnings.
func (l *Loader) cleanup(m *dumpfile.Manifest) {
	if !l.cfg.Loader.CleanupDump() {
		return
	}
	var failed []error
	for _, t := range m.Tables {
		for _, c := range t.Chunks {
			if err := os.Remove(filepath.Join(l.dir, c.File)); err != nil && !errors.Is(err, os.ErrNotExist) {
				failed = append(failed, err)
			}
		}
	}
	// The manifest goes last: while it exists, the files it names are
	// known to be this dump's.
	if err := os.Remove(filepath.Join(l.dir, dumpfile.ManifestName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		failed = append(failed, err)
	}
	if len(failed) > 0 {
		l.logger.Warn("remove the loaded dump files", zap.String("dir", l.dir), zap.Error(errors.Join(failed...)),
			zap.String("fix", fmt.Sprintf("remove the files in %s by hand", l.dir)))
		return
	}
	l.logger.Info("removed the loaded dump files", zap.String("dir", l.dir), zap.Int("chunks", m.Chunks()))
}

// selectionChanged names the parts of the dump unit's fingerprint that
// decide which tables a dump holds and that differ between the dump's and
// the current config's; "" when none does or the dump has no fingerprint.
// The source's endpoint and the chunk size may change after the dump: its
// rows stay the snapshot's.
func selectionChanged(dumped, current string) string {
	if dumped == "" {
		return ""
	}
	return strings.Join(dump.Changed(dumped, current, dump.FingerprintBAList, dump.FingerprintCase, dump.FingerprintOnlineDDL), " and ")
}
