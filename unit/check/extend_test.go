package check

import (
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestTargetTableExtendColumns: a merged target table with the route
// rule's extend columns matches its shards; one lacking an extend column
// is a target_table_schema failure naming the column.
func TestTargetTableExtendColumns(t *testing.T) {
	src := mariadbtest.Start(t, fast("source", true))
	tgt := mariadbtest.Start(t, fast("target", false))
	src.Exec(t, "CREATE DATABASE shop")
	src.Exec(t, "CREATE TABLE shop.t_1 (id INT PRIMARY KEY, v VARCHAR(20))")
	src.Exec(t, "CREATE TABLE shop.t_2 (id INT PRIMARY KEY, v VARCHAR(20))")
	tgt.Exec(t, "CREATE DATABASE m")
	tgt.Exec(t, "CREATE TABLE m.ok (c_table VARCHAR(10) NOT NULL, id INT NOT NULL, v VARCHAR(20), c_source VARCHAR(10) NOT NULL, PRIMARY KEY (id, c_table, c_source))")
	tgt.Exec(t, "CREATE TABLE m.bad (id INT NOT NULL, v VARCHAR(20), c_table VARCHAR(10) NOT NULL, PRIMARY KEY (id, c_table))")
	route := func(target string) []config.RouteRule {
		return []config.RouteRule{{SchemaPattern: "shop", TablePattern: "t_*", TargetSchema: "m", TargetTable: target,
			TableExtractor:  &config.TableExtractor{TargetColumn: "c_table", TableRegexp: "t_(.*)"},
			SourceExtractor: &config.SourceExtractor{TargetColumn: "c_source", SourceRegexp: "(.*)"}}}
	}
	cfg, sc := subtask(config.ModeAll, src, tgt, mariadbtest.SourceUser, mariadbtest.SourcePassword)
	cfg.RouteRules = route("ok")
	r := runCheck(t, cfg, sc)
	wantState(t, r, "target_tables", StatePass, "2 of the 2 selected table(s) route to existing target tables")
	if its := find(r, "target_table_schema"); len(its) != 0 {
		t.Fatalf("a merged table with the extend columns differs: %+v", its)
	}

	cfg.RouteRules = route("bad")
	r = runCheck(t, cfg, sc)
	its := find(r, "target_table_schema")
	if len(its) != 2 {
		t.Fatalf("want 2 target_table_schema failures, got %+v", its)
	}
	for _, it := range its {
		if it.State != StateFail || !strings.Contains(it.Line(), "the target lacks extend column `c_source`") ||
			strings.Contains(it.Line(), "c_table") {
			t.Errorf("item %s", it.Line())
		}
	}
}

// TestShardAutoIncrementExtend: merged AUTO_INCREMENT shards are not
// warned about when extend columns give them different values; an extend
// column with the same value on both (the source's) does not help.
func TestShardAutoIncrementExtend(t *testing.T) {
	src := mariadbtest.Start(t, fast("source", true))
	tgt := mariadbtest.Start(t, fast("target", false))
	src.Exec(t, "CREATE DATABASE shop")
	src.Exec(t, "CREATE TABLE shop.t_1 (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20))")
	src.Exec(t, "CREATE TABLE shop.t_2 (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20))")
	cfg, sc := subtask(config.ModeAll, src, tgt, mariadbtest.SourceUser, mariadbtest.SourcePassword)
	cfg.ShardMode = config.ShardPessimistic
	cfg.RouteRules = []config.RouteRule{{SchemaPattern: "shop", TablePattern: "t_*", TargetSchema: "m", TargetTable: "t",
		TableExtractor: &config.TableExtractor{TargetColumn: "c_table", TableRegexp: "t_(.*)"}}}
	r := runCheck(t, cfg, sc)
	if its := find(r, "shard_auto_increment"); len(its) != 0 {
		t.Fatalf("shards kept apart by c_table are warned about: %+v", its)
	}
	cfg.RouteRules[0].TableExtractor = nil
	cfg.RouteRules[0].SourceExtractor = &config.SourceExtractor{TargetColumn: "c_source", SourceRegexp: "(.*)"}
	r = runCheck(t, cfg, sc)
	wantState(t, r, "shard_auto_increment", StateWarn, "2 shard(s)", "`shop`.`t_1`.`id`", "`shop`.`t_2`.`id`")
}
