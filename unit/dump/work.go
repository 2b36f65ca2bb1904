package dump

import (
	"context"
	"database/sql"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// plan reads a table's definition and pushes a job for each of its chunks
// as their boundaries are found.
func (rs *runState) plan(ctx context.Context, c *sql.Conn, t *tableState) error {
	log := rs.d.logger.With(zap.Stringer("table", t.ref))
	info, err := readTableInfo(ctx, c, t.ref, log)
	if err != nil {
		return err
	}
	info.where = rs.d.where
	t.info = info
	seq := 0
	var lower []string
	push := func(upper []string) error {
		rs.mu.Lock()
		t.chunks = append(t.chunks, dumpfile.Chunk{})
		rs.mu.Unlock()
		rs.q.push(job{chunk: chunkJob{table: t, seq: seq, lower: lower, upper: upper}})
		seq++
		lower = upper
		return nil
	}
	how := "key ranges"
	switch split, serr := splitByRange(ctx, c, info, rs.d.rows, push); {
	case serr != nil:
		return serr
	case split:
	case info.key == nil:
		how, err = "one chunk", push(nil)
	default:
		how, err = "keyset boundaries", boundaries(ctx, c, info, rs.d.rows, push)
	}
	if err != nil {
		return err
	}
	log.Info("table split into chunks", zap.Int("chunks", seq), zap.String("key", describe(info.key)), zap.String("by", how))
	rs.mu.Lock()
	t.planned = true
	rs.unplanned--
	rs.chunksPlanned += seq
	done := t.written == len(t.chunks)
	total := 0
	if rs.unplanned == 0 {
		total = rs.chunksPlanned
	}
	rs.mu.Unlock()
	rs.d.prog.update(func(p *progress) {
		p.chunksTotal = total
		if done {
			p.tablesDone++
		}
	})
	return nil
}

// write writes one chunk and records it.
func (rs *runState) write(ctx context.Context, c *sql.Conn, j chunkJob) error {
	ch, err := writeChunk(ctx, c, rs.d.dir, j, func(rows, bytes int64) {
		rs.d.prog.rows.Add(rows)
		rs.d.prog.bytes.Add(bytes)
	})
	if err != nil {
		return err
	}
	rs.d.metrics.chunk(ch.Rows, ch.Bytes)
	t := j.table
	rs.mu.Lock()
	t.chunks[j.seq] = ch
	t.written++
	done := t.planned && t.written == len(t.chunks)
	rs.mu.Unlock()
	rs.d.prog.update(func(p *progress) {
		p.chunksDone++
		if done {
			p.tablesDone++
		}
	})
	return nil
}
