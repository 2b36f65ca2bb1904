package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/cdctest"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// DM's integration case expression_filter (tiflow dm/tests/expression_filter),
// reproduced: the same tables, statements, rules and checks of which rows
// reach the target, for a subtask in mode all (whose dump, as in DM, is not
// filtered) and for a stream with the same rules under its filters (a
// filtered row gives no event). Two additions: table t8 with a
// delete-value-expr rule covers deletes, which DM's case has none of, and
// t9 shows the dump copying a row its rule matches.

// exprPrepare2 is DM's data/db1.prepare2.sql.
var exprPrepare2 = []string{
	"DROP DATABASE IF EXISTS expr_filter",
	"CREATE DATABASE expr_filter",
	"USE expr_filter",
	"CREATE TABLE t2 (id INT PRIMARY KEY, should_skip INT, c INT, gen INT AS (id + 1))",
	"CREATE TABLE t6 (id INT, name VARCHAR(20), msg TEXT, PRIMARY KEY (id)) CHARACTER SET latin1",
	"INSERT INTO t6 (id, name, msg) VALUES (0, 'Müller…', 'Müller…')",
	"CREATE TABLE t7 (a BIGINT PRIMARY KEY, r VARCHAR(10), s INT)",
	"INSERT INTO t7 VALUES (1, 'a', 2)",
	// Added here: a row its table's rule matches, which the dump copies.
	"CREATE TABLE t9 (id INT PRIMARY KEY, v INT)",
	"INSERT INTO t9 VALUES (1, 1)",
}

// exprIncrement2 is DM's data/db1.increment2.sql, with t8 (deletes) added
// before the final flush.
var exprIncrement2 = []string{
	"USE expr_filter",
	// A generated column in the table.
	"INSERT INTO t2 (id, should_skip, c) VALUES (1, 0, 1), (2, 1, 2)",
	// The table changes.
	"ALTER TABLE t2 ADD COLUMN d INT",
	"INSERT INTO t2 (id, should_skip, c) VALUES (3, 0, 3), (4, 1, 4)",
	// The filter's column goes: the rule filters nothing.
	"ALTER TABLE t2 DROP COLUMN c",
	"INSERT INTO t2 (id, should_skip) VALUES (5, 0), (6, 0)",
	// It comes back as a generated column: the rule filters again.
	"ALTER TABLE t2 ADD COLUMN c INT AS (id + 1)",
	"INSERT INTO t2 (id, should_skip, d) VALUES (7, 1, 100), (8, 0, 200), (10, 2, 300)",
	"UPDATE t2 SET should_skip = 0 WHERE id = 10",
	// A table created later.
	"CREATE TABLE t3 (id INT PRIMARY KEY, should_skip INT, ts DATETIME)",
	"INSERT INTO t3 VALUES (1, 0, '1999-01-01'), (2, 1, '2040-01-01')",
	"CREATE TABLE t4 (id INT PRIMARY KEY, should_skip INT, a DOUBLE, b DOUBLE, c DOUBLE)",
	"INSERT INTO t4 VALUES (1, 0, 1, 2, 3), (2, 1, 3, 4, 5)",
	// Updates.
	"CREATE TABLE t5 (id INT PRIMARY KEY, should_skip INT, c INT)",
	"INSERT INTO t5 VALUES (1, 0, 99), (2, 0, 101), (3, 0, 1)",
	"UPDATE t5 SET should_skip = 1, c = 110 WHERE id = 1",
	"UPDATE t5 SET should_skip = 1, c = 20 WHERE id = 2",
	"UPDATE t5 SET should_skip = 1, c = 2 WHERE c = 1",
	// update-old-value-expr AND update-new-value-expr: this row's update
	// is replicated (should_skip ends 0 on the target).
	"INSERT INTO t5 VALUES (4, 1, 1)",
	"UPDATE t5 SET should_skip = 0, c = 3 WHERE c = 1",
	"INSERT INTO t6 (id, name, msg) VALUES (1, 'Müller…', 'Müller…'), (2, 'X Æ A-12', 'X Æ A-12')",
	"ALTER TABLE t6 ADD COLUMN name2 VARCHAR(20) CHARACTER SET latin1 DEFAULT 'Müller…'",
	// tiflow issue 7774.
	"UPDATE t7 SET s = s + 1 WHERE a = 1",
	// Added here: deletes.
	"CREATE TABLE t8 (id INT PRIMARY KEY, c INT)",
	"INSERT INTO t8 VALUES (1, 1), (2, 2), (3, 3)",
	"DELETE FROM t8",
	"INSERT INTO t9 VALUES (2, 2)",
	// DM's flush trigger; here: everything before it is applied once it is.
	"ALTER TABLE t5 ADD COLUMN dummy INT",
}

// exprRules2 are the rules of DM's conf/dm-task2.yaml (and keep_even, for
// t8), in the shape of a task file's expression-filter and a stream's
// filters.
const exprRules2 = `
  even_c: {schema: expr_filter, table: t2, insert-value-expr: "c % 2 = 0"}
  always_false: {schema: expr_filter, table: t2, update-old-value-expr: "1 = 0", update-new-value-expr: "1 = 0"}
  future_date: {schema: expr_filter, table: t3, insert-value-expr: "ts > NOW()"}
  pythagorean: {schema: expr_filter, table: t4, insert-value-expr: "a*a + b*b = c*c"}
  update_old_lt_100: {schema: expr_filter, table: t5, update-old-value-expr: "c > 100"}
  update_new_lt_100: {schema: expr_filter, table: t5, update-new-value-expr: "c > 100"}
  update_old_and_new: {schema: expr_filter, table: t5, update-old-value-expr: "c = 1", update-new-value-expr: "c = 2"}
  only_muller: {schema: expr_filter, table: t6, insert-value-expr: "name != 'Müller…'"}
  e02: {schema: expr_filter, table: t7, update-new-value-expr: "r = 'a'"}
  keep_even: {schema: expr_filter, table: t8, delete-value-expr: "c % 2 = 0"}
  positive: {schema: expr_filter, table: t9, insert-value-expr: "v > 0"}
`

// exprPrepare1 is DM's data/db1.prepare.sql: one column of every type.
var exprPrepare1 = []string{
	"DROP DATABASE IF EXISTS expr_filter",
	"CREATE DATABASE expr_filter",
	"USE expr_filter",
	`CREATE TABLE t1 (id INT NOT NULL AUTO_INCREMENT, should_skip INT, c_null INT,
	c_bit BIT(8), c_tinyint TINYINT(5) UNSIGNED, c_smallint SMALLINT(6), c_mediumint MEDIUMINT(7), c_int INT(8),
	c_bigint BIGINT(9) UNSIGNED, c_decimal DECIMAL(7,2), c_float FLOAT(10), c_double DOUBLE,
	c_date DATE, c_datetime DATETIME(3), c_timestamp TIMESTAMP(4), c_time TIME(5), c_year YEAR,
	c_char CHAR(4), c_varchar NATIONAL VARCHAR(255), c_binary BINARY(1), c_varbinary VARBINARY(4),
	c_tinyblob TINYBLOB, c_tinytext TINYTEXT, c_blob BLOB(20), c_text TEXT(10), c_mediumblob MEDIUMBLOB,
	c_mediumtext MEDIUMTEXT, c_longblob LONGBLOB, c_longtext LONGTEXT, c_enum ENUM('a', 'b', 'c'),
	c_set SET('a', 'b', 'c'), c_json JSON, PRIMARY KEY (id))`,
}

// exprIncrement1 is DM's data/db1.increment.sql: per column, a row that
// stays (should_skip 0) and a row its rule filters (should_skip 1).
var exprIncrement1 = []string{
	"USE expr_filter",
	"INSERT INTO t1 (should_skip, c_null) VALUES (0, NULL), (1, 123)",
	"INSERT INTO t1 (should_skip, c_bit) VALUES (0, b'1010'), (1, b'1111')",
	"INSERT INTO t1 (should_skip, c_tinyint) VALUES (0, 5), (1, 25)",
	"INSERT INTO t1 (should_skip, c_smallint) VALUES (0, 6), (1, 26)",
	"INSERT INTO t1 (should_skip, c_mediumint) VALUES (0, 7), (1, 27)",
	"INSERT INTO t1 (should_skip, c_int) VALUES (0, 8), (1, 28)",
	"INSERT INTO t1 (should_skip, c_bigint) VALUES (0, 9), (1, 29)",
	"INSERT INTO t1 (should_skip, c_decimal) VALUES (0, 10.01), (1, 30.02)",
	"INSERT INTO t1 (should_skip, c_float) VALUES (0, 11.12), (1, 31.324)",
	"INSERT INTO t1 (should_skip, c_double) VALUES (0, 12.32), (1, 32.4334)",
	"INSERT INTO t1 (should_skip, c_date) VALUES (0, '1995-03-07'), (1, '2021-06-22')",
	"INSERT INTO t1 (should_skip, c_datetime) VALUES (0, '1000-01-01 12:34:56.789'), (1, '2021-01-01 12:34:56.789')",
	"SET time_zone = '+08:00'",
	"INSERT INTO t1 (should_skip, c_timestamp) VALUES (0, '2020-01-01 12:34:56.1234'), (1, '2021-01-01 12:34:56.5678')",
	"INSERT INTO t1 (should_skip, c_time) VALUES (0, '-838:59:50.12345'), (1, '-838:58:50.12345')",
	"INSERT INTO t1 (should_skip, c_year) VALUES (0, 2020), (1, 2021)",
	"INSERT INTO t1 (should_skip, c_char) VALUES (0, '1234'), (1, '2234')",
	"INSERT INTO t1 (should_skip, c_varchar) VALUES (0, '3234'), (1, '4234')",
	"INSERT INTO t1 (should_skip, c_binary) VALUES (0, 'a'), (1, 'b')",
	"INSERT INTO t1 (should_skip, c_varbinary) VALUES (0, 'c'), (1, 'd')",
	"INSERT INTO t1 (should_skip, c_tinyblob) VALUES (0, 'a'), (1, 'b')",
	"INSERT INTO t1 (should_skip, c_tinytext) VALUES (0, 'c'), (1, 'd')",
	"INSERT INTO t1 (should_skip, c_blob) VALUES (0, 'qwer'), (1, 'asdf')",
	"INSERT INTO t1 (should_skip, c_text) VALUES (0, 'qwe'), (1, 'asd')",
	"INSERT INTO t1 (should_skip, c_mediumblob) VALUES (0, 'qwer'), (1, 'asdf')",
	"INSERT INTO t1 (should_skip, c_mediumtext) VALUES (0, 'qwer'), (1, 'asdf')",
	"INSERT INTO t1 (should_skip, c_longblob) VALUES (0, 'qwer'), (1, 'asdf')",
	"INSERT INTO t1 (should_skip, c_longtext) VALUES (0, 'qwer'), (1, 'asdf')",
	"INSERT INTO t1 (should_skip, c_enum) VALUES (0, 'a'), (1, 'b')",
	"INSERT INTO t1 (should_skip, c_set) VALUES (0, 'a'), (1, 'b,c')",
	`INSERT INTO t1 (should_skip, c_json) VALUES (0, '{"id": 1}'), (1, '{"id": 2}')`,
	"ALTER TABLE t1 ADD COLUMN dummy INT",
}

// exprRules1 are the rules of DM's conf/dm-task.yaml.
const exprRules1 = `
  c_null: {schema: expr_filter, table: t1, insert-value-expr: "c_null IS NOT NULL"}
  bit: {schema: expr_filter, table: t1, insert-value-expr: "c_bit = b'1111'"}
  tinyint: {schema: expr_filter, table: t1, insert-value-expr: "c_tinyint >= 25"}
  smallint: {schema: expr_filter, table: t1, insert-value-expr: "c_smallint >= 25"}
  mediumint: {schema: expr_filter, table: t1, insert-value-expr: "c_mediumint >= 25"}
  int: {schema: expr_filter, table: t1, insert-value-expr: "c_int >= 25"}
  bigint: {schema: expr_filter, table: t1, insert-value-expr: "c_bigint >= 25"}
  decimal: {schema: expr_filter, table: t1, insert-value-expr: "c_decimal >= 25"}
  float: {schema: expr_filter, table: t1, insert-value-expr: "c_float >= 25"}
  double: {schema: expr_filter, table: t1, insert-value-expr: "c_double >= 25"}
  date: {schema: expr_filter, table: t1, insert-value-expr: "c_date = '2021-06-22'"}
  datetime: {schema: expr_filter, table: t1, insert-value-expr: "c_datetime = '2021-01-01 12:34:56.789'"}
  timestamp: {schema: expr_filter, table: t1, insert-value-expr: "c_timestamp = '2021-01-01 12:34:56.5678+08:00'"}
  time: {schema: expr_filter, table: t1, insert-value-expr: "c_time = '-838:58:50.12345'"}
  year: {schema: expr_filter, table: t1, insert-value-expr: "c_year = '2021'"}
  char: {schema: expr_filter, table: t1, insert-value-expr: "c_char = '2234'"}
  varchar: {schema: expr_filter, table: t1, insert-value-expr: "c_varchar = '4234'"}
  binary: {schema: expr_filter, table: t1, insert-value-expr: "c_binary = 'b'"}
  varbinary: {schema: expr_filter, table: t1, insert-value-expr: "c_varbinary = 'd'"}
  tinyblob: {schema: expr_filter, table: t1, insert-value-expr: "c_tinyblob = 'b'"}
  tinytext: {schema: expr_filter, table: t1, insert-value-expr: "c_tinytext = 'd'"}
  blob: {schema: expr_filter, table: t1, insert-value-expr: "c_blob = 'asdf'"}
  text: {schema: expr_filter, table: t1, insert-value-expr: "c_text = 'asd'"}
  mediumblob: {schema: expr_filter, table: t1, insert-value-expr: "c_mediumblob = 'asdf'"}
  mediumtext: {schema: expr_filter, table: t1, insert-value-expr: "c_mediumtext = 'asdf'"}
  longblob: {schema: expr_filter, table: t1, insert-value-expr: "c_longblob = 'asdf'"}
  longtext: {schema: expr_filter, table: t1, insert-value-expr: "c_longtext = 'asdf'"}
  enum: {schema: expr_filter, table: t1, insert-value-expr: "c_enum = 'b'"}
  set: {schema: expr_filter, table: t1, insert-value-expr: "c_set = 'b,c'"}
  json: {schema: expr_filter, table: t1, insert-value-expr: 'c_json->"$.id" = 2'}
`

// ruleNames are the names of a rules block, in order.
func ruleNames(rules string) []string {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(rules), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), ":")
		out = append(out, name)
	}
	return out
}

// exprTask writes a task file in mode all of database expr_filter whose
// instance uses every rule of rules.
func (f *fullData) exprTask(name, rules string) string {
	return writeFile(f.t, name+".yaml", fmt.Sprintf(`name: %s
task-mode: all
target-database: {host: 127.0.0.1, port: %d, user: root, password: ""}
mysql-instances:
  - source-id: %s
    black-white-list: instance
    expression-filters: [%s]
    syncer-config-name: quick
expression-filter:%s
black-white-list:
  instance: {do-dbs: [expr_filter]}
syncers:
  quick: {worker-count: 4, batch: 50, checkpoint-flush-interval: 1}
`, name, f.tgt.Port(), fdSource, strings.Join(ruleNames(rules), ", "), rules))
}

// exprStream creates a stream of database expr_filter with rules as its
// filters, writing to a file sink in dir, from the source's current
// position.
func (f *fullData) exprStream(name, dir, rules string) {
	f.c.ok("stream", "create", writeFile(f.t, name+".yaml", fmt.Sprintf(`name: %s
source-id: %s
block-allow-list: {do-dbs: [expr_filter]}
snapshot: false
format: debezium
sink: {type: file, file: {dir: %q, rotate-size: 1MiB}}
filters:%s
`, name, fdSource, dir, rules)))
}

// exprCount is SELECT COUNT(*) of a query on db.
func exprCount(t *testing.T, f *fullData, target bool, q string) int {
	t.Helper()
	db := f.srcDB
	if target {
		db = f.tgtDB
	}
	var n int
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// waitTargetColumn waits until the target's table has column col: the
// sync unit applied the DDL that adds it, and everything before it.
func (f *fullData) waitTargetColumn(task, table, col string) fdDoc {
	f.t.Helper()
	var last fdDoc
	testutil.Eventually(f.t, 2*time.Minute, task+" applies the ALTER adding "+table+"."+col, func() error {
		d, err := getSubtask[fdDoc](f.w, task)
		if err != nil {
			return err
		}
		if len(d.Errors) > 0 {
			f.t.Fatalf("subtask failed: %v", d)
		}
		last = d
		var n int
		if err := f.tgtDB.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'expr_filter' "+
			"AND TABLE_NAME = ? AND COLUMN_NAME = ?", table, col).Scan(&n); err != nil || n == 0 {
			return fmt.Errorf("target has no %s.%s yet (%v): %v", table, col, err, d)
		}
		return nil
	})
	return last
}

// exprEvents are a stream's row events by "table op id" (id the key's
// first value), with the DDL events left out.
func exprEvents(t *testing.T, events []cdctest.Event) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, ev := range events {
		if ev.Value.DDL != "" {
			continue
		}
		var id any
		for _, k := range []string{"id", "a"} {
			if v, ok := ev.Key[k]; ok {
				id = v
			}
		}
		out[fmt.Sprintf("%s %s %v", ev.Value.Source.Table, ev.Value.Op, id)]++
	}
	return out
}

// TestExpressionFilterDMCase runs DM's case; each script runs on one
// connection of a pool of its own (its SET time_zone stays there), as DM's
// run_sql_file runs one client per file.
func TestExpressionFilterDMCase(t *testing.T) {
	f := startFullData(t, mariadbtest.Options{FastCommit: true}, "", "")
	e := &streamEnv{replication: f.replication}

	// DM's complex_behaviour: dm-task2.yaml.
	execSession(t, f.src.DB(t), exprPrepare2...)
	f.c.ok("task", "start", f.exprTask("expr2", exprRules2))
	f.waitSubtask("expr2", time.Minute, "the task reaches its sync unit", func(d fdDoc) bool {
		if len(d.Errors) > 0 {
			t.Fatalf("subtask failed: %v", d)
		}
		return d.Stage == "Running" && d.Unit == "Sync"
	})
	dir2 := t.TempDir()
	f.exprStream("expr2s", dir2, exprRules2)
	e.waitStream("expr2s", time.Minute, "streaming", streamDoc.streaming)
	// A stream reads the rows of a table with the table's current columns
	// (docs/streams.md): rows with c must be delivered before c goes, so
	// the statements run in two parts, the stream caught up in between.
	cut := slices.Index(exprIncrement2, "ALTER TABLE t2 DROP COLUMN c")
	execSession(t, f.src.DB(t), exprIncrement2[:cut]...)
	e.waitCaughtUp(2*time.Minute, "expr2s")
	execSession(t, f.src.DB(t), append([]string{"USE expr_filter"}, exprIncrement2[cut:]...)...)
	d := f.waitTargetColumn("expr2", "t5", "dummy")

	for _, c := range []struct {
		q    string
		want int
	}{
		{"SELECT COUNT(*) FROM expr_filter.t2", 6},
		{"SELECT COUNT(*) FROM expr_filter.t2 WHERE should_skip = 0", 6},
		{"SELECT COUNT(*) FROM expr_filter.t2 WHERE should_skip = 1", 0},
		{"SELECT COUNT(*) FROM expr_filter.t3", 1},
		{"SELECT COUNT(*) FROM expr_filter.t3 WHERE should_skip = 1", 0},
		{"SELECT COUNT(*) FROM expr_filter.t4", 1},
		{"SELECT COUNT(*) FROM expr_filter.t4 WHERE should_skip = 1", 0},
		{"SELECT COUNT(*) FROM expr_filter.t5", 4},
		{"SELECT COUNT(*) FROM expr_filter.t5 WHERE should_skip = 1", 0},
		{"SELECT COUNT(*) FROM expr_filter.t6 WHERE name = 'Müller…' AND msg = 'Müller…' AND name2 = 'Müller…'", 2},
		{"SELECT COUNT(*) FROM expr_filter.t6 WHERE name != 'Müller…'", 0},
		{"SELECT COUNT(*) FROM expr_filter.t7 WHERE r = 'a' AND s = 2", 1},
		{"SELECT COUNT(*) FROM expr_filter.t7 WHERE r = 'a' AND s = 3", 0},
		{"SELECT COUNT(*) FROM expr_filter.t8", 1},
		{"SELECT COUNT(*) FROM expr_filter.t8 WHERE id = 2", 1},
		{"SELECT COUNT(*) FROM expr_filter.t9 WHERE id = 1", 1}, // dumped
		{"SELECT COUNT(*) FROM expr_filter.t9", 1},
	} {
		if got := exprCount(t, f, true, c.q); got != c.want {
			t.Errorf("target: %s = %d, want %d", c.q, got, c.want)
		}
	}
	// DM's log counts: 6 inserts and 4 updates filtered (and here t9's
	// insert and t8's delete).
	if got := [3]float64{d.num("filtered-inserts"), d.num("filtered-updates"), d.num("filtered-deletes")}; got != [3]float64{7, 4, 1} {
		t.Errorf("filtered inserts, updates, deletes = %v, want [7 4 1]; status %v", got, d)
	}

	// The stream's events: the filtered rows give none.
	e.waitCaughtUp(2*time.Minute, "expr2s")
	got := exprEvents(t, e.readFile(dir2, "expr2s"))
	want := map[string]int{}
	for _, k := range []string{
		"t2 c 1", "t2 c 3", "t2 c 5", "t2 c 6", "t2 c 8", "t2 c 10", "t2 u 10",
		"t3 c 1", "t4 c 1",
		"t5 c 1", "t5 c 2", "t5 c 3", "t5 c 4", "t5 u 4",
		"t6 c 1",
		"t8 c 1", "t8 c 2", "t8 c 3", "t8 d 1", "t8 d 3",
	} {
		want[k] = 1
	}
	if !mapsEqual(got, want) {
		t.Errorf("stream events by table, op and key:\n got %v\nwant %v", sortedKeys(got), sortedKeys(want))
	}
	f.c.ok("task", "stop", "expr2")
	f.c.ok("stream", "stop", "expr2s")

	// DM's second run: dm-task.yaml, every column type.
	execSession(t, f.tgtDB, "DROP DATABASE IF EXISTS expr_filter")
	execSession(t, f.src.DB(t), exprPrepare1...)
	f.c.ok("task", "start", f.exprTask("expr1", exprRules1))
	f.waitSubtask("expr1", time.Minute, "the task reaches its sync unit", func(d fdDoc) bool {
		if len(d.Errors) > 0 {
			t.Fatalf("subtask failed: %v", d)
		}
		return d.Stage == "Running" && d.Unit == "Sync"
	})
	dir1 := t.TempDir()
	f.exprStream("expr1s", dir1, exprRules1)
	e.waitStream("expr1s", time.Minute, "streaming", streamDoc.streaming)
	execSession(t, f.src.DB(t), exprIncrement1...)
	d = f.waitTargetColumn("expr1", "t1", "dummy")
	if got := exprCount(t, f, false, "SELECT COUNT(*) FROM expr_filter.t1"); got != 60 {
		t.Errorf("source has %d rows, want 60", got)
	}
	if got := exprCount(t, f, true, "SELECT COUNT(*) FROM expr_filter.t1"); got != 30 {
		t.Errorf("target has %d rows, want 30", got)
	}
	if got := exprCount(t, f, true, "SELECT COUNT(*) FROM expr_filter.t1 WHERE should_skip = 1"); got != 0 {
		t.Errorf("target has %d rows with should_skip = 1, want 0", got)
	}
	if n := d.num("filtered-inserts"); n != 30 {
		t.Errorf("filtered inserts = %v, want 30; status %v", n, d)
	}
	if err := f.compare("t1", "SELECT * FROM expr_filter.t1 WHERE should_skip = 0 ORDER BY id",
		"SELECT * FROM expr_filter.t1 ORDER BY id"); err != nil {
		t.Error(err)
	}
	e.waitCaughtUp(2*time.Minute, "expr1s")
	events := e.readFile(dir1, "expr1s")
	var kept, bad []string
	for _, ev := range events {
		if ev.Value.DDL != "" {
			continue
		}
		id := fmt.Sprint(ev.Value.After["id"])
		kept = append(kept, id)
		if ev.Value.Op != "c" || fmt.Sprint(ev.Value.After["should_skip"]) != "0" {
			bad = append(bad, fmt.Sprintf("%s %v", ev.Value.Op, ev.Value.After))
		}
	}
	if len(kept) != 30 || len(bad) > 0 {
		t.Errorf("stream gave %d row events (ids %v), want 30; %d of rows the filters match, the first: %v",
			len(kept), kept, len(bad), bad[:min(3, len(bad))])
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s×%d", k, v))
	}
	slices.Sort(out)
	return out
}
