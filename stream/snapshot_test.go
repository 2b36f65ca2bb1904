package stream

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gmysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// sqlLeaks are goroutines of database/sql pools closed in Cleanup that may
// still be winding down.
var sqlLeaks = goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener")

// sourcePool opens a pool to inst as the worker does: parseTime off. It is
// closed in Cleanup.
func sourcePool(t *testing.T, inst *mariadbtest.Instance, params map[string]string) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(inst.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ParseTime = false
	cfg.Params = params
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// reference reads query's rows as the snapshot should see them: text,
// TIMESTAMP in UTC, NULL as nil.
func reference(t *testing.T, db *sql.DB, query string) [][]any {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]any
	for rows.Next() {
		raw := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range raw {
			ptrs[i] = &raw[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]any, len(cols))
		for i, v := range raw {
			if v != nil {
				row[i] = slices.Clone([]byte(v))
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// chunkCall is what one emit call received.
type chunkCall struct {
	rows []SnapshotRow
	done TableName
}

// collect runs Snapshot and records every emit call.
func collect(t *testing.T, db *sql.DB, tables []TableName, keys map[TableName][]string, progress map[string]TableProgress, chunk int) ([]chunkCall, binlog.Location) {
	t.Helper()
	var calls []chunkCall
	loc, err := Snapshot(t.Context(), db, tables, keys, progress, chunk, func(rows []SnapshotRow, done TableName) error {
		calls = append(calls, chunkCall{rows, done})
		return nil
	}, WithSnapshotLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	return calls, loc
}

// rowsOf returns the values of the rows of table in calls, in order.
func rowsOf(calls []chunkCall, table TableName) [][]any {
	var out [][]any
	for _, c := range calls {
		for _, r := range c.rows {
			if r.Table == table {
				out = append(out, r.Values)
			}
		}
	}
	return out
}

// checkChunks checks the shape of one table's emit calls: every chunk at
// most chunk rows, all but the last full, done on the last call alone.
func checkChunks(t *testing.T, calls []chunkCall, table TableName, chunk, rows int) {
	t.Helper()
	var mine []chunkCall
	for _, c := range calls {
		if c.done == table || (len(c.rows) > 0 && c.rows[0].Table == table) {
			mine = append(mine, c)
		}
	}
	want := rows/chunk + 1 // the last call has fewer than chunk rows, maybe none
	if len(mine) != want {
		t.Errorf("%s: %d emit calls, want %d for %d rows in chunks of %d", table, len(mine), want, rows, chunk)
		return
	}
	for i, c := range mine {
		last := i == len(mine)-1
		if (c.done == table) != last {
			t.Errorf("%s: call %d of %d has done %v", table, i+1, len(mine), c.done)
		}
		if !last && len(c.rows) != chunk || last && len(c.rows) != rows%chunk {
			t.Errorf("%s: call %d of %d has %d rows", table, i+1, len(mine), len(c.rows))
		}
	}
}

func equalRows(t *testing.T, what string, got, want [][]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d", what, len(got), len(want))
		return
	}
	for i := range want {
		if fmt.Sprintf("%q", got[i]) != fmt.Sprintf("%q", want[i]) {
			t.Errorf("%s: row %d is %q, want %q", what, i, got[i], want[i])
			return
		}
	}
}

func TestSnapshot(t *testing.T) {
	noLeaks(t, sqlLeaks)
	src := mariadbtest.StartSource(t)
	db := sourcePool(t, src, nil)
	ref := sourcePool(t, src, map[string]string{"time_zone": "'+00:00'"})
	for _, q := range []string{
		"CREATE DATABASE snap",
		// A composite key of an integer and case-insensitive text: keyset
		// pagination must compare as the collation orders.
		"CREATE TABLE snap.composite (a INT NOT NULL, b VARCHAR(20) COLLATE utf8mb4_general_ci NOT NULL, note TEXT, ts TIMESTAMP(3) NULL, PRIMARY KEY (a, b))",
		"INSERT INTO snap.composite SELECT seq % 4, CONCAT(ELT(1 + seq % 6, 'a', 'B', 'c', 'D', 'x', 'Ü\\\\''`'), seq DIV 6), IF(seq % 5 = 0, NULL, CONCAT('n', seq)), '2026-01-02 03:04:05.678' FROM snap.seq_1_to_40",
		// Binary, big unsigned and decimal keys, and an odd name.
		"CREATE TABLE snap.`we``ird` (k VARBINARY(8) NOT NULL, u BIGINT UNSIGNED NOT NULL, d DECIMAL(20,5) NOT NULL, blobby BLOB, PRIMARY KEY (k, u, d))",
		"INSERT INTO snap.`we``ird` VALUES (X'00', 18446744073709551615, -1.5, X'00ff'), (X'00', 18446744073709551614, 2, NULL), (X'ff', 1, 0, ''), (X'7f00', 9007199254740993, 1.00001, X'01'), (X'7f00', 9007199254740992, 1.00001, X'02'), (X'', 0, 0, NULL)",
		// Temporal key.
		"CREATE TABLE snap.dated (at DATETIME(6) NOT NULL PRIMARY KEY, v INT)",
		"INSERT INTO snap.dated SELECT '2026-01-01' + INTERVAL seq SECOND + INTERVAL seq MICROSECOND, seq FROM snap.seq_1_to_25",
		// No key: duplicates and NULLs; a nullable unique key; a FLOAT key.
		"CREATE TABLE snap.nokey (a INT, b VARCHAR(10))",
		"INSERT INTO snap.nokey VALUES (1, 'x'), (1, 'x'), (NULL, 'y'), (2, NULL), (0, 'z'), (1, 'x'), (3, 'q')",
		"CREATE TABLE snap.floaty (f FLOAT NOT NULL PRIMARY KEY, v INT)",
		"INSERT INTO snap.floaty VALUES (0.1, 1), (0.2, 2), (1e-7, 3), (3.25, 4)",
		"CREATE TABLE snap.empty (id INT PRIMARY KEY)",
		"CREATE VIEW snap.view1 AS SELECT 1",
	} {
		src.Exec(t, q)
	}
	composite := TableName{"snap", "composite"}
	weird := TableName{"snap", "we`ird"}
	dated := TableName{"snap", "dated"}
	nokey := TableName{"snap", "nokey"}
	floaty := TableName{"snap", "floaty"}
	empty := TableName{"snap", "empty"}
	keys := map[TableName][]string{
		composite: {"a", "b"}, weird: {"k", "u", "d"}, dated: {"at"}, floaty: {"f"}, empty: {"id"},
	}

	t.Run("ListTables", func(t *testing.T) {
		got, err := ListTables(t.Context(), db, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []TableName{composite, dated, empty, floaty, nokey, weird} // sorted; no view, no system schema
		if !slices.Equal(got, want) {
			t.Errorf("ListTables: %v, want %v", got, want)
		}
		got, err = ListTables(t.Context(), db, func(db, table string) bool { return strings.HasPrefix(table, "d") || table == "empty" })
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, []TableName{dated, empty}) {
			t.Errorf("ListTables with a filter: %v", got)
		}
	})

	t.Run("keyset pagination", func(t *testing.T) {
		for _, chunk := range []int{1, 3, 7, 40, 1000} {
			calls, _ := collect(t, db, []TableName{composite, weird, dated, empty}, keys, nil, chunk)
			for _, tc := range []struct {
				table TableName
				order string
				rows  int
			}{
				{composite, "a, b", 40},
				{weird, "k, u, d", 6},
				{dated, "at", 25},
				{empty, "id", 0},
			} {
				what := fmt.Sprintf("%s in chunks of %d", tc.table, chunk)
				equalRows(t, what, rowsOf(calls, tc.table), reference(t, ref, "SELECT * FROM "+tc.table.quoted()+" ORDER BY "+tc.order))
				checkChunks(t, calls, tc.table, chunk, tc.rows)
			}
			// Each row's cursor is its key as text.
			for _, c := range calls {
				for _, r := range c.rows {
					if r.Table == composite && (len(r.Cursor) != 2 || r.Cursor[0] != string(r.Values[0].([]byte)) || r.Cursor[1] != string(r.Values[1].([]byte))) {
						t.Fatalf("cursor %q of row %q", r.Cursor, r.Values)
					}
				}
			}
		}
	})

	t.Run("keyset reads an index range", func(t *testing.T) {
		src.Exec(t, "CREATE TABLE snap.big (a INT NOT NULL, b VARCHAR(20) NOT NULL, c INT NOT NULL, PRIMARY KEY (a, b, c))")
		src.Exec(t, "INSERT INTO snap.big SELECT seq % 50, CONCAT('x', seq % 7), seq FROM snap.seq_1_to_5000")
		src.Exec(t, "ANALYZE TABLE snap.big")
		tbl, err := sqlschema.ReadTable(t.Context(), db, "snap", "big")
		if err != nil {
			t.Fatal(err)
		}
		k, why := keyOf(tbl, []string{"a", "b", "c"}, []string{"a", "b", "c"})
		if why != "" {
			t.Fatal(why)
		}
		where, err := keysetWhere(k, []string{"25", "x3", "2000"})
		if err != nil {
			t.Fatal(err)
		}
		var id, selType, table, typ, possible, key, keyLen, ref, rows, extra sql.NullString
		err = db.QueryRowContext(t.Context(), "EXPLAIN SELECT * FROM snap.big"+where+" ORDER BY a, b, c LIMIT 100").
			Scan(&id, &selType, &table, &typ, &possible, &key, &keyLen, &ref, &rows, &extra)
		if err != nil {
			t.Fatal(err)
		}
		if typ.String != "range" || key.String != "PRIMARY" {
			t.Errorf("the chunk query%s reads %s of %s, want a range of PRIMARY", where, typ.String, key.String)
		}
	})

	t.Run("resume from a cursor", func(t *testing.T) {
		// Stop after the second chunk of composite, as a crash would.
		errStop := errors.New("stop")
		var seen []SnapshotRow
		_, err := Snapshot(t.Context(), db, []TableName{composite}, keys, nil, 7, func(rows []SnapshotRow, _ TableName) error {
			seen = append(seen, rows...)
			if len(seen) == 14 {
				return errStop
			}
			return nil
		})
		if !errors.Is(err, errStop) {
			t.Fatalf("Snapshot returned %v, want emit's error", err)
		}
		progress := map[string]TableProgress{
			composite.String(): {Cursor: seen[13].Cursor, Rows: 14},
			dated.String():     {Done: true, Rows: 25},
		}
		calls, _ := collect(t, db, []TableName{composite, dated}, keys, progress, 7)
		rest := rowsOf(calls, composite)
		all := reference(t, ref, "SELECT * FROM snap.composite ORDER BY a, b")
		equalRows(t, "rows after the cursor", rest, all[14:])
		if len(rowsOf(calls, dated)) != 0 {
			t.Errorf("a table listed done was read again")
		}
		checkChunks(t, calls, composite, 7, 26)

		// A cursor that does not fit the key reads the table from its start.
		calls, _ = collect(t, db, []TableName{composite}, keys, map[string]TableProgress{composite.String(): {Cursor: []string{"1"}}}, 100)
		equalRows(t, "rows with a cursor of the wrong size", rowsOf(calls, composite), all)
	})

	t.Run("tables without a usable key", func(t *testing.T) {
		calls, _ := collect(t, db, []TableName{nokey, floaty}, keys, map[string]TableProgress{floaty.String(): {Cursor: []string{"0.1"}}}, 3)
		equalRows(t, "nokey", rowsOf(calls, nokey), reference(t, ref, "SELECT * FROM snap.nokey ORDER BY 1, 2"))
		equalRows(t, "floaty", rowsOf(calls, floaty), reference(t, ref, "SELECT CAST(f AS DOUBLE) AS f, v FROM snap.floaty ORDER BY 1, 2"))
		checkChunks(t, calls, nokey, 3, 7)
		checkChunks(t, calls, floaty, 3, 4)
		for _, c := range calls {
			for _, r := range c.rows {
				if r.Cursor != nil {
					t.Fatalf("row %q of %s read without a key has cursor %q", r.Values, r.Table, r.Cursor)
				}
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		_, err := Snapshot(t.Context(), db, []TableName{{"snap", "missing"}}, nil, nil, 10, func([]SnapshotRow, TableName) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "snap.missing") {
			t.Errorf("missing table: %v, want an error naming it", err)
		}
		_, err = Snapshot(t.Context(), db, []TableName{composite}, map[TableName][]string{composite: {"nope"}}, nil, 10, func([]SnapshotRow, TableName) error { return nil })
		if err != nil {
			t.Errorf("a key column the table lacks: %v, want the table read without a key", err)
		}
		// A pool that parses times cannot give their text.
		_, err = Snapshot(t.Context(), src.DB(t), []TableName{dated}, keys, nil, 10, func([]SnapshotRow, TableName) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "parseTime") {
			t.Errorf("pool with parseTime: %v, want an error saying to turn it off", err)
		}
		// The snapshot's connection is closed, not returned to the pool
		// with its session settings: in a pool of one connection, the next
		// query gets a new one.
		one := sourcePool(t, src, nil)
		one.SetMaxOpenConns(1)
		var before, after, tz string
		if err := one.QueryRowContext(t.Context(), "SELECT CONNECTION_ID()").Scan(&before); err != nil {
			t.Fatal(err)
		}
		collect(t, one, []TableName{dated}, keys, nil, 10)
		if err := one.QueryRowContext(t.Context(), "SELECT CONNECTION_ID(), @@session.time_zone").Scan(&after, &tz); err != nil {
			t.Fatal(err)
		}
		if after == before || tz != "SYSTEM" {
			t.Errorf("after a snapshot the pool's connection is %s (time_zone %s), was %s: want a new one with time_zone SYSTEM", after, tz, before)
		}
	})
}

// rowChange is one row event of the binlog.
type rowChange struct {
	op            string // insert, update, delete
	before, after []string
	pos           binlog.Location
}

// readChanges reads the row changes of table from the binlog of src, from
// from to end.
func readChanges(t *testing.T, src *mariadbtest.Instance, table TableName, from, end binlog.Location) []rowChange {
	t.Helper()
	syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: 9000 + src.ServerID(), Flavor: gmysql.MariaDBFlavor, Host: src.Host(), Port: uint16(src.Port()), User: mariadbtest.RootUser,
		UseDecimal: true, DisableRetrySync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	defer syncer.Close()
	streamer, err := syncer.StartSync(gmysql.Position{Name: from.Name, Pos: from.Pos})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	text := func(row []any) []string {
		out := make([]string, len(row))
		for i, v := range row {
			out[i] = fmt.Sprint(v)
		}
		return out
	}
	var out []rowChange
	file := from.Name
	for {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			t.Fatalf("read binlog from %s towards %s: %v", from, end, err)
		}
		switch e := ev.Event.(type) {
		case *replication.RotateEvent:
			file = string(e.NextLogName)
		case *replication.RowsEvent:
			if string(e.Table.Schema) != table.DB || string(e.Table.Table) != table.Table {
				break
			}
			at := binlog.Location{Name: file, Pos: ev.Header.LogPos}
			switch ev.Header.EventType {
			case replication.WRITE_ROWS_EVENTv1, replication.WRITE_ROWS_EVENTv2:
				for _, r := range e.Rows {
					out = append(out, rowChange{op: "insert", after: text(r), pos: at})
				}
			case replication.UPDATE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv2:
				for i := 0; i+1 < len(e.Rows); i += 2 {
					out = append(out, rowChange{op: "update", before: text(e.Rows[i]), after: text(e.Rows[i+1]), pos: at})
				}
			case replication.DELETE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv2:
				for _, r := range e.Rows {
					out = append(out, rowChange{op: "delete", before: text(r), pos: at})
				}
			}
		}
		if ev.Header.LogPos != 0 && (binlog.Location{Name: file, Pos: ev.Header.LogPos}).Compare(end) >= 0 {
			return out
		}
	}
}

// masterLocation is the source's current binlog end.
func masterLocation(t *testing.T, src *mariadbtest.Instance) binlog.Location {
	file, pos, _ := src.MasterStatus(t)
	return binlog.Location{Name: file, Pos: pos}
}

// applyChanges applies changes to rows (by the first column, the key),
// checking that each change finds the row as its before image says: an
// insert of a row the snapshot already has, or an update or delete whose
// before image differs from the row, means the snapshot and the location
// disagree.
func applyChanges(t *testing.T, rows map[string][]string, changes []rowChange) {
	t.Helper()
	for _, c := range changes {
		if c.before != nil {
			have, ok := rows[c.before[0]]
			if !ok || !slices.Equal(have, c.before) {
				t.Fatalf("%s at %s of row %q: the snapshot plus the changes before it have %q", c.op, c.pos, c.before, have)
			}
			delete(rows, c.before[0])
		}
		if c.after != nil {
			if have, ok := rows[c.after[0]]; ok {
				t.Fatalf("%s at %s of row %q: the row %q is there already", c.op, c.pos, c.after, have)
			}
			rows[c.after[0]] = c.after
		}
	}
}

// textRows turns snapshot or reference rows into text, keyed by the
// first column.
func textRows(rows [][]any) map[string][]string {
	out := make(map[string][]string, len(rows))
	for _, r := range rows {
		s := make([]string, len(r))
		for i, v := range r {
			s[i] = string(v.([]byte))
		}
		out[s[0]] = s
	}
	return out
}

// snapshotByID snapshots table, keyed by id, in chunks of chunk and
// returns its rows' values and location; first, when set, runs when the
// first chunk has been read.
func snapshotByID(t *testing.T, db *sql.DB, table TableName, chunk int, first func()) ([][]any, binlog.Location) {
	t.Helper()
	var got [][]any
	loc, err := Snapshot(t.Context(), db, []TableName{table}, map[TableName][]string{table: {"id"}}, nil, chunk, func(rows []SnapshotRow, _ TableName) error {
		if first != nil {
			first()
			first = nil
		}
		for _, r := range rows {
			got = append(got, r.Values)
		}
		return nil
	}, WithSnapshotLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	return got, loc
}

// TestSnapshotConsistentLocation: rows changed after the snapshot began are
// not in it, and their changes are exactly the binlog's after the location.
func TestSnapshotConsistentLocation(t *testing.T) {
	noLeaks(t, sqlLeaks)
	src := mariadbtest.StartSource(t)
	db := sourcePool(t, src, nil)
	src.Exec(t, "CREATE DATABASE snap")
	src.Exec(t, "CREATE TABLE snap.t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(32) NOT NULL)")
	src.Exec(t, "INSERT INTO snap.t SELECT seq, seq, CONCAT('s', seq) FROM snap.seq_1_to_10")
	table := TableName{"snap", "t"}
	before := masterLocation(t, src)

	got, loc := snapshotByID(t, db, table, 3, func() { // the snapshot has begun: change rows it has not read yet
		src.Exec(t, "INSERT INTO snap.t VALUES (100, 100, 'new')")
		src.Exec(t, "UPDATE snap.t SET v = -9, s = 'changed' WHERE id = 9")
		src.Exec(t, "DELETE FROM snap.t WHERE id = 8")
	})
	end := masterLocation(t, src)
	if loc.Compare(before) != 0 {
		t.Errorf("snapshot location %s, want %s, the binlog end when it began", loc, before)
	}
	if loc.GTID != src.QueryString(t, "SELECT BINLOG_GTID_POS(?, ?)", before.Name, before.Pos) || loc.GTID == "" {
		t.Errorf("snapshot GTID %q, want BINLOG_GTID_POS of %s", loc.GTID, before)
	}
	rows := textRows(got)
	if len(rows) != 10 || rows["9"][2] != "s9" || rows["8"] == nil || rows["100"] != nil {
		t.Fatalf("snapshot rows %v: want ids 1-10 as they were when it began", rows)
	}
	changes := readChanges(t, src, table, loc, end)
	var ops []string
	for _, c := range changes {
		ops = append(ops, c.op)
	}
	if !slices.Equal(ops, []string{"insert", "update", "delete"}) {
		t.Fatalf("changes after the location: %v, want the insert, update and delete made during the snapshot", changes)
	}
	applyChanges(t, rows, changes)
	equalRows(t, "snapshot plus changes", sortedRows(rows), reference(t, db, "SELECT * FROM snap.t ORDER BY id"))
}

// sortedRows returns rows ordered by their numeric key, as [][]any of
// []byte, to compare with reference rows.
func sortedRows(rows map[string][]string) [][]any {
	keys := make([]int, 0, len(rows))
	for k := range rows {
		n, err := strconv.Atoi(k)
		if err != nil {
			panic(fmt.Sprintf("key %q is not a number", k))
		}
		keys = append(keys, n)
	}
	slices.Sort(keys)
	out := make([][]any, len(keys))
	for i, k := range keys {
		row := rows[strconv.Itoa(k)]
		out[i] = make([]any, len(row))
		for j, v := range row {
			out[i][j] = []byte(v)
		}
	}
	return out
}

// TestSnapshotConcurrentWrites snapshots 20k rows while writers insert,
// update and delete rows all along: the snapshot's rows plus the binlog's
// changes after its location, applied in order, must give the final table,
// each change finding the row as its before image says.
func TestSnapshotConcurrentWrites(t *testing.T) {
	noLeaks(t, sqlLeaks)
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true, FastCommit: true})
	db := sourcePool(t, src, nil)
	writers := sourcePool(t, src, nil)
	const initial = 20000
	src.Exec(t, "CREATE DATABASE snap")
	src.Exec(t, "CREATE TABLE snap.t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(32) NOT NULL)")
	src.Exec(t, fmt.Sprintf("INSERT INTO snap.t SELECT seq, seq, CONCAT('s', seq) FROM snap.seq_1_to_%d", initial))
	table := TableName{"snap", "t"}

	var (
		writes atomic.Int64
		nextID atomic.Int64
		wg     sync.WaitGroup
		errs   = make(chan error, 4)
	)
	nextID.Store(initial)
	// Writers stop at a flag, not by a cancelled context: a statement cut
	// off by its context may still commit on the server afterwards, after
	// the binlog end the test reads up to.
	var stopping atomic.Bool
	ctx := t.Context()
	t.Cleanup(func() { stopping.Store(true); wg.Wait() }) // on a failure before the end
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for !stopping.Load() {
				id := 1 + rng.Int64N(nextID.Load())
				var err error
				switch rng.IntN(4) {
				case 0:
					_, err = writers.ExecContext(ctx, "INSERT INTO snap.t VALUES (?, ?, ?)", nextID.Add(1), w, fmt.Sprintf("w%d", w))
				case 1:
					_, err = writers.ExecContext(ctx, "DELETE FROM snap.t WHERE id = ?", id)
				default: // updates in a transaction of two rows
					var tx *sql.Tx
					if tx, err = writers.BeginTx(ctx, nil); err != nil {
						break
					}
					_, err = tx.ExecContext(ctx, "UPDATE snap.t SET v = v + 1, s = ? WHERE id = ?", fmt.Sprintf("u%d", w), id)
					if err == nil {
						_, err = tx.ExecContext(ctx, "UPDATE snap.t SET v = v - 1 WHERE id = ?", 1+rng.Int64N(nextID.Load()))
					}
					if err == nil {
						err = tx.Commit()
					} else {
						_ = tx.Rollback()
					}
				}
				if err != nil && !isDeadlock(err) {
					errs <- err
					return
				}
				writes.Add(1)
			}
		}()
	}
	testutil.WaitFor(t, time.Minute, "writers under way", func() bool { return writes.Load() >= 200 })

	began := time.Now()
	atStart := writes.Load()
	got, loc := snapshotByID(t, db, table, 1000, nil)
	during := writes.Load() - atStart
	took := time.Since(began)
	// Go on writing a little after the snapshot, then stop.
	target := writes.Load() + 200
	testutil.WaitFor(t, time.Minute, "writes after the snapshot", func() bool { return writes.Load() >= target })
	stopping.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("writer: %v", err)
	}
	if during == 0 {
		t.Fatalf("no write happened while the snapshot ran (%v): the test proves nothing", took)
	}
	end := masterLocation(t, src)

	rows := textRows(got)
	if len(rows) != len(got) {
		t.Fatalf("the snapshot emitted %d rows for %d keys: a row twice", len(got), len(rows))
	}
	changes := readChanges(t, src, table, loc, end)
	applyChanges(t, rows, changes)
	final := reference(t, db, "SELECT * FROM snap.t ORDER BY id")
	equalRows(t, "snapshot plus changes", sortedRows(rows), final)
	t.Logf("snapshot of %d rows at %s in %v with %d writes during it; %d changes after it; final table %d rows",
		len(got), loc, took.Round(time.Millisecond), during, len(changes), len(final))
}

// isDeadlock reports a deadlock or lock wait timeout between the writers.
func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}
