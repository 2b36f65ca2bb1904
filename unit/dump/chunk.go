package dump

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// Sizes of a worker's buffers: its memory is these plus one row (which the
// driver holds whatever its size).
const (
	writeBuffer = 256 << 10 // bufio buffer in front of a chunk file
	escapePiece = 32 << 10  // a field is escaped this many bytes at a time
	countEvery  = 1024      // rows between updates of the shared counters
)

// Separators of the chunk format.
var (
	tab     = []byte{'\t'}
	newline = []byte{'\n'}
	null    = []byte(dumpfile.Null)
)

// boundaries calls emit with the upper bound of each chunk of about rows
// rows of t, in key order (literals, one per key column), then with nil for
// the last chunk. Each bound is the key of the rows-th row after the
// previous one, read with the key's index inside the snapshot.
func boundaries(ctx context.Context, c *sql.Conn, t *tableInfo, rows int64, emit func(upper []string) error) error {
	cols := t.key.OrderBy()
	from := " FROM " + t.ref.quoted() + " FORCE INDEX (" + sqlschema.QuoteName(t.key.Index) + ")"
	var lower []string
	for {
		q := "SELECT " + cols + from + t.key.Where(lower, nil) + " ORDER BY " + cols +
			" LIMIT 1 OFFSET " + strconv.FormatInt(rows-1, 10)
		vals := make([]sql.RawBytes, len(t.key.Columns))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		found := false
		var upper []string
		err := sqlschema.ScanAll(ctx, c, q, nil, func(r *sql.Rows) error {
			if err := r.Scan(ptrs...); err != nil {
				return err
			}
			found = true
			var err error
			upper, err = keyLiterals(t.key, vals)
			return err
		})
		if err != nil {
			return readErr(t.ref, "find chunk boundaries", err)
		}
		if !found {
			return emit(nil)
		}
		if err := emit(upper); err != nil {
			return err
		}
		lower = upper
	}
}

// chunkJob is one chunk to write: rows of table with lower < key <= upper.
type chunkJob struct {
	table        *tableState
	seq          int
	lower, upper []string
}

// writeChunk reads the chunk's rows on c and writes them to its file
// (through name.tmp and a rename; the fsync comes later, for all files). count is called with rows and bytes
// written as they go.
func writeChunk(ctx context.Context, c *sql.Conn, dir string, j chunkJob, count func(rows, bytes int64)) (ch dumpfile.Chunk, err error) {
	t := j.table.info
	ch.File = dumpfile.ChunkFile(j.table.idx, j.seq)
	tmp := filepath.Join(dir, ch.File+dumpfile.TmpSuffix)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return ch, errs.New(CodeDumpDir, false, "dump: create %s: %w", tmp, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()      // the read or write error matters more
			_ = os.Remove(tmp) // a leftover .tmp is removed by the next run anyway
		}
	}()
	q := "SELECT " + t.selected + " FROM " + t.ref.quoted()
	cond := ""
	if t.key != nil {
		q += " FORCE INDEX (" + sqlschema.QuoteName(t.key.Index) + ")"
		cond = t.key.Where(j.lower, j.upper)
	}
	if t.where != "" {
		if cond == "" {
			cond = " WHERE (" + t.where + ")"
		} else {
			cond += " AND (" + t.where + ")"
		}
	}
	q += cond
	rows, err := c.QueryContext(ctx, q)
	if err != nil {
		return ch, readErr(t.ref, "read chunk "+ch.File, err)
	}
	w := &rowWriter{bw: bufio.NewWriterSize(f, writeBuffer), vals: make([]sql.RawBytes, len(t.columns))}
	err = w.copy(rows, count)
	if err != nil {
		var we *writeError
		if errors.As(err, &we) {
			return ch, errs.New(CodeDumpDir, false, "dump: write %s: %w", tmp, we.err)
		}
		return ch, readErr(t.ref, "read chunk "+ch.File, err)
	}
	// No fsync here: finish syncs every chunk file at once before the
	// manifest names them (dumpfile.Sync).
	if err := errors.Join(w.bw.Flush(), f.Close()); err != nil {
		return ch, errs.New(CodeDumpDir, false, "dump: write %s: %w", tmp, err)
	}
	if err := dumpfile.Finish(dir, ch.File); err != nil {
		return ch, errs.New(CodeDumpDir, false, "dump: finish %s: %w", tmp, err)
	}
	ch.Rows, ch.Bytes = w.rows, w.bytes
	return ch, nil
}

// writeError marks a failure to write the file (not to read the source).
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// rowWriter writes rows in the chunk format, one row at a time.
type rowWriter struct {
	bw          *bufio.Writer
	vals        []sql.RawBytes
	scratch     []byte
	rows, bytes int64
}

// copy writes every row of rows and closes it.
func (w *rowWriter) copy(rows *sql.Rows, count func(rows, bytes int64)) error {
	ptrs := make([]any, len(w.vals))
	for i := range w.vals {
		ptrs[i] = &w.vals[i]
	}
	var lastRows, lastBytes int64
	err := sqlschema.ScanRows(rows, func(r *sql.Rows) error {
		if err := r.Scan(ptrs...); err != nil {
			return err
		}
		if err := w.row(); err != nil {
			return &writeError{err}
		}
		if w.rows%countEvery == 0 {
			count(w.rows-lastRows, w.bytes-lastBytes)
			lastRows, lastBytes = w.rows, w.bytes
		}
		return nil
	})
	count(w.rows-lastRows, w.bytes-lastBytes)
	return err
}

// row writes the scanned row: fields escaped, tab-separated, NULL as \N.
func (w *rowWriter) row() error {
	for i, v := range w.vals {
		if i > 0 {
			if err := w.write(tab); err != nil {
				return err
			}
		}
		if v == nil {
			if err := w.write(null); err != nil {
				return err
			}
			continue
		}
		for len(v) > 0 {
			n := min(len(v), escapePiece)
			piece := v[:n]
			if n < plainCheckMin || !plain(piece) {
				w.scratch = dumpfile.AppendField(w.scratch[:0], piece)
				piece = w.scratch
			}
			if err := w.write(piece); err != nil {
				return err
			}
			v = v[n:]
		}
	}
	w.rows++
	return w.write(newline)
}

// plainCheckMin is the field length from which plain is tried first: for
// longer fields its vectorised scans cost a third of AppendField's, and
// most fields need no escape.
const plainCheckMin = 16

// plain reports whether v holds none of the bytes AppendField escapes (then
// it would append v unchanged).
func plain(v []byte) bool {
	return bytes.IndexByte(v, '\\') < 0 && bytes.IndexByte(v, '\t') < 0 && bytes.IndexByte(v, '\n') < 0 &&
		bytes.IndexByte(v, '\r') < 0 && bytes.IndexByte(v, 0) < 0
}

func (w *rowWriter) write(b []byte) error {
	n, err := w.bw.Write(b)
	w.bytes += int64(n)
	return err
}
