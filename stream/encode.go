package stream

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Formats of change events (StreamConfig format).
const (
	FormatDebezium  = "debezium"
	FormatCanalJSON = "canal-json"
)

// Encoder turns row changes and DDL into Events in one format (DESIGN.md
// §4). It holds no state between events and may be used from several
// goroutines.
//
// Column values (the same in the key, before and after; binlog and
// snapshot forms of a value encode alike):
//   - TINYINT … BIGINT (signed, UNSIGNED, ZEROFILL), YEAR (0 for 0000)
//     and BIT: JSON numbers with every digit (no float rounding);
//   - DECIMAL: a string with the column's scale, "-1.50";
//   - FLOAT: the shortest number that reads back as the same float32
//     (every bit of the stored value, not the 6 digits MariaDB prints);
//     DOUBLE: the shortest number that reads back as the same double;
//   - DATE, DATETIME, TIMESTAMP (UTC), TIME: strings in MariaDB's text
//     form with the column's fractional digits, zero dates kept
//     ("0000-00-00 00:00:00.000000");
//   - CHAR, VARCHAR, TEXT, JSON: UTF-8 strings (latin1 converted);
//     ENUM: the member's name ("" for the invalid index 0); SET: the
//     members joined by commas; INET4, INET6, UUID: their text form;
//   - BINARY (padded to its length), VARBINARY, BLOB, spatial types:
//     base64 strings;
//   - NULL: null.
//
// Debezium values are {"before","after","op","ts_ms","source"}, source
// being {"name","db","table","file","pos","row","gtid" (null without
// GTID),"server_id","ts_ms","snapshot"}; a DDL is
// {"ddl","op":"ddl","ts_ms","source"}. canal-json is TiCDC's with
// content-compatible=true (official Canal's content): every data value a
// string or null (ENUM as its index, SET as its bitmask, binary as
// ISO-8859-1 text), mysqlType the full column type, "old" only the
// columns an UPDATE changed.
type Encoder struct {
	source string
	format string
	now    func() time.Time
}

// EncoderOption configures an Encoder.
type EncoderOption func(*Encoder)

// WithNow sets the clock behind the events' encoding time (debezium
// ts_ms, canal-json ts); time.Now by default.
func WithNow(now func() time.Time) EncoderOption {
	return func(e *Encoder) { e.now = now }
}

// NewEncoder returns an encoder of events from source (the source-id) in
// format "debezium" (also "") or "canal-json".
func NewEncoder(source, format string, opts ...EncoderOption) (*Encoder, error) {
	switch format {
	case "", FormatDebezium:
		format = FormatDebezium
	case FormatCanalJSON:
	default:
		return nil, fmt.Errorf("stream: unknown event format %q; use %q or %q", format, FormatDebezium, FormatCanalJSON)
	}
	e := &Encoder{source: source, format: format, now: time.Now}
	for _, o := range opts {
		o(e)
	}
	return e, nil
}

// Format returns the encoder's format, "debezium" or "canal-json".
func (e *Encoder) Format() string { return e.format }

// Row encodes one row change of table s. op is "c" (insert: before nil),
// "u" (update), "d" (delete: after nil) or "r" (snapshot read: before
// nil). before and after hold every column in table order, each value as
// go-mysql's row decoder gives it (ParseTime off, UseDecimal on,
// TimestampStringLocation UTC) or, for op "r", as database/sql scans it
// (nil or the []byte text MariaDB prints, read over a utf8mb4 connection
// with time_zone '+00:00'). The key comes from after (before for "d").
func (e *Encoder) Row(s *sqlschema.Table, op string, before, after []any, pos Position) (Event, error) {
	return e.row(nil, s, op, before, after, pos)
}

// row is Row with the event's buffer taken from a (nil: its own).
func (e *Encoder) row(a *arena, s *sqlschema.Table, op string, before, after []any, pos Position) (Event, error) {
	switch op {
	case "c", "r":
		before = nil
	case "d":
		after = nil
	case "u":
	default:
		return Event{}, fmt.Errorf("stream: %s: unknown row operation %q (want c, u, d or r)", s, op)
	}
	if (op != "d" && after == nil) || ((op == "u" || op == "d") && before == nil) {
		return Event{}, fmt.Errorf("stream: %s: operation %q without its row image", s, op)
	}
	snapshot := op == "r" || pos.Snapshot
	pos.Snapshot = snapshot
	img := getImages()
	defer putImages(img)
	old, err := encodeImage(img.old[:0], s, before, snapshot)
	if err != nil {
		return Event{}, err
	}
	if old != nil {
		img.old = old
	}
	cur, err := encodeImage(img.cur[:0], s, after, snapshot)
	if err != nil {
		return Event{}, err
	}
	if cur != nil {
		img.cur = cur
	}
	keyImage := cur
	if op == "d" {
		keyImage = old
	}
	img.key = keyJSON(img.key[:0], s, keyImage)
	return e.event(a, s, op, old, cur, img.key, pos), nil
}

// Update encodes an update of table s: one "u" event, or, when the update
// changes the row's key, a "d" event under the old key followed by a "c"
// event under the new one (as Debezium does), so that consumers that
// partition or compact by key see every key's history in order. The "d"
// event's identity is the update's with the suffix ":d".
func (e *Encoder) Update(s *sqlschema.Table, before, after []any, pos Position) ([]Event, error) {
	first, second, two, err := e.update(nil, s, before, after, pos)
	switch {
	case err != nil:
		return nil, err
	case two:
		return []Event{first, second}, nil
	}
	return []Event{first}, nil
}

// update is Update returning the events themselves: first, and second when
// two (the "c" half of a key change), their buffers taken from a (nil:
// their own).
func (e *Encoder) update(a *arena, s *sqlschema.Table, before, after []any, pos Position) (first, second Event, two bool, err error) {
	if before == nil || after == nil {
		return Event{}, Event{}, false, fmt.Errorf("stream: %s: operation \"u\" without its row image", s)
	}
	img := getImages()
	defer putImages(img)
	old, err := encodeImage(img.old[:0], s, before, pos.Snapshot)
	if err != nil {
		return Event{}, Event{}, false, err
	}
	img.old = old
	cur, err := encodeImage(img.cur[:0], s, after, pos.Snapshot)
	if err != nil {
		return Event{}, Event{}, false, err
	}
	img.cur = cur
	img.key, img.oldKey = keyJSON(img.key[:0], s, cur), keyJSON(img.oldKey[:0], s, old)
	oldKey, newKey := img.oldKey, img.key
	if bytes.Equal(oldKey, newKey) {
		return e.event(a, s, "u", old, cur, newKey, pos), Event{}, false, nil
	}
	del := e.event(a, s, "d", old, nil, oldKey, pos)
	del.ID += ":d"
	return del, e.event(a, s, "c", nil, cur, newKey, pos), true, nil
}

// images are the two encoded row images of one row change and the
// buffers its keys are built in (event copies a key beside the value),
// reused through imagePool: a row change then allocates only its event's
// identity and the one buffer of its key and value.
type images struct {
	old, cur    []colValue
	key, oldKey []byte
}

var imagePool = sync.Pool{New: func() any { return new(images) }}

func getImages() *images { return imagePool.Get().(*images) }

// putImages clears img's values (so that they hold no text alive) and
// returns it to the pool.
func putImages(img *images) {
	clear(img.old)
	clear(img.cur)
	imagePool.Put(img)
}

// keyJSON appends to b the event key of a row image: its key columns as a
// JSON object.
func keyJSON(b []byte, s *sqlschema.Table, image []colValue) []byte {
	key := startObject(b)
	for _, k := range s.RowKey {
		key.key(s.Columns[k].Name)
		key.buf = image[k].debezium(key.buf)
	}
	return key.end()
}

// event builds the event of an encoded row change. Its Value and Key are
// parts of one buffer, sized for both up front, from a when it is not nil:
// the event's sink record (Event.rec).
func (e *Encoder) event(a *arena, s *sqlschema.Table, op string, old, cur []colValue, key []byte, pos Position) Event {
	const recKey, recValue, recEnd = `{"key":`, `,"value":`, "}\n"
	ev := Event{ID: EventID(e.source, pos), DB: s.Schema, Table: s.Name, Op: op}
	size := len(recKey) + len(key) + len(recValue) + len(recEnd)
	if e.format == FormatCanalJSON {
		size += canalSize(s, old, cur)
	} else {
		size += e.debeziumSize(s, old, cur, pos)
	}
	buf := append(append(append(a.take(size), recKey...), key...), recValue...)
	vs := len(buf)
	if e.format == FormatCanalJSON {
		buf = e.canalRow(buf, s, op, old, cur, pos)
	} else {
		buf = e.debeziumRow(a, buf, s, op, old, cur, pos)
	}
	ve := len(buf)
	buf = a.keep(append(buf, recEnd...))
	ks, ke := len(recKey), len(recKey)+len(key)
	ev.Key, ev.Value, ev.rec = buf[ks:ke:ke], buf[vs:ve:ve], buf
	return ev
}

// arenaChunk is the size of an arena's chunks.
const arenaChunk = 256 << 10

// arena hands out the buffers of events from large chunks, one allocation
// for hundreds of events. A chunk is freed once none of its events is
// referenced any more: the events of a batch go together once the sink
// wrote them. A nil *arena allocates every buffer on its own.
type arena struct {
	chunk []byte // the current chunk; chunk[len(chunk):] is free
	// free, when set, gives recycled chunks; used are the chunks taken
	// since the last seal.
	free <-chan []byte
	used [][]byte
	// src is the debezium source block of the last event, which the
	// other rows of its rows event share but for "row".
	src sourceBlock
	// nowMs is the last encoding time written, nowText its digits;
	// while held (hold), nowMs is the time of every event.
	nowMs   int64
	nowText []byte
	held    bool
	// names are the member names, `"<column>":`, of the columns of
	// namesOf (the table of the last event).
	namesOf *sqlschema.Table
	names   []string
}

// columnNames returns the member names of s's columns, `"<column>":`,
// built once per table in a row (nil a: nil).
func (a *arena) columnNames(s *sqlschema.Table) []string {
	if a == nil {
		return nil
	}
	if a.namesOf != s || len(a.names) != len(s.Columns) {
		a.names = a.names[:0]
		for i := range s.Columns {
			a.names = append(a.names, string(append(appendJSONString(nil, s.Columns[i].Name), ':')))
		}
		a.namesOf = s
	}
	return a.names
}

// sourceBlock is a debezium "source" block cut around its row number:
// head runs from its opening brace to `"row":`, tail from the comma after
// the number to the closing brace; the fields it was built for come first.
type sourceBlock struct {
	source, db, table, file, gtid string
	pos, serverID                 uint32
	tsMs                          int64
	snapshot, valid               bool
	head, tail                    []byte
}

// appendSource appends the source block of an event from source of
// db.table at pos, reusing the last one's text when only the row differs.
func (a *arena) appendSource(b []byte, source, db, table string, pos Position) []byte {
	c := &a.src
	if !c.valid || c.pos != pos.Pos || c.file != pos.File || c.gtid != pos.GTID || c.serverID != pos.ServerID ||
		c.tsMs != pos.TsMs || c.snapshot != pos.Snapshot || c.table != table || c.db != db || c.source != source {
		full := appendSourceBlock(c.head[:0], source, db, table, pos)
		// Cut around the row number: head ends with `"row":`, tail starts
		// at the comma after the digits.
		at := bytes.Index(full, []byte(`,"row":`)) + len(`,"row":`)
		end := at + bytes.IndexByte(full[at:], ',')
		c.head = full[:at:at]
		c.tail = append(c.tail[:0], full[end:]...)
		*c = sourceBlock{source: source, db: db, table: table, file: pos.File, gtid: pos.GTID, pos: pos.Pos,
			serverID: pos.ServerID, tsMs: pos.TsMs, snapshot: pos.Snapshot, valid: true, head: c.head, tail: c.tail}
	}
	b = append(b, c.head...)
	b = strconv.AppendInt(b, int64(pos.Row), 10)
	return append(b, c.tail...)
}

// hold reads e's clock once for the events encoded until release: the
// rows of one rows event take one encoding time (reading the clock costs
// more than encoding a small row's numbers).
func (a *arena) hold(e *Encoder) {
	a.nowMs, a.held = e.now().UnixMilli(), true
	a.nowText = strconv.AppendInt(a.nowText[:0], a.nowMs, 10)
}

// release ends hold.
func (a *arena) release() { a.held = false }

// appendNow appends the encoding time e gives now in ms, the digits reused
// while the millisecond is the same.
func (a *arena) appendNow(b []byte, e *Encoder) []byte {
	if a == nil {
		return strconv.AppendInt(b, e.now().UnixMilli(), 10)
	}
	ms := a.nowMs
	if !a.held {
		ms = e.now().UnixMilli()
	}
	if ms != a.nowMs || len(a.nowText) == 0 {
		a.nowMs, a.nowText = ms, strconv.AppendInt(a.nowText[:0], ms, 10)
	}
	return append(b, a.nowText...)
}

// take returns an empty buffer with room for at least size bytes: the free
// part of the current chunk, or of a new one.
func (a *arena) take(size int) []byte {
	if a == nil || size > arenaChunk/4 {
		return make([]byte, 0, size)
	}
	if cap(a.chunk)-len(a.chunk) < size {
		a.chunk = a.newChunk()
	}
	return a.chunk[len(a.chunk):len(a.chunk):cap(a.chunk)]
}

// newChunk is an empty chunk: a recycled one when free has one.
func (a *arena) newChunk() []byte {
	if a.free == nil {
		return make([]byte, 0, arenaChunk)
	}
	var c []byte
	select {
	case c = <-a.free:
		c = c[:0]
	default:
		c = make([]byte, 0, arenaChunk)
	}
	a.used = append(a.used, c)
	return c
}

// seal returns the chunks taken since the last seal and starts the next
// event in a new chunk, so that each chunk holds the events of one batch
// only (with free set).
func (a *arena) seal() [][]byte {
	used := a.used
	a.used, a.chunk = nil, nil
	return used
}

// keep marks buf, filled from take's buffer, as used and returns it with
// its capacity cut to its length; a buffer that outgrew the chunk (append
// moved it) uses none of it.
func (a *arena) keep(buf []byte) []byte {
	if a != nil && len(buf) > 0 {
		if free := a.chunk[len(a.chunk):cap(a.chunk)]; len(free) > 0 && &buf[0] == &free[0] {
			a.chunk = a.chunk[:len(a.chunk)+len(buf)]
		}
	}
	return buf[:len(buf):len(buf)]
}

// debeziumSize is about the size of a debezium value: exact for numbers,
// NULLs and binary values, and for text without characters to escape.
func (e *Encoder) debeziumSize(s *sqlschema.Table, before, after []colValue, pos Position) int {
	n := 256 + len(e.source) + 2*(len(s.Schema)+len(s.Name)) + len(pos.File) + len(pos.GTID)
	for _, img := range [2][]colValue{before, after} {
		for i := range img {
			n += len(s.Columns[i].Name) + 4 + img[i].debeziumSize()
		}
	}
	return n
}

// canalSize is about the size of a canal-json value.
func canalSize(s *sqlschema.Table, before, after []colValue) int {
	n := 256 + 2*(len(s.Schema)+len(s.Name))
	for i := range s.Columns {
		n += 3*len(s.Columns[i].Name) + len(s.Columns[i].ColumnType) + 16
	}
	for _, img := range [2][]colValue{before, after} {
		for i := range img {
			n += len(s.Columns[i].Name) + 6 + img[i].debeziumSize()
		}
	}
	return n
}

// DDL encodes a DDL statement of db (and table, "" for a database DDL) as
// an event with "ddl":"<statement>" (debezium) or isDdl true (canal-json).
// Its key is {"db":…,"table":…}.
func (e *Encoder) DDL(db, table, query string, pos Position) (Event, error) {
	ev := Event{ID: EventID(e.source, pos), DB: db, Table: table, Op: "ddl"}
	key := startObject(nil)
	key.str("db", db)
	key.str("table", table)
	ev.Key = key.end()
	now := e.now().UnixMilli()
	if e.format == FormatCanalJSON {
		o := canalHead(make([]byte, 0, 256), db, table)
		o.raw("pkNames", "null")
		o.bool("isDdl", true)
		o.str("type", "QUERY")
		o.int("es", pos.TsMs)
		o.int("ts", now)
		o.str("sql", query)
		for _, name := range []string{"sqlType", "mysqlType", "data", "old"} {
			o.raw(name, "null")
		}
		ev.Value = o.end()
		return ev, nil
	}
	o := startObject(nil)
	o.str("ddl", query)
	o.str("op", "ddl")
	o.int("ts_ms", now)
	e.debeziumSource(&o, db, table, pos)
	ev.Value = o.end()
	return ev, nil
}

// encodeImage encodes a row image into dst's memory (reused when it is large
// enough; nil stays nil).
func encodeImage(dst []colValue, s *sqlschema.Table, row []any, snapshot bool) ([]colValue, error) {
	if row == nil {
		return nil, nil
	}
	if len(row) != len(s.Columns) {
		return nil, fmt.Errorf("stream: %s: row image has %d of %d columns; the source needs binlog_row_image=FULL, "+
			"or the table changed since its schema was read", s, len(row), len(s.Columns))
	}
	out := dst[:0]
	if cap(out) < len(row) {
		out = make([]colValue, len(row))
	}
	out = out[:len(row)]
	for i, v := range row {
		var err error
		if out[i], err = encodeValue(&s.Columns[i], v, snapshot); err != nil {
			return nil, fmt.Errorf("stream: encode a row of %s: %w", s, err)
		}
	}
	return out, nil
}

// debeziumRow is the payload of Debezium's MySQL connector without the
// schema part: before, after, op, ts_ms, source.
func (e *Encoder) debeziumRow(a *arena, b []byte, s *sqlschema.Table, op string, before, after []colValue, pos Position) []byte {
	o := startObject(b)
	names := a.columnNames(s)
	for _, img := range [2]struct {
		quoted string
		vals   []colValue
	}{{`"before":`, before}, {`"after":`, after}} {
		o.lit(img.quoted)
		if img.vals == nil {
			o.buf = append(o.buf, "null"...)
			continue
		}
		row := startObject(o.buf)
		for i := range s.Columns {
			if names != nil {
				row.lit(names[i])
			} else {
				row.key(s.Columns[i].Name)
			}
			row.buf = img.vals[i].debezium(row.buf)
		}
		o.buf = row.end()
	}
	o.lit(`"op":`)
	o.buf = appendJSONString(o.buf, op)
	o.lit(`"ts_ms":`)
	o.buf = a.appendNow(o.buf, e)
	if a == nil {
		e.debeziumSource(&o, s.Schema, s.Name, pos)
	} else {
		o.lit(`"source":`)
		o.buf = a.appendSource(o.buf, e.source, s.Schema, s.Name, pos)
	}
	return o.end()
}

// debeziumSource writes the "source" block.
func (e *Encoder) debeziumSource(o *jsonObject, db, table string, pos Position) {
	o.lit(`"source":`)
	o.buf = appendSourceBlock(o.buf, e.source, db, table, pos)
}

// appendSourceBlock appends the debezium "source" object.
func appendSourceBlock(b []byte, source, db, table string, pos Position) []byte {
	src := startObject(b)
	src.lit(`"name":`)
	src.buf = appendJSONString(src.buf, source)
	src.lit(`"db":`)
	src.buf = appendJSONString(src.buf, db)
	src.lit(`"table":`)
	src.buf = appendJSONString(src.buf, table)
	src.lit(`"file":`)
	src.buf = appendJSONString(src.buf, pos.File)
	src.lit(`"pos":`)
	src.buf = strconv.AppendUint(src.buf, uint64(pos.Pos), 10)
	src.lit(`"row":`)
	src.buf = strconv.AppendInt(src.buf, int64(pos.Row), 10)
	src.lit(`"gtid":`)
	if pos.GTID == "" {
		src.buf = append(src.buf, "null"...)
	} else {
		src.buf = appendJSONString(src.buf, pos.GTID)
	}
	src.lit(`"server_id":`)
	src.buf = strconv.AppendUint(src.buf, uint64(pos.ServerID), 10)
	src.lit(`"ts_ms":`)
	src.buf = strconv.AppendInt(src.buf, pos.TsMs, 10)
	src.lit(`"snapshot":`)
	src.buf = strconv.AppendBool(src.buf, pos.Snapshot)
	return src.end()
}

// canalHead starts a canal-json object with id, database and table.
func canalHead(b []byte, db, table string) jsonObject {
	o := startObject(b)
	o.int("id", 0)
	o.str("database", db)
	o.str("table", table)
	return o
}

var canalTypes = map[string]string{"c": "INSERT", "r": "INSERT", "u": "UPDATE", "d": "DELETE"}

// canalRow is TiCDC's canal-json with content-compatible=true (the
// official Canal's content): mysqlType holds the full column type and
// "old" only the columns an UPDATE changed.
func (e *Encoder) canalRow(b []byte, s *sqlschema.Table, op string, before, after []colValue, pos Position) []byte {
	now := e.now().UnixMilli()
	data := after
	if op == "d" {
		data = before
	}
	o := canalHead(b, s.Schema, s.Name)
	if s.RowKeyIndex == "" {
		o.raw("pkNames", "null")
	} else {
		o.key("pkNames")
		o.buf = append(o.buf, '[')
		for i, name := range s.KeyColumns() {
			if i > 0 {
				o.buf = append(o.buf, ',')
			}
			o.buf = appendJSONString(o.buf, name)
		}
		o.buf = append(o.buf, ']')
	}
	o.bool("isDdl", false)
	o.str("type", canalTypes[op])
	o.int("es", pos.TsMs)
	o.int("ts", now)
	o.str("sql", "")
	o.key("sqlType")
	types := startObject(o.buf)
	for i := range s.Columns {
		types.int(s.Columns[i].Name, int64(jdbcType(&s.Columns[i], data[i])))
	}
	o.buf = types.end()
	o.key("mysqlType")
	mysqlTypes := startObject(o.buf)
	for i := range s.Columns {
		mysqlTypes.str(s.Columns[i].Name, s.Columns[i].ColumnType)
	}
	o.buf = mysqlTypes.end()
	o.key("data")
	o.buf = appendCanalRow(append(o.buf, '['), s, data, nil)
	o.buf = append(o.buf, ']')
	o.key("old")
	if op == "u" {
		o.buf = appendCanalRow(append(o.buf, '['), s, before, after)
		o.buf = append(o.buf, ']')
	} else {
		o.buf = append(o.buf, "null"...)
	}
	return o.end()
}

// appendCanalRow appends the object of a row image's canal-json texts;
// with changedFrom set, only the columns whose text differs from it.
func appendCanalRow(b []byte, s *sqlschema.Table, vals, changedFrom []colValue) []byte {
	row := startObject(b)
	for i := range s.Columns {
		text, ok := vals[i].canal()
		if changedFrom != nil {
			other, otherOK := changedFrom[i].canal()
			if ok == otherOK && text == other {
				continue
			}
		}
		row.key(s.Columns[i].Name)
		if ok {
			row.buf = appendJSONString(row.buf, text)
		} else {
			row.buf = append(row.buf, "null"...)
		}
	}
	return row.end()
}

// Java SQL type codes (java.sql.Types) canal-json's sqlType uses.
const (
	jdbcBit       = -7
	jdbcTinyint   = -6
	jdbcBigint    = -5
	jdbcChar      = 1
	jdbcDecimal   = 3
	jdbcInteger   = 4
	jdbcSmallint  = 5
	jdbcReal      = 7
	jdbcDouble    = 8
	jdbcVarchar   = 12
	jdbcDate      = 91
	jdbcTime      = 92
	jdbcTimestamp = 93
	jdbcBlob      = 2004
	jdbcClob      = 2005
)

// jdbcType is a column's canal-json sqlType as TiCDC computes it: an
// UNSIGNED integer whose value does not fit the signed Java type takes
// the next wider one.
func jdbcType(c *sqlschema.Column, v colValue) int {
	widen := func(base, wider int, max uint64) int {
		switch {
		case !c.Unsigned:
		case v.kind == valueIsUint:
			if v.num > max {
				return wider
			}
		case v.kind == valueIsNumber:
			if n, err := strconv.ParseUint(v.text, 10, 64); err == nil && n > max {
				return wider
			}
		}
		return base
	}
	switch c.DataType {
	case "tinyint":
		return widen(jdbcTinyint, jdbcSmallint, 127)
	case "smallint":
		return widen(jdbcSmallint, jdbcInteger, 32767)
	case "mediumint":
		return jdbcInteger
	case "int", "integer":
		return widen(jdbcInteger, jdbcBigint, 2147483647)
	case "bigint":
		return widen(jdbcBigint, jdbcDecimal, 9223372036854775807)
	case "float":
		return jdbcReal
	case "double", "real", "double precision":
		return jdbcDouble
	case "decimal", "numeric":
		return jdbcDecimal
	case "char":
		return jdbcChar
	case "tinytext", "text", "mediumtext", "longtext":
		return jdbcClob
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return jdbcBlob
	case "date":
		return jdbcDate
	case "datetime", "timestamp":
		return jdbcTimestamp
	case "time":
		return jdbcTime
	case "enum":
		return jdbcInteger
	case "set", "bit":
		return jdbcBit
	default: // varchar, year, json and others
		return jdbcVarchar
	}
}
