package load

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// extendRoutes merges s*.t_* into db.t with the three extractors.
func extendRoutes(target string) []config.RouteRule {
	return []config.RouteRule{{SchemaPattern: "s*", TablePattern: "t_*", TargetSchema: target, TargetTable: "t",
		TableExtractor:  &config.TableExtractor{TargetColumn: "c_table", TableRegexp: "t_(.*)"},
		SchemaExtractor: &config.SchemaExtractor{TargetColumn: "c_schema", SchemaRegexp: "(.*)"},
		SourceExtractor: &config.SourceExtractor{TargetColumn: "c_source", SourceRegexp: "mysql-(.*)"}}}
}

// TestLoadExtendColumns: shards s1.t_1 and s2.t_2 with the same ids load
// into one table keyed by (id, c_table, c_schema, c_source), which the
// load creates (with either method), or which the operator created (as DM
// requires) with the extend columns anywhere; a target without them is
// refused naming the columns.
func TestLoadExtendColumns(t *testing.T) {
	e := newEnv(t, false)
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE s1", "CREATE DATABASE s2",
		"CREATE TABLE s1.t_1 (id INT PRIMARY KEY, v VARCHAR(20), u INT, UNIQUE KEY uu (u))",
		"CREATE TABLE s2.t_2 (id INT PRIMARY KEY, v VARCHAR(20), u INT, UNIQUE KEY uu (u))",
		"INSERT INTO s1.t_1 SELECT seq, CONCAT('a', seq), seq FROM s1.seq_1_to_300",
		"INSERT INTO s2.t_2 SELECT seq, CONCAT('b', seq), seq FROM s2.seq_1_to_200",
		"INSERT INTO s2.t_2 VALUES (1000, 'it''s\\\\', NULL)")
	want := func() []string {
		var out []string
		for _, s := range []struct{ tbl, tv, sv string }{{"s1.t_1", "1", "s1"}, {"s2.t_2", "2", "s2"}} {
			rows, err := mariadbtest.QueryRows(t.Context(), e.srcDB,
				fmt.Sprintf("SELECT id, v, u, '%s', '%s', '01' FROM %s", s.tv, s.sv, s.tbl))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, rows...)
		}
		slices.Sort(out)
		return out
	}()
	got := func(table string) []string {
		rows, err := mariadbtest.QueryRows(t.Context(), e.dstDB, "SELECT id, v, u, c_table, c_schema, c_source FROM "+table)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(rows)
		return rows
	}
	for _, method := range []int32{methodLoadData, methodInsert} {
		t.Run(fmt.Sprintf("created by the load, method %d", method), func(t *testing.T) {
			target := fmt.Sprintf("db%d", method)
			dir := t.TempDir()
			task := fmt.Sprintf("ext%d", method)
			e.dumpTables(t, dir, task, "dump-"+task, 128, tn("s1", "t_1"), tn("s2", "t_2"))
			cfg, src := e.configs(task, config.ModeFull, 2)
			cfg.RouteRules = extendRoutes(target)
			l := newLoader(t, cfg, src, dir, nil)
			l.method.Store(method)
			requireOK(t, process(t, l))
			if g := got(target + ".t"); !slices.Equal(g, want) {
				t.Fatalf("%s.t: %d rows, want %d; first %v", target, len(g), len(want), g[:min(3, len(g))])
			}
			var name, create string
			if err := e.dstDB.QueryRow("SHOW CREATE TABLE "+target+".t").Scan(&name, &create); err != nil {
				t.Fatal(err)
			}
			for _, part := range []string{"PRIMARY KEY (`id`,`c_table`,`c_schema`,`c_source`)", "UNIQUE KEY `uu` (`u`,`c_table`,`c_schema`,`c_source`)",
				"`c_source` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT ''"} {
				if !strings.Contains(create, part) {
					t.Errorf("the merged table lacks %s:\n%s", part, create)
				}
			}
		})
	}
	t.Run("created by the operator", func(t *testing.T) {
		mariadbtest.MustExec(t, e.dstDB, "CREATE DATABASE op",
			"CREATE TABLE op.t (c_source VARCHAR(10) NOT NULL, c_schema VARCHAR(10) NOT NULL, c_table VARCHAR(10) NOT NULL, "+
				"id INT NOT NULL, v VARCHAR(20), u INT, PRIMARY KEY (c_source, c_schema, c_table, id))")
		dir := t.TempDir()
		e.dumpTables(t, dir, "extop", "dump-extop", 0, tn("s1", "t_1"), tn("s2", "t_2"))
		cfg, src := e.configs("extop", config.ModeFull, 2)
		cfg.RouteRules = extendRoutes("op")
		requireOK(t, process(t, newLoader(t, cfg, src, dir, nil)))
		if g := got("op.t"); !slices.Equal(g, want) {
			t.Fatalf("op.t: %d rows, want %d", len(g), len(want))
		}
	})
	t.Run("target without the extend columns", func(t *testing.T) {
		mariadbtest.MustExec(t, e.dstDB, "CREATE DATABASE nox", "CREATE TABLE nox.t (id INT PRIMARY KEY, v VARCHAR(20), u INT, c_table VARCHAR(10))")
		dir := t.TempDir()
		e.dumpTables(t, dir, "extno", "dump-extno", 0, tn("s1", "t_1"))
		cfg, src := e.configs("extno", config.ModeFull, 1)
		cfg.RouteRules = extendRoutes("nox")
		requireError(t, process(t, newLoader(t, cfg, src, dir, nil)), CodeLoadSchema, "`nox`.`t`",
			"extend column `c_schema` is missing", "extend column `c_source` is missing")
	})
}
