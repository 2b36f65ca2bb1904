package syncer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// TestTranslateDDLExtend: a shard's CREATE TABLE creates the merged table
// with the extend columns in every primary and unique key; keys added
// later are extended too; other DDL is routed unchanged.
func TestTranslateDDLExtend(t *testing.T) {
	events, err := filter.NewEventFilter(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	d := newDDLTranslator(filter.NewTables(config.BAList{}, false), events,
		filter.NewRouter([]config.RouteRule{{SchemaPattern: "s*", TablePattern: "t_*", TargetSchema: "db", TargetTable: "t",
			TableExtractor:  &config.TableExtractor{TargetColumn: "c_table", TableRegexp: "t_(.*)"},
			SourceExtractor: &config.SourceExtractor{TargetColumn: "c_source", SourceRegexp: "(.*)"}}}, "mysql-01", false))
	col := " VARCHAR(128) CHARACTER SET UTF8MB4 COLLATE utf8mb4_bin NOT NULL DEFAULT _UTF8MB4''"
	tests := []struct{ query, want string }{
		{"CREATE TABLE t_1 (id INT PRIMARY KEY, v INT)",
			"CREATE TABLE IF NOT EXISTS `db`.`t` (`id` INT,`v` INT,`c_table`" + col + ",`c_source`" + col + ",PRIMARY KEY(`id`, `c_table`, `c_source`))"},
		{"ALTER TABLE t_1 ADD UNIQUE KEY u (v), ADD INDEX k (v)",
			"ALTER TABLE `db`.`t` ADD UNIQUE `u`(`v`, `c_table`, `c_source`), ADD INDEX `k`(`v`)"},
		{"CREATE UNIQUE INDEX u2 ON t_1 (v)", "CREATE UNIQUE INDEX `u2` ON `db`.`t` (`v`, `c_table`, `c_source`)"},
		{"ALTER TABLE t_1 ADD COLUMN w INT", "ALTER TABLE `db`.`t` ADD COLUMN `w` INT"},
	}
	for _, tt := range tests {
		got, err := d.translate("s1", tt.query)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].sql != tt.want {
			t.Errorf("translate(%q) = %#v\nwant %s", tt.query, got, tt.want)
		}
	}
	// An unrouted table is untouched.
	got, err := d.translate("app", "CREATE TABLE x (id INT PRIMARY KEY)")
	if err != nil || len(got) != 1 || got[0].sql != "CREATE TABLE x (id INT PRIMARY KEY)" || got[0].schema != "app" {
		t.Errorf("unrouted: %#v %v", got, err)
	}
	if _, err := d.translate("s1", "CREATE TABLE t_2 (id INT, c_source INT)"); err == nil || !strings.Contains(err.Error(), "`c_source`") {
		t.Errorf("a shard with a column named like an extend column: %v", err)
	}
}

// extendWant is what the merged table must hold: the rows of s1.t_1 and
// s2.t_2 with their extend values, sorted.
const extendWant = "SELECT id, v, u, '1', 's1', '01' FROM s1.t_1 UNION ALL SELECT id, v, u, '2', 's2', '01' FROM s2.t_2 ORDER BY 4, 5, 6, 1"

const extendGot = "SELECT id, v, u, c_table, c_schema, c_source FROM db.t ORDER BY c_table, c_schema, c_source, id"

// waitExtendEqual waits until db.t holds exactly the shards' rows.
func (e *env) waitExtendEqual(t *testing.T, r *unittest.Run) {
	t.Helper()
	ctx := context.Background()
	testutil.Eventually(t, syncTimeout, "db.t equals the union of the shards", func() error {
		want, err := mariadbtest.QueryRows(ctx, e.srcDB, extendWant)
		if err != nil {
			t.Fatal(err)
		}
		got, err := mariadbtest.QueryRows(ctx, e.dstDB, extendGot)
		if err != nil {
			return err
		}
		if slices.Equal(want, got) {
			return nil
		}
		select {
		case res := <-r.Done:
			r.Done <- res
			t.Fatalf("the unit stopped before the target caught up: %+v", res)
		default:
		}
		return fmt.Errorf("db.t has %d rows, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
	})
}

// TestSyncExtendColumns: shards s1.t_1 and s2.t_2 with the same ids,
// created, written, updated (key changes included) and deleted in the
// binlog, merge into db.t keyed by (id, c_table, c_schema, c_source),
// which the shard's CREATE TABLE creates; a second task replaying the
// same binlog from the start in safe mode leaves the same rows.
func TestSyncExtendColumns(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	routes := []config.RouteRule{{SchemaPattern: "s*", TablePattern: "t_*", TargetSchema: "db", TargetTable: "t",
		TableExtractor:  &config.TableExtractor{TargetColumn: "c_table", TableRegexp: "t_(.*)"},
		SchemaExtractor: &config.SchemaExtractor{TargetColumn: "c_schema", SchemaRegexp: "(.*)"},
		SourceExtractor: &config.SourceExtractor{TargetColumn: "c_source", SourceRegexp: "mysql-(.*)"}}}
	cfg, src := e.configs(t, "extend")
	cfg.BAList = config.BAList{DoDBs: []string{"s*"}}
	cfg.RouteRules = routes
	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)
	stopped := false
	defer func() {
		if !stopped {
			r.Stop(t)
		}
	}()

	shard := func(s, tbl string) []string {
		q := s + "." + tbl
		return []string{
			"CREATE TABLE " + q + " (id INT PRIMARY KEY, v VARCHAR(10), u INT, UNIQUE KEY uu (u))",
			"INSERT INTO " + q + " VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3), (4, 'd', 4)",
		}
	}
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE s1", "CREATE DATABASE s2")
	mariadbtest.MustExec(t, e.srcDB, shard("s1", "t_1")...)
	mariadbtest.MustExec(t, e.srcDB, shard("s2", "t_2")...)
	mariadbtest.MustExec(t, e.srcDB,
		// The same ids change differently on each shard.
		"UPDATE s1.t_1 SET v = 'a1' WHERE id = 1",
		"UPDATE s2.t_2 SET id = 10 WHERE id = 2",
		"DELETE FROM s1.t_1 WHERE id = 3",
		"UPDATE s2.t_2 SET u = 30 WHERE id = 3",
		"BEGIN", "INSERT INTO s1.t_1 VALUES (5, 'e', 5)", "INSERT INTO s2.t_2 VALUES (5, 'E', 5)",
		"DELETE FROM s2.t_2 WHERE id = 4", "UPDATE s1.t_1 SET u = 40, v = 'dd' WHERE id = 4", "COMMIT",
		// A unique key value moves between rows of one shard.
		"UPDATE s1.t_1 SET u = NULL WHERE id = 5", "UPDATE s1.t_1 SET u = 5 WHERE id = 2", "INSERT INTO s2.t_2 VALUES (2, 'B', 20)")
	e.waitExtendEqual(t, r)

	var name, create string
	if err := e.dstDB.QueryRow("SHOW CREATE TABLE db.t").Scan(&name, &create); err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"PRIMARY KEY (`id`,`c_table`,`c_schema`,`c_source`)", "UNIQUE KEY `uu` (`u`,`c_table`,`c_schema`,`c_source`)"} {
		if !strings.Contains(create, part) {
			t.Errorf("db.t lacks %s:\n%s", part, create)
		}
	}
	stopped = true
	if res := r.Stop(t); resultErr(res) != nil {
		t.Fatal(resultErr(res))
	}

	// The same binlog again from the start, in safe mode: idempotent.
	cfg2 := cfg.Clone()
	cfg2.Name = "extend-replay"
	cfg2.Syncer.SafeMode = true
	u2 := newUnit(t, cfg2, src)
	defer u2.Close()
	r2 := unittest.Start(u2, false, 0)
	defer r2.Stop(t)
	mariadbtest.MustExec(t, e.srcDB, "INSERT INTO s2.t_2 VALUES (1000, 'last', NULL)")
	e.waitExtendEqual(t, r2)
}

// TestShardPessimisticExtendColumns: pessimistic shard DDL on a merged
// table with extend columns (created by the operator, as DM requires):
// the shards' ids collide, the held shard's rows after its ALTER are
// re-synced into its own rows only, and the ALTER runs once.
func TestShardPessimisticExtendColumns(t *testing.T) {
	e := newShardEnv(t, "shardx")
	mariadbtest.MustExec(t, e.dstDB, "DROP TABLE merged.t",
		"CREATE TABLE merged.t (id INT NOT NULL, v VARCHAR(20) NOT NULL, c_table VARCHAR(10) NOT NULL, c_schema VARCHAR(10) NOT NULL, "+
			"PRIMARY KEY (id, c_table, c_schema))")
	e.cfg.RouteRules[0].TableExtractor = &config.TableExtractor{TargetColumn: "c_table", TableRegexp: "t_(.*)"}
	e.cfg.RouteRules[0].SchemaExtractor = &config.SchemaExtractor{TargetColumn: "c_schema", SchemaRegexp: "shard_(.*)"}
	u, r := e.start(t)
	defer u.Close()
	defer r.Stop(t)
	want := func(cols string) string {
		return "SELECT " + cols + ", '1', '1' FROM shard_1.t_1 UNION ALL SELECT " + cols + ", '2', '1' FROM shard_1.t_2 " +
			"UNION ALL SELECT " + cols + ", '1', '2' FROM shard_2.t_1 ORDER BY 1, 2, 3"
	}
	wait := func(cols string) {
		t.Helper()
		testutil.Eventually(t, syncTimeout, "merged.t equals the shards with their extend values", func() error {
			select {
			case res := <-r.Done:
				r.Done <- res
				t.Fatalf("the unit stopped: %+v", res)
			default:
			}
			w, err := mariadbtest.QueryRows(context.Background(), e.srcDB, want(cols))
			if err != nil {
				t.Fatal(err)
			}
			g, err := mariadbtest.QueryRows(context.Background(), e.dstDB, "SELECT "+cols+", c_table, c_schema FROM merged.t ORDER BY 1, 2, 3")
			if err != nil {
				return err
			}
			if !slices.Equal(w, g) {
				return fmt.Errorf("merged.t %v\nwant     %v", g, w)
			}
			return nil
		})
	}
	for _, s := range e.shards {
		mariadbtest.MustExec(t, e.srcDB, "INSERT INTO "+s+" VALUES (1, '"+s+"'), (2, '"+s+"')")
	}
	wait("id, v")
	before := alters(t, e.dstDB)
	mariadbtest.MustExec(t, e.srcDB,
		"ALTER TABLE shard_1.t_1 ADD COLUMN c2 INT NOT NULL DEFAULT 0",
		"INSERT INTO shard_1.t_1 VALUES (3, 'held', 7)",
		"UPDATE shard_1.t_1 SET c2 = 8 WHERE id = 1",
		"DELETE FROM shard_1.t_1 WHERE id = 2",
		"UPDATE shard_2.t_1 SET v = 'flows' WHERE id = 1")
	waitShardState(t, u, "shard_1.t_1 waits for the other two shards", func(st *unit.ShardDDLStatus) bool {
		return st != nil && st.State == "waiting" && len(st.WaitingFor) == 2
	})
	mariadbtest.MustExec(t, e.srcDB,
		"ALTER TABLE shard_1.t_2 ADD COLUMN c2 INT NOT NULL DEFAULT 0",
		"UPDATE shard_1.t_2 SET c2 = 9 WHERE id = 2",
		"ALTER TABLE shard_2.t_1 ADD COLUMN c2 INT NOT NULL DEFAULT 0",
		"INSERT INTO shard_2.t_1 VALUES (3, 'other', 10)")
	wait("id, v, c2")
	if got := alters(t, e.dstDB); got != before+1 {
		t.Errorf("%d ALTERs ran on the target, want 1", got-before)
	}
}
