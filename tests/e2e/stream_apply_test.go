package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// What the stream tests do with a sink's events: read them back (the file
// sink's JSON lines in sequence order, or a JetStream stream in stream
// order) and apply them to an empty copy of each source table, so that
// CHECKSUM TABLE can say whether the events reproduce the source.

// sinkEvent is one {"key":…,"value":…} record of a sink, as read back.
type sinkEvent struct {
	// id is the event identity (the NATS Nats-Msg-Id; "" for the file
	// sink, whose lines carry none).
	id    string
	key   map[string]any
	value debeziumValue
}

// debeziumValue is the part of a debezium event value the applier reads.
// Numbers stay json.Number, so no value passes through a float.
type debeziumValue struct {
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

// decodeSinkRecord decodes one sink record (a file line or a NATS body).
func decodeSinkRecord(data []byte) (sinkEvent, error) {
	var rec struct {
		Key   json.RawMessage `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return sinkEvent{}, fmt.Errorf("sink record %.200q: %w", data, err)
	}
	var ev sinkEvent
	for _, part := range []struct {
		raw json.RawMessage
		v   any
	}{{rec.Key, &ev.key}, {rec.Value, &ev.value}} {
		d := json.NewDecoder(bytes.NewReader(part.raw))
		d.UseNumber()
		if err := d.Decode(part.v); err != nil {
			return sinkEvent{}, fmt.Errorf("sink record %.200q: %w", data, err)
		}
	}
	return ev, nil
}

// fileSinkName matches a file sink's files of one stream; group 1 is the
// sequence number.
func fileSinkName(stream string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(stream) + `\.([0-9]{6,})\.jsonl$`)
}

// readFileSink reads every event the file sink of stream wrote into dir, in
// sequence order. A file ending in a torn line (no newline) is an error:
// the sink cuts such a line off before it writes again, so none may be
// left once a stream caught up.
func readFileSink(dir, stream string) ([]sinkEvent, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("file sink of stream %s: %w", stream, err)
	}
	re := fileSinkName(stream)
	type file struct {
		seq  int
		path string
	}
	var files []file
	for _, e := range entries {
		m := re.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		seq, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("file sink name %s: %w", e.Name(), err)
		}
		files = append(files, file{seq, filepath.Join(dir, e.Name())})
	}
	slices.SortFunc(files, func(a, b file) int { return a.seq - b.seq })
	var out []sinkEvent
	for _, f := range files {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return nil, err
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			return nil, fmt.Errorf("%s ends with a torn line (%d bytes without a newline)", f.path, len(data)-bytes.LastIndexByte(data, '\n')-1)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
		for line := 1; sc.Scan(); line++ {
			ev, err := decodeSinkRecord(sc.Bytes())
			if err != nil {
				return nil, fmt.Errorf("%s line %d: %w", f.path, line, err)
			}
			out = append(out, ev)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
	}
	return out, nil
}

// countFileSinkLines counts the lines the file sink of stream wrote into
// dir (cheaper than decoding them).
func countFileSinkLines(dir, stream string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	re := fileSinkName(stream)
	n := 0
	for _, e := range entries {
		if !re.MatchString(e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return 0, err
		}
		n += bytes.Count(data, []byte{'\n'})
	}
	return n, nil
}

// readNATSSink reads every message of the JetStream stream that takes
// subject.> on the server at url, in stream order, each with its
// Nats-Msg-Id.
func readNATSSink(ctx context.Context, url, subject string) ([]sinkEvent, error) {
	nc, err := nats.Connect(url, nats.Name("e2e sink reader"))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	name, err := js.StreamNameBySubject(ctx, subject+".>")
	if err != nil {
		return nil, fmt.Errorf("the JetStream stream of %s.>: %w", subject, err)
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	want := int(info.State.Msgs)
	if want == 0 {
		return nil, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("ordered consumer on %s: %w", name, err)
	}
	out := make([]sinkEvent, 0, want)
	for len(out) < want {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %d of %d messages: %w", name, len(out), want, err)
		}
		batch, err := cons.Fetch(min(1000, want-len(out)), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, fmt.Errorf("fetch from %s: %w", name, err)
		}
		for m := range batch.Messages() {
			ev, err := decodeSinkRecord(m.Data())
			if err != nil {
				return nil, fmt.Errorf("%s message %d: %w", name, len(out)+1, err)
			}
			ev.id = m.Headers().Get(jetstream.MsgIDHeader)
			out = append(out, ev)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, fmt.Errorf("fetch from %s: %w", name, err)
		}
	}
	return out, nil
}

// duplicateIDs returns the identities that occur more than once (and
// whether some event had none).
func duplicateIDs(events []sinkEvent) (dups []string, missing int) {
	seen := make(map[string]int, len(events))
	for _, ev := range events {
		if ev.id == "" {
			missing++
			continue
		}
		seen[ev.id]++
		if seen[ev.id] == 2 {
			dups = append(dups, ev.id)
		}
	}
	return dups, missing
}

// copyColumn is how the applier converts one column's event values.
type copyColumn struct {
	dataType string
}

// arg turns an event value into an argument for the column.
func (c copyColumn) arg(v any) (any, error) {
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

// copyTable is a source table and its empty copy.
type copyTable struct {
	db, table string
	cols      map[string]copyColumn
}

// applier applies debezium events to copies of source tables on another
// MariaDB instance, in the database copyDB.
type applier struct {
	copyDB string
	tables map[string]*copyTable // by "db.table"
	conn   *sql.Conn
}

// newApplier creates copyDB on cp with an empty copy of each of tables
// ("db.table") of src, made with SHOW CREATE TABLE.
func newApplier(ctx context.Context, src *sql.DB, cp *sql.DB, copyDB string, tables []string) (*applier, error) {
	conn, err := cp.Conn(ctx)
	if err != nil {
		return nil, err
	}
	a := &applier{copyDB: copyDB, tables: map[string]*copyTable{}, conn: conn}
	setup := []string{
		// Zero dates and invalid ENUM values as the source may hold them;
		// TIMESTAMP values in events are UTC.
		"SET SESSION sql_mode = ''", "SET SESSION time_zone = '+00:00'",
		"DROP DATABASE IF EXISTS `" + copyDB + "`", "CREATE DATABASE `" + copyDB + "`", "USE `" + copyDB + "`",
	}
	for _, q := range setup {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return nil, errors.Join(fmt.Errorf("copy: %s: %w", q, err), conn.Close())
		}
	}
	for _, name := range tables {
		db, table, _ := strings.Cut(name, ".")
		var n, ddl string
		if err := src.QueryRowContext(ctx, "SHOW CREATE TABLE `"+db+"`.`"+table+"`").Scan(&n, &ddl); err != nil {
			return nil, errors.Join(fmt.Errorf("SHOW CREATE TABLE %s on the source: %w", name, err), conn.Close())
		}
		if _, err := conn.ExecContext(ctx, ddl); err != nil {
			return nil, errors.Join(fmt.Errorf("create the copy of %s: %w", name, err), conn.Close())
		}
		ct := &copyTable{db: db, table: table, cols: map[string]copyColumn{}}
		rows, err := src.QueryContext(ctx, "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", db, table)
		if err != nil {
			return nil, errors.Join(err, conn.Close())
		}
		for rows.Next() {
			var col, typ string
			if err := rows.Scan(&col, &typ); err != nil {
				return nil, errors.Join(err, rows.Close(), conn.Close())
			}
			ct.cols[col] = copyColumn{dataType: strings.ToLower(typ)}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, errors.Join(err, conn.Close())
		}
		a.tables[name] = ct
	}
	return a, nil
}

// floatColumns are the table's FLOAT columns, sorted.
func (ct *copyTable) floatColumns() []string {
	var out []string
	for c, col := range ct.cols {
		if col.dataType == "float" {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// selectNonFloat is a SELECT of every column but the FLOAT ones of the
// table in db ordered by orderBy.
func (ct *copyTable) selectNonFloat(db, orderBy string) string {
	cols := make([]string, 0, len(ct.cols))
	for c, col := range ct.cols {
		if col.dataType != "float" {
			cols = append(cols, "`"+c+"`")
		}
	}
	slices.Sort(cols)
	return "SELECT " + strings.Join(cols, ", ") + " FROM `" + db + "`.`" + ct.table + "` ORDER BY " + orderBy
}

// selectAll is a SELECT of every column of the table in db ordered by
// orderBy, FLOAT columns widened to DOUBLE so that rows whose stored
// floats differ do not print alike (MariaDB prints a FLOAT with 6 digits).
func (ct *copyTable) selectAll(db, orderBy string) string {
	cols := make([]string, 0, len(ct.cols))
	for c := range ct.cols {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	for i, c := range cols {
		if ct.cols[c].dataType == "float" {
			cols[i] = "CAST(`" + c + "` AS DOUBLE) AS `" + c + "`"
		} else {
			cols[i] = "`" + c + "`"
		}
	}
	return "SELECT " + strings.Join(cols, ", ") + " FROM `" + db + "`.`" + ct.table + "` ORDER BY " + orderBy
}

// close releases the applier's connection.
func (a *applier) close() error { return a.conn.Close() }

// applyStats counts what apply did.
type applyStats struct {
	applied, ddl, other int
	ops                 map[string]int
}

func (s applyStats) String() string {
	return fmt.Sprintf("%d row events applied %v, %d DDL events and %d events of other tables skipped", s.applied, s.ops, s.ddl, s.other)
}

// apply applies events in order: c/r/u as REPLACE INTO with the after
// image (u first deletes the row by its before key, which an update may
// change), d as DELETE by the key of the before image; DDL events and
// tables without a copy are skipped. Each 500 events are one transaction.
func (a *applier) apply(ctx context.Context, events []sinkEvent) (applyStats, error) {
	st := applyStats{ops: map[string]int{}}
	tx, err := a.conn.BeginTx(ctx, nil)
	if err != nil {
		return st, err
	}
	for i, ev := range events {
		v := ev.value
		if v.DDL != "" || v.Op == "ddl" {
			st.ddl++
			continue
		}
		ct := a.tables[v.Source.DB+"."+v.Source.Table]
		if ct == nil {
			st.other++
			continue
		}
		if err := a.applyOne(ctx, tx, ct, ev); err != nil {
			return st, errors.Join(fmt.Errorf("event %d (%s %s.%s at %s:%d row %d, key %v): %w",
				i+1, v.Op, v.Source.DB, v.Source.Table, v.Source.File, v.Source.Pos, v.Source.Row, ev.key, err), tx.Rollback())
		}
		st.applied++
		st.ops[v.Op]++
		if st.applied%500 == 0 {
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

func (a *applier) applyOne(ctx context.Context, tx *sql.Tx, ct *copyTable, ev sinkEvent) error {
	v := ev.value
	switch v.Op {
	case "c", "r", "u":
		if v.After == nil {
			return errors.New("no after image")
		}
		if v.Op == "u" {
			if err := a.deleteByKey(ctx, tx, ct, ev.key, v.Before); err != nil {
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
			cols[i] = "`" + c + "`"
		}
		q := "REPLACE INTO `" + ct.table + "` (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(marks, ", ") + ")"
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
		return nil
	case "d":
		if v.Before == nil {
			return errors.New("no before image")
		}
		return a.deleteByKey(ctx, tx, ct, ev.key, v.Before)
	default:
		return fmt.Errorf("unknown op %q", v.Op)
	}
}

// deleteByKey deletes the row whose key columns (the event key's names)
// have the values of image.
func (a *applier) deleteByKey(ctx context.Context, tx *sql.Tx, ct *copyTable, key, image map[string]any) error {
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
		conds[i], args[i] = "`"+k+"` = ?", arg
	}
	q := "DELETE FROM `" + ct.table + "` WHERE " + strings.Join(conds, " AND ")
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

// copyPool opens a pool to the copy instance with client-side
// interpolation of arguments (one round trip per statement).
func copyPool(t *testing.T, in *mariadbtest.Instance) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(in.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close the copy pool: %v", err)
		}
	})
	return db
}

// tableChecksums returns CHECKSUM TABLE of each "db.table" of tables, read
// in db under the database of each name, or under inDB when it is set.
func tableChecksums(ctx context.Context, db *sql.DB, inDB string, tables []string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range tables {
		q := name
		if inDB != "" {
			_, table, _ := strings.Cut(name, ".")
			q = inDB + "." + table
		}
		var n string
		var sum sql.NullString
		if err := db.QueryRowContext(ctx, "CHECKSUM TABLE "+q).Scan(&n, &sum); err != nil {
			return nil, fmt.Errorf("CHECKSUM TABLE %s: %w", q, err)
		}
		if !sum.Valid {
			return nil, fmt.Errorf("CHECKSUM TABLE %s: NULL (no such table)", q)
		}
		out[name] = sum.String
	}
	return out, nil
}
