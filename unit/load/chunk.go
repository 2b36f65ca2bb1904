package load

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// job is one chunk file to load.
type job struct {
	plan  *tablePlan
	chunk dumpfile.Chunk
}

// readerSeq makes the driver's reader handler names unique in the process
// (the handler registry is the driver's, shared by every loader).
var readerSeq atomic.Uint64

// loadChunks loads jobs with workers connections at once and returns the
// first error (or ctx's once it is cancelled); in-flight chunks of the
// other workers are cancelled then and roll back.
func (l *Loader) loadChunks(ctx context.Context, r *runState, jobs []*job, workers int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	feed := make(chan *job)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range workers {
		wg.Go(func() {
			for j := range feed {
				err := l.loadChunkRetrying(ctx, r, j)
				if d := j.plan.indexes; err == nil && d != nil && d.left.Add(-1) == 0 {
					// The table's last chunk: its deferred indexes now, while
					// the other workers load other tables.
					err = l.addIndexes(ctx, j.plan)
				}
				if err != nil {
					once.Do(func() { first = err })
					cancel()
					return
				}
			}
		})
	}
send:
	for _, j := range jobs {
		select {
		case feed <- j:
		case <-ctx.Done():
			break send
		}
	}
	close(feed)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// duplicateAdvice explains a chunk whose keys are in the target already.
const duplicateAdvice = "keys of the chunk are already in the target table (rows there before the load, " +
	"or merged source tables whose keys overlap); remove those rows or route the tables apart, then resume"

// loadChunkRetrying is loadChunk, run again after a deadlock or lock wait
// timeout (dbconn's one lock-conflict policy): parallel loads into one
// table may deadlock on index gaps.
func (l *Loader) loadChunkRetrying(ctx context.Context, r *runState, j *job) error {
	return dbconn.RetryLockConflict(ctx, func() error { return l.loadChunk(ctx, r, j) }, func(attempt int, err error) {
		l.logger.Info("chunk hit a lock conflict; trying it again", zap.String("chunk", j.chunk.File), zap.Int("attempt", attempt), zap.Error(err))
	})
}

// loadChunk loads one chunk file in one target transaction together with
// its record, so that after any crash the chunk is either loaded and
// recorded or neither.
func (l *Loader) loadChunk(ctx context.Context, r *runState, j *job) (err error) {
	began := time.Now()
	src, dst := j.plan.source, j.plan.target
	path := filepath.Join(l.dir, j.chunk.File)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return errs.New(CodeLoadDump, false, "load: chunk file %s of table %s (dump %s) is missing; the dump directory %s is incomplete: "+
			"clean the target tables and restart the task with `dmctl task start --remove-meta`", path, src, r.dumpID, l.dir)
	}
	if err != nil {
		return errs.New(CodeLoadDump, false, "load: open chunk file of table %s: %w", src, err)
	}
	defer func() { _ = f.Close() }() // read only: a close error loses nothing
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return errs.Wrap(err, CodeLoadChunk, "load: chunk %s of table %s into %s: begin", j.chunk.File, src, dst)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback() // the load error matters more; a dropped connection rolls back anyway
		}
	}()
	var loaded, read int64
	if !j.plan.skipRows {
		if loaded, read, err = l.loadRows(ctx, tx, f, j); dbconn.ErrorNumber(err) == 1062 { // ER_DUP_ENTRY
			return errs.New(CodeLoadChunk, false, "load: chunk %s of table %s into %s: %w: %s", path, src, dst, err, duplicateAdvice)
		}
		if err != nil {
			return errs.Wrap(err, CodeLoadChunk, "load: chunk %s of table %s into %s", path, src, dst)
		}
		if read != j.chunk.Bytes {
			return errs.New(CodeLoadDump, false, "load: chunk file %s of table %s has %d bytes but the manifest of dump %s says %d: "+
				"the dump directory %s was changed; clean the target tables and restart the task with `dmctl task start --remove-meta`",
				path, src, read, r.dumpID, j.chunk.Bytes, l.dir)
		}
		if loaded != j.chunk.Rows {
			return errs.New(CodeLoadChunk, false, "load: chunk %s of table %s holds %d rows but %d went into %s: %s", path, src, j.chunk.Rows, loaded, dst, duplicateAdvice)
		}
	}
	q, args := r.store.chunkStmt(r.dumpID, j, loaded)
	if _, err = tx.ExecContext(ctx, q, args...); err != nil {
		return errs.Wrap(err, CodeLoadCheckpoint, "load: record chunk %s of table %s", j.chunk.File, src)
	}
	if err = tx.Commit(); err != nil {
		return errs.Wrap(err, CodeLoadChunk, "load: chunk %s of table %s into %s: commit", j.chunk.File, src, dst)
	}
	now := time.Now()
	l.prog.chunkDone(j.plan.index, j.chunk.Rows, j.chunk.Bytes, now)
	l.metrics.chunk(loaded, read)
	l.logger.Debug("chunk loaded", zap.String("chunk", j.chunk.File), zap.Stringer("table", dst),
		zap.Int64("rows", loaded), zap.Duration("took", now.Sub(began)))
	return nil
}

// loadRows loads the rows of f into j's target table in tx with the unit's
// method, switching to INSERT for good when the target refuses LOAD DATA
// LOCAL (the refusal comes before any byte of the file is read).
func (l *Loader) loadRows(ctx context.Context, tx *sql.Tx, f *os.File, j *job) (rows, read int64, err error) {
	if l.method.Load() == methodLoadData {
		rows, read, err = loadData(ctx, tx, f, j)
		if !localInfileRefused(err) {
			return rows, read, err
		}
		if l.method.CompareAndSwap(methodLoadData, methodInsert) {
			l.logger.Warn("the target refuses LOAD DATA LOCAL INFILE (local_infile=OFF); loading with multi-row INSERT, "+
				"which is slower: set local_infile=ON on the target for faster loads", zap.Error(err))
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return 0, 0, err
		}
	}
	return insertRows(ctx, tx, f, j)
}

// loadData streams f into j's target table with LOAD DATA LOCAL INFILE
// through the driver's reader handler, bytes unconverted (CHARACTER SET
// binary); it returns the rows inserted and the bytes read.
func loadData(ctx context.Context, tx *sql.Tx, f io.Reader, j *job) (rows, read int64, err error) {
	cr := &countingReader{r: f}
	name := "dm-load-" + strconv.FormatUint(readerSeq.Add(1), 10)
	mysql.RegisterReaderHandler(name, func() io.Reader { return cr })
	defer mysql.DeregisterReaderHandler(name)
	q := fmt.Sprintf("LOAD DATA LOCAL INFILE 'Reader::%s' INTO TABLE %s CHARACTER SET binary "+
		`FIELDS TERMINATED BY '\t' ENCLOSED BY '' ESCAPED BY '\\' LINES TERMINATED BY '\n' STARTING BY '' %s`,
		name, j.plan.target, j.plan.columns)
	res, err := tx.ExecContext(ctx, q)
	if err != nil {
		return 0, cr.n, err
	}
	rows, err = res.RowsAffected()
	return rows, cr.n, err
}

// countingReader counts the bytes read through it. It is not an io.Closer,
// so the driver leaves the file to its owner.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
