package syncer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// TestFiltersAndRoutes: ignored tables never reach the target, two shards
// merge into one routed table, and a filtered delete leaves rows in place.
func TestFiltersAndRoutes(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	cfg, src := e.configs(t, "routes")
	cfg.BAList = config.BAList{
		DoDBs:        []string{"shard_*", "app"},
		IgnoreTables: []config.TableRef{{DBName: "app", TblName: "ignored*"}},
	}
	cfg.RouteRules = []config.RouteRule{
		{SchemaPattern: "shard_*", TablePattern: "orders_*", TargetSchema: "merged", TargetTable: "orders"},
	}
	cfg.FilterRules = []config.FilterRule{
		{SchemaPattern: "app", TablePattern: "keep", Events: []string{"delete"}, Action: config.FilterIgnore},
	}
	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)
	defer r.Stop(t)

	mariadbtest.MustExec(t, e.srcDB,
		"CREATE DATABASE shard_1", "CREATE DATABASE shard_2", "CREATE DATABASE app", "CREATE DATABASE other",
		"CREATE TABLE shard_1.orders_1 (id INT PRIMARY KEY, v VARCHAR(10))",
		"CREATE TABLE shard_2.orders_2 (id INT PRIMARY KEY, v VARCHAR(10))",
		"CREATE TABLE app.keep (id INT PRIMARY KEY, v VARCHAR(10))",
		"CREATE TABLE app.ignored_1 (id INT PRIMARY KEY)",
		"CREATE TABLE other.t (id INT PRIMARY KEY)",
		"INSERT INTO shard_1.orders_1 VALUES (1, 'a'), (2, 'b')",
		"INSERT INTO shard_2.orders_2 VALUES (101, 'c'), (102, 'd')",
		"UPDATE shard_2.orders_2 SET v = 'dd' WHERE id = 102",
		"DELETE FROM shard_1.orders_1 WHERE id = 2",
		"INSERT INTO app.keep VALUES (1, 'k1'), (2, 'k2')",
		"INSERT INTO app.ignored_1 VALUES (1)",
		"INSERT INTO other.t VALUES (1)",
		"DELETE FROM app.keep WHERE id = 1",
		"UPDATE app.keep SET v = 'k2b' WHERE id = 2",
		// A marker row to wait for: everything before it was read.
		"CREATE TABLE app.marker (id INT PRIMARY KEY)", "INSERT INTO app.marker VALUES (1)",
	)
	e.waitEqual(t, same("app.marker"), r)
	mariadbtest.MustExec(t, e.srcDB, "CREATE TABLE app.want_merged (id INT PRIMARY KEY, v VARCHAR(10))",
		"INSERT INTO app.want_merged SELECT * FROM shard_1.orders_1 UNION ALL SELECT * FROM shard_2.orders_2",
		"CREATE TABLE app.want_keep (id INT PRIMARY KEY, v VARCHAR(10))",
		"INSERT INTO app.want_keep VALUES (1, 'k1'), (2, 'k2b')")
	e.waitEqual(t, map[string]string{"app.want_merged": "merged.orders", "app.want_keep": "app.keep"}, r)

	var n int
	if err := e.dstDB.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE " +
		"(TABLE_SCHEMA = 'app' AND TABLE_NAME LIKE 'ignored%') OR TABLE_SCHEMA IN ('other', 'shard_1', 'shard_2')").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d ignored or routed-away tables exist on the target", n)
	}
}

// TestFilterErrorPauses: an event matched by a filter rule whose action is
// Error ends the run with a non-resumable error naming the rule, schema,
// table and event; rows before it were applied, the event itself was not.
// The rule here comes from the source's filters (applied to every subtask).
func TestFilterErrorPauses(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	cfg, src := e.configs(t, "filtererr")
	cfg.BAList = config.BAList{DoDBs: []string{"app"}}
	src.Filters = []config.FilterRule{
		{Name: "no-drop", SchemaPattern: "app", Events: []string{"drop table"}, Action: config.FilterError},
	}
	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)

	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY)", "INSERT INTO app.t VALUES (1), (2)",
		"DROP TABLE app.t")
	res := r.Wait(t, 30*time.Second)
	if !res.Failed() || res.Resumable() {
		t.Fatalf("result %+v, want a non-resumable error", res)
	}
	got := res.Errors[0]
	if got.Code != CodeFilterError {
		t.Errorf("code %q, want %q", got.Code, CodeFilterError)
	}
	for _, want := range []string{"no-drop", "`app`.`t`", `"drop table"`} {
		if !strings.Contains(got.Message, want) {
			t.Errorf("message %q does not name %s", got.Message, want)
		}
	}
	var n int
	if err := e.dstDB.QueryRow("SELECT COUNT(*) FROM app.t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("target app.t: %d rows, %v; want the table kept with 2 rows", n, err)
	}
}

// TestRowFilterErrorDrainsFirst: a row event refused by an Error rule in
// the middle of a source transaction stops the run only after every change
// read before it is on the target: the rows of the earlier transactions
// and the part of the same transaction before the refused event, across
// several apply workers. The refused row itself never reaches the target.
func TestRowFilterErrorDrainsFirst(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	cfg, src := e.configs(t, "rowfiltererr")
	cfg.BAList = config.BAList{DoDBs: []string{"app"}}
	cfg.Syncer.WorkerCount = 4
	cfg.FilterRules = []config.FilterRule{
		{Name: "no-insert-bad", SchemaPattern: "app", TablePattern: "bad", Events: []string{"insert"}, Action: config.FilterError},
	}
	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)

	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, v INT)",
		"CREATE TABLE app.bad (id INT PRIMARY KEY)")
	const before, inTxn = 500, 300
	for i := 0; i < before; i += 50 {
		var vals []string
		for j := i; j < i+50; j++ {
			vals = append(vals, fmt.Sprintf("(%d, %d)", j, j))
		}
		mariadbtest.MustExec(t, e.srcDB, "INSERT INTO app.t VALUES "+strings.Join(vals, ","))
	}
	tx, err := e.srcDB.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for j := before; j < before+inTxn; j++ {
		if _, err := tx.Exec("INSERT INTO app.t VALUES (?, ?)", j, j); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec("INSERT INTO app.bad VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	res := r.Wait(t, 30*time.Second)
	if !res.Failed() || res.Resumable() || res.Errors[0].Code != CodeFilterError {
		t.Fatalf("result %+v, want a non-resumable %s error", res, CodeFilterError)
	}
	var n, bad int
	if err := e.dstDB.QueryRow("SELECT COUNT(*) FROM app.t").Scan(&n); err != nil || n != before+inTxn {
		t.Fatalf("target app.t: %d rows, %v; want all %d rows read before the refused event", n, err, before+inTxn)
	}
	if err := e.dstDB.QueryRow("SELECT COUNT(*) FROM app.bad").Scan(&bad); err != nil || bad != 0 {
		t.Fatalf("target app.bad: %d rows, %v; want the refused row left out", bad, err)
	}
}

// TestFilterDDLKinds: rules naming DM's finer DDL kinds skip exactly the
// ALTERs of those kinds; MODIFY COLUMN is classified against the target
// table as it was before the statement.
func TestFilterDDLKinds(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	cfg, src := e.configs(t, "ddlkinds")
	cfg.BAList = config.BAList{DoDBs: []string{"app"}}
	cfg.FilterRules = []config.FilterRule{
		{SchemaPattern: "app", TablePattern: "t", Events: []string{"drop column", "value range decrease"}, Action: config.FilterIgnore},
	}
	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)
	defer r.Stop(t)

	mariadbtest.MustExec(t, e.srcDB,
		"CREATE DATABASE app",
		"CREATE TABLE app.t (id INT PRIMARY KEY, a INT, b INT, c VARCHAR(10))",
		"INSERT INTO app.t VALUES (1, 1, 1, 'x')",
		"ALTER TABLE app.t DROP COLUMN b",                   // skipped: drop column
		"ALTER TABLE app.t ADD COLUMN d INT",                // applied
		"ALTER TABLE app.t MODIFY a TINYINT",                // skipped: value range decrease
		"ALTER TABLE app.t MODIFY c VARCHAR(20)",            // applied: longer
		"ALTER TABLE app.t ADD COLUMN e INT, DROP COLUMN d", // skipped: one clause drops a column
		"CREATE TABLE app.marker (id INT PRIMARY KEY)", "INSERT INTO app.marker VALUES (1)",
	)
	e.waitEqual(t, same("app.marker"), r)
	var cols []string
	rows, err := e.dstDB.Query("SELECT CONCAT(COLUMN_NAME, ' ', COLUMN_TYPE) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 't' ORDER BY ORDINAL_POSITION")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	if got, want := strings.Join(cols, ", "), "id int(11), a int(11), b int(11), c varchar(20), d int(11)"; got != want {
		t.Errorf("target columns %q, want %q", got, want)
	}
}

// TestANSIQuotesDDL: DDL a session with sql_mode ANSI_QUOTES wrote (names
// in double quotes) is parsed in that mode, read from the query event, and
// applied on the target with backquotes; rows follow.
func TestANSIQuotesDDL(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	cfg, src := e.configs(t, "ansi")
	cfg.BAList = config.BAList{DoDBs: []string{"app"}}
	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)
	defer r.Stop(t)

	c, err := e.srcDB.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range []string{
		"SET SESSION sql_mode = 'ANSI_QUOTES'",
		`CREATE DATABASE "app"`,
		`CREATE TABLE "app"."q" ("id" INT PRIMARY KEY, "v" VARCHAR(10) DEFAULT 'x')`,
		`INSERT INTO "app"."q" VALUES (1, 'a')`,
		`ALTER TABLE "app"."q" ADD COLUMN "w" INT`,
		`INSERT INTO "app"."q" VALUES (2, 'b', 3)`,
		`CREATE INDEX "ix" ON "app"."q" ("v")`,
		"SET SESSION sql_mode = DEFAULT",
		"CREATE TABLE app.marker (id INT PRIMARY KEY)", "INSERT INTO app.marker VALUES (1)",
	} {
		if _, err := c.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	e.waitEqual(t, same("app.marker", "app.q"), r)
	var n int
	if err := e.dstDB.QueryRow("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'q' AND INDEX_NAME = 'ix'").Scan(&n); err != nil || n != 1 {
		t.Errorf("index ix on the target: %d (%v)", n, err)
	}
}
