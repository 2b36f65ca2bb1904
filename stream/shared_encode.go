package stream

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/binlog/fanout"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// memoSource is a binlog streamer that shares its events with other
// streams (fanout.Sub): the memo of the event it returned last, nil when
// that event is this stream's own decode.
type memoSource interface{ Memo() *fanout.Memo }

// encodingKey names everything that decides the bytes of the events of a
// rows event, besides the event itself: streams whose keys are equal
// encode it to the same events, so one of them encodes it for all
// (sharedRows). The stream's selection (block-allow list, online-ddl
// rules) decides only whether a table's rows are encoded at all, its sink
// and batching only where the events go: neither is part of it. A stream
// whose expression filters judge an event's rows does not share it (see
// reader.rows); settings that change the bytes of an event (a column
// selection, routes in the source block) must join the key when streams
// get them.
type encodingKey struct {
	// format and source are the encoder's (Encoder.format, .source).
	format, source string
	// schema is the fingerprint of the table's schema as the stream read
	// it (schemaKey): streams that read it at different times (before
	// and after an ALTER) do not share.
	schema string
	// file and gtid are the stream's binlog file and transaction GTID,
	// which the events' source block and identity carry.
	file, gtid string
}

// sharedRow is one row change of a rows event encoded: first, and second
// when two (an update that changes the key: "d" then "c").
type sharedRow struct {
	first, second Event
	two           bool
}

// schemaKeyCache bounds the fingerprints a reader keeps (the schema cache
// gives a new table model after each DDL of the table).
const schemaKeyCache = 256

// schemaKey is a fingerprint of every field of s (the encoder reads
// names, types, charsets, scales, lengths, members, key columns), cached
// by the model's address: the schema cache returns the same model until
// a DDL invalidates it.
func (r *reader) schemaKey(s *sqlschema.Table) string {
	if k, ok := r.schemaKeys[s]; ok {
		return k
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "" // never shared: see sharedRows
	}
	sum := sha256.Sum256(b)
	k := string(sum[:])
	if r.schemaKeys == nil || len(r.schemaKeys) >= schemaKeyCache {
		r.schemaKeys = make(map[*sqlschema.Table]string)
	}
	r.schemaKeys[s] = k
	return k
}

// sharedRows delivers the rows of e (a rows event of table base, whose
// rows s describes) through the memo of the shared reader: encoded once
// for every stream with the same encodingKey, by whichever comes first.
// done false: there is no memo (the event was read privately) or the
// shared encoding failed; the caller then encodes the rows itself (and
// reports the failure as its own).
func (r *reader) sharedRows(ctx context.Context, ev *replication.BinlogEvent, e *replication.RowsEvent,
	base, s *sqlschema.Table, kind binlog.RowsKind, op string, step int) (done bool, err error) {
	memo := r.memos.Memo()
	if memo == nil {
		return false, nil
	}
	schema := r.schemaKey(base)
	if schema == "" {
		return false, nil
	}
	key := encodingKey{format: r.t.enc.format, source: r.t.enc.source, schema: schema, file: r.tr.Cur.Name, gtid: r.tr.GTID}
	v, ok := memo.Do(key, func() (any, int, bool) {
		r.sharedArena.hold(r.t.enc)
		defer r.sharedArena.release()
		rows := make([]sharedRow, 0, len(e.Rows)/step)
		size := 0
		for i := 0; i+step <= len(e.Rows); i += step {
			first, second, two, err := r.encodeRow(&r.sharedArena, s, kind, op, e.Rows, i, r.position(ev, i/step))
			if err != nil {
				return nil, 0, false
			}
			rows = append(rows, sharedRow{first: first, second: second, two: two})
			size += eventSize(first)
			if two {
				size += eventSize(second)
			}
		}
		return rows, size + cap(rows)*int(unsafe.Sizeof(sharedRow{})), true
	})
	if !ok {
		return false, nil
	}
	for j, row := range v.([]sharedRow) {
		m := mark{file: r.tr.Cur.Name, pos: ev.Header.LogPos, row: j, del: row.two}
		if err := r.add(ctx, row.first, m); err != nil {
			return true, err
		}
		if row.two {
			m.del = false
			if err := r.add(ctx, row.second, m); err != nil {
				return true, err
			}
		}
	}
	return true, nil
}
