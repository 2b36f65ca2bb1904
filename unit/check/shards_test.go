package check

import (
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestShardChecks: in a sharding task, shards merged into one table with
// different columns fail the precheck naming both and the column, and an
// AUTO_INCREMENT key of merged shards is a warning naming the columns;
// without shard-mode neither item is given.
func TestShardChecks(t *testing.T) {
	src := mariadbtest.Start(t, fast("source", true))
	tgt := mariadbtest.Start(t, fast("target", false))
	src.Exec(t, "CREATE DATABASE shop")
	src.Exec(t, "CREATE TABLE shop.orders_1 (id INT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(20))")
	src.Exec(t, "CREATE TABLE shop.orders_2 (id INT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(20))")
	src.Exec(t, "CREATE TABLE shop.orders_3 (id INT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(40))")
	src.Exec(t, "CREATE TABLE shop.items_1 (id INT PRIMARY KEY, name TEXT)")
	src.Exec(t, "CREATE TABLE shop.items_2 (id INT PRIMARY KEY, name TEXT)")

	cfg, sc := subtask(config.ModeAll, src, tgt, mariadbtest.SourceUser, mariadbtest.SourcePassword)
	cfg.RouteRules = []config.RouteRule{
		{SchemaPattern: "shop", TablePattern: "orders_*", TargetSchema: "merged", TargetTable: "orders"},
		{SchemaPattern: "shop", TablePattern: "items_*", TargetSchema: "merged", TargetTable: "items"},
	}
	r := runCheck(t, cfg, sc)
	if its := find(r, "shard_table_schema"); len(its) != 0 {
		t.Fatalf("shard checks without shard-mode: %+v", its)
	}
	cfg.ShardMode = config.ShardPessimistic
	r = runCheck(t, cfg, sc)
	wantState(t, r, "shard_table_schema", StateFail, "`shop`.`orders_1`", "`shop`.`orders_3`", "`merged`.`orders`",
		"column 2 is `note` varchar(20) on `shop`.`orders_1` but `note` varchar(40) on `shop`.`orders_3`")
	wantState(t, r, "shard_auto_increment", StateWarn, "3 shard(s)", "`shop`.`orders_1`.`id`", "`shop`.`orders_3`.`id`")

	src.Exec(t, "ALTER TABLE shop.orders_3 MODIFY note VARCHAR(20)")
	r = runCheck(t, cfg, sc)
	wantState(t, r, "shard_table_schema", StatePass, "2 target table(s)")
	if err := r.Err(); err != nil {
		t.Errorf("equal shards with auto-increment keys: Err() = %v, want nil (a warning)", err)
	}
}
