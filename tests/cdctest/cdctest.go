// Package cdctest reads change events back from a sink's records
// ({"key":…,"value":…} with a Debezium value) and applies them to empty
// copies of the source's tables, so that a test can say with CHECKSUM TABLE
// whether the events reproduce the source. The stream package's tests and
// the end-to-end stream tests share it. It is test support: it opens no
// connection of its own and trusts its input.
package cdctest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Event is one {"key":…,"value":…} record of a sink, as read back.
type Event struct {
	// ID is the event identity (the NATS Nats-Msg-Id; "" for the file
	// sink, whose lines carry none); the reader sets it.
	ID    string
	Key   map[string]any
	Value Value
}

// Value is the part of a debezium event value the Applier reads.
// Numbers stay json.Number, so no value passes through a float.
type Value struct {
	Before map[string]any `json:"before"`
	After  map[string]any `json:"after"`
	Op     string         `json:"op"`
	DDL    string         `json:"ddl"`
	Source struct {
		DB       string `json:"db"`
		Table    string `json:"table"`
		File     string `json:"file"`
		Pos      uint32 `json:"pos"`
		Row      int    `json:"row"`
		Snapshot bool   `json:"snapshot"`
	} `json:"source"`
}

// Decode decodes one sink record (a file line or a NATS body).
func Decode(data []byte) (Event, error) {
	var rec struct {
		Key   json.RawMessage `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return Event{}, fmt.Errorf("sink record %.200q: %w", data, err)
	}
	var ev Event
	for _, part := range []struct {
		raw json.RawMessage
		v   any
	}{{rec.Key, &ev.Key}, {rec.Value, &ev.Value}} {
		d := json.NewDecoder(bytes.NewReader(part.raw))
		d.UseNumber()
		if err := d.Decode(part.v); err != nil {
			return Event{}, fmt.Errorf("sink record %.200q: %w", data, err)
		}
	}
	return ev, nil
}

// column is how the Applier converts one column's event values.
type column struct {
	dataType string
}

// arg turns an event value into an argument for the column.
func (c column) arg(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch c.dataType {
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s value %v is not a base64 string", c.dataType, v)
		}
		return base64.StdEncoding.DecodeString(s)
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year", "bit":
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%s value %v is not a JSON number", c.dataType, v)
		}
		if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
			return i, nil
		}
		u, err := strconv.ParseUint(n.String(), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s value %s: %w", c.dataType, n, err)
		}
		return u, nil
	case "float", "double", "real":
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%s value %v is not a JSON number", c.dataType, v)
		}
		bits := 64
		if c.dataType == "float" {
			// The float32 the text stands for, as the double that holds it
			// exactly, which MariaDB stores as that float32. The text as a
			// double may not be: 3.4028235e+38, the largest float32's
			// shortest text, is above it and out of FLOAT's range.
			bits = 32
		}
		return strconv.ParseFloat(n.String(), bits)
	default: // DECIMAL, temporal, text, ENUM, SET, JSON: strings
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s value %v is not a string", c.dataType, v)
		}
		return s, nil
	}
}

// Table is a source table and its empty copy.
type Table struct {
	DB, Name string
	cols     map[string]column
}

// Applier applies debezium events to copies of source tables on another
// MariaDB instance, in the database copyDB.
type Applier struct {
	copyDB string
	tables map[string]*Table // by "db.table"
	conn   *sql.Conn
}

// NewApplier creates copyDB on cp with an empty copy of each of tables
// ("db.table") of src, made with SHOW CREATE TABLE.
func NewApplier(ctx context.Context, src *sql.DB, cp *sql.DB, copyDB string, tables []string) (*Applier, error) {
	conn, err := cp.Conn(ctx)
	if err != nil {
		return nil, err
	}
	a := &Applier{copyDB: copyDB, tables: map[string]*Table{}, conn: conn}
	setup := []string{
		// Zero dates and invalid ENUM values as the source may hold them;
		// TIMESTAMP values in events are UTC.
		"SET SESSION sql_mode = ''", "SET SESSION time_zone = '+00:00'",
		"DROP DATABASE IF EXISTS " + sqlschema.QuoteName(copyDB), "CREATE DATABASE " + sqlschema.QuoteName(copyDB), "USE " + sqlschema.QuoteName(copyDB),
	}
	for _, q := range setup {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return nil, errors.Join(fmt.Errorf("copy: %s: %w", q, err), conn.Close())
		}
	}
	for _, name := range tables {
		db, table, _ := strings.Cut(name, ".")
		var n, ddl string
		if err := src.QueryRowContext(ctx, "SHOW CREATE TABLE "+sqlschema.QuoteTable(db, table)).Scan(&n, &ddl); err != nil {
			return nil, errors.Join(fmt.Errorf("SHOW CREATE TABLE %s on the source: %w", name, err), conn.Close())
		}
		if _, err := conn.ExecContext(ctx, ddl); err != nil {
			return nil, errors.Join(fmt.Errorf("create the copy of %s: %w", name, err), conn.Close())
		}
		ct := &Table{DB: db, Name: table, cols: map[string]column{}}
		model, err := sqlschema.ReadTable(ctx, src, db, table)
		if err != nil {
			return nil, errors.Join(err, conn.Close())
		}
		for _, col := range model.Columns {
			ct.cols[col.Name] = column{dataType: col.DataType}
		}
		a.tables[name] = ct
	}
	return a, nil
}

// FloatColumns are the table's FLOAT columns, sorted.
func (ct *Table) FloatColumns() []string {
	var out []string
	for c, col := range ct.cols {
		if col.dataType == "float" {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// SelectNonFloat is a SELECT of every column but the FLOAT ones of the
// table in db ordered by orderBy.
func (ct *Table) SelectNonFloat(db, orderBy string) string {
	cols := make([]string, 0, len(ct.cols))
	for c, col := range ct.cols {
		if col.dataType != "float" {
			cols = append(cols, sqlschema.QuoteName(c))
		}
	}
	slices.Sort(cols)
	return "SELECT " + strings.Join(cols, ", ") + " FROM `" + db + "`.`" + ct.Name + "` ORDER BY " + orderBy
}

// SelectAll is a SELECT of every column of the table in db ordered by
// orderBy, FLOAT columns widened to DOUBLE so that rows whose stored
// floats differ do not print alike (MariaDB prints a FLOAT with 6 digits).
func (ct *Table) SelectAll(db, orderBy string) string {
	cols := make([]string, 0, len(ct.cols))
	for c := range ct.cols {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	for i, c := range cols {
		if ct.cols[c].dataType == "float" {
			cols[i] = "CAST(" + sqlschema.QuoteName(c) + " AS DOUBLE) AS " + sqlschema.QuoteName(c)
		} else {
			cols[i] = sqlschema.QuoteName(c)
		}
	}
	return "SELECT " + strings.Join(cols, ", ") + " FROM `" + db + "`.`" + ct.Name + "` ORDER BY " + orderBy
}

// Table returns the copy of "db.table", nil when there is none.
func (a *Applier) Table(name string) *Table { return a.tables[name] }

// Close releases the Applier's connection.
func (a *Applier) Close() error { return a.conn.Close() }

// Stats counts what apply did.
type Stats struct {
	Applied, DDL, Other int
	Ops                 map[string]int
}

func (s Stats) String() string {
	return fmt.Sprintf("%d row events applied %v, %d DDL events and %d events of other tables skipped", s.Applied, s.Ops, s.DDL, s.Other)
}

// apply applies events in order: c/r/u as REPLACE INTO with the after
// image (u first deletes the row by its before key, which an update may
// change), d as DELETE by the key of the before image; DDL events and
// tables without a copy are skipped. Each 500 events are one transaction.
func (a *Applier) Apply(ctx context.Context, events []Event) (Stats, error) {
	st := Stats{Ops: map[string]int{}}
	tx, err := a.conn.BeginTx(ctx, nil)
	if err != nil {
		return st, err
	}
	for i, ev := range events {
		v := ev.Value
		if v.DDL != "" || v.Op == "ddl" {
			st.DDL++
			continue
		}
		ct := a.tables[v.Source.DB+"."+v.Source.Table]
		if ct == nil {
			st.Other++
			continue
		}
		if err := a.applyOne(ctx, tx, ct, ev); err != nil {
			return st, errors.Join(fmt.Errorf("event %d (%s %s.%s at %s:%d row %d, key %v): %w",
				i+1, v.Op, v.Source.DB, v.Source.Table, v.Source.File, v.Source.Pos, v.Source.Row, ev.Key, err), tx.Rollback())
		}
		st.Applied++
		st.Ops[v.Op]++
		if st.Applied%500 == 0 {
			if err := tx.Commit(); err != nil {
				return st, err
			}
			if tx, err = a.conn.BeginTx(ctx, nil); err != nil {
				return st, err
			}
		}
	}
	return st, tx.Commit()
}

func (a *Applier) applyOne(ctx context.Context, tx *sql.Tx, ct *Table, ev Event) error {
	v := ev.Value
	switch v.Op {
	case "c", "r", "u":
		if v.After == nil {
			return errors.New("no after image")
		}
		if v.Op == "u" {
			if err := a.deleteByKey(ctx, tx, ct, ev.Key, v.Before); err != nil {
				return err
			}
		}
		cols := make([]string, 0, len(v.After))
		for c := range v.After {
			cols = append(cols, c)
		}
		slices.Sort(cols)
		args := make([]any, len(cols))
		marks := make([]string, len(cols))
		for i, c := range cols {
			col, ok := ct.cols[c]
			if !ok {
				return fmt.Errorf("column %q is not in the source table", c)
			}
			arg, err := col.arg(v.After[c])
			if err != nil {
				return fmt.Errorf("column %s: %w", c, err)
			}
			args[i], marks[i] = arg, "?"
			if col.dataType == "bit" {
				// An integer into BIT is its bits; a string would be bytes.
				marks[i] = "CAST(? AS UNSIGNED)"
			}
			cols[i] = sqlschema.QuoteName(c)
		}
		q := "REPLACE INTO `" + ct.Name + "` (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(marks, ", ") + ")"
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
		return nil
	case "d":
		if v.Before == nil {
			return errors.New("no before image")
		}
		return a.deleteByKey(ctx, tx, ct, ev.Key, v.Before)
	default:
		return fmt.Errorf("unknown op %q", v.Op)
	}
}

// deleteByKey deletes the row whose key columns (the event key's names)
// have the values of image.
func (a *Applier) deleteByKey(ctx context.Context, tx *sql.Tx, ct *Table, key, image map[string]any) error {
	if len(key) == 0 {
		return errors.New("the event has no key")
	}
	if image == nil {
		return errors.New("no before image")
	}
	names := make([]string, 0, len(key))
	for k := range key {
		names = append(names, k)
	}
	slices.Sort(names)
	conds := make([]string, len(names))
	args := make([]any, len(names))
	for i, k := range names {
		col, ok := ct.cols[k]
		if !ok {
			return fmt.Errorf("key column %q is not in the source table", k)
		}
		arg, err := col.arg(image[k])
		if err != nil {
			return fmt.Errorf("key column %s: %w", k, err)
		}
		conds[i], args[i] = sqlschema.QuoteName(k)+" = ?", arg
	}
	q := "DELETE FROM `" + ct.Name + "` WHERE " + strings.Join(conds, " AND ")
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

// Identity is ev's event identity as far as its record tells it: the
// sink's ID when it carries one (NATS, Kafka), else
// <file>:<pos>:<row>:<op> from the value's source block (op tells the two
// halves of a key-changing update apart, whose identities differ by ":d").
func Identity(ev Event) string {
	if ev.ID != "" {
		return ev.ID
	}
	s := ev.Value.Source
	return s.File + ":" + strconv.FormatUint(uint64(s.Pos), 10) + ":" + strconv.Itoa(s.Row) + ":" + ev.Value.Op
}

// Deduper drops replays as a consumer that dedupes on identity does, and
// checks that every replay carries the same key and content (before,
// after, op, DDL and source block; not the processing time ts_ms) as the
// identity's first delivery. It keeps a 64-bit digest of each identity
// and of its content, not the events, so that it follows streams of
// millions of events.
type Deduper struct {
	seen map[uint64]uint64 // identity digest → content digest
	// Replayed counts deliveries of an identity already delivered.
	Replayed int
}

// NewDeduper returns an empty Deduper.
func NewDeduper() *Deduper { return &Deduper{seen: map[uint64]uint64{}} }

// Unique is the number of distinct identities added.
func (d *Deduper) Unique() int { return len(d.seen) }

// Add reports whether ev is its identity's first delivery; a replay whose
// content differs from the first delivery's is an error naming it.
func (d *Deduper) Add(ev Event) (first bool, err error) {
	id := Identity(ev)
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	idSum := h.Sum64()
	h.Reset()
	content, err := json.Marshal(struct {
		Key   map[string]any
		Value Value
	}{ev.Key, ev.Value})
	if err != nil {
		return false, fmt.Errorf("event %s: %w", id, err)
	}
	_, _ = h.Write(content)
	sum := h.Sum64()
	was, seen := d.seen[idSum]
	if !seen {
		d.seen[idSum] = sum
		return true, nil
	}
	d.Replayed++
	if was != sum {
		return false, fmt.Errorf("a replay of identity %s differs from its first delivery: now %s", id, content)
	}
	return false, nil
}
