package check

import (
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestOnlineDDLInProgress: with online-ddl on, in the modes that sync, a
// shadow table of gh-ost or pt-osc whose real table is selected is a
// warning naming both tables, what happens at the cut-over and what to
// do; trash tables, shadows of unselected tables and full mode give none,
// and the shadow and trash tables are not selected tables (a shard merge
// of the schema's tables does not compare the shadow's altered columns).
// After the cut-over the item passes. With online-ddl off there is no
// item and the tools' tables are tables like any.
func TestOnlineDDLInProgress(t *testing.T) {
	src := mariadbtest.Start(t, fast("source", true))
	tgt := mariadbtest.Start(t, fast("target", false))
	mariadbtest.MustExec(t, src.PlainDB(t), "CREATE DATABASE shop", "CREATE DATABASE other",
		"CREATE TABLE shop.t (id INT PRIMARY KEY, v INT)", "CREATE TABLE shop.u (id INT PRIMARY KEY, v INT)",
		// gh-ost on t: its changelog, and the shadow already altered.
		"CREATE TABLE shop._t_ghc (id BIGINT AUTO_INCREMENT, last_update TIMESTAMP DEFAULT CURRENT_TIMESTAMP, hint VARCHAR(64) NOT NULL, "+
			"value TEXT NOT NULL, PRIMARY KEY (id), UNIQUE KEY hint_uidx (hint))",
		"CREATE TABLE shop._t_gho LIKE shop.t", "ALTER TABLE shop._t_gho ADD COLUMN c2 INT NOT NULL DEFAULT 7",
		// pt-osc on u; a leftover trash table of an earlier run; a shadow
		// of an unselected schema.
		"CREATE TABLE shop._u_new LIKE shop.u", "CREATE TABLE shop._u_old (x INT)",
		"CREATE TABLE other.o (id INT PRIMARY KEY)", "CREATE TABLE other._o_gho (id INT PRIMARY KEY)")

	configs := func(mode string, online bool) (*config.SubTaskConfig, *config.SourceConfig) {
		cfg, sc := subtask(mode, src, tgt, mariadbtest.SourceUser, mariadbtest.SourcePassword)
		cfg.OnlineDDL = online
		cfg.ShardMode = config.ShardPessimistic
		cfg.RouteRules = []config.RouteRule{{SchemaPattern: "shop", TablePattern: "*", TargetSchema: "shop", TargetTable: "merged"}}
		return cfg, sc
	}
	check := func(t *testing.T, mode string, online bool) *Report {
		t.Helper()
		cfg, sc := configs(mode, online)
		return runCheck(t, cfg, sc)
	}
	wantT := []string{"an online schema change of `shop`.`t` is in progress on source mysql-01", "shadow table `_t_gho` exists",
		"before the task's start location are not seen", "when the tool cuts over (renames `_t_gho` to `t`)",
		"the sync unit cannot apply them to `shop`.`t` and stops with an error",
		"fix: wait for the tool to finish and start the task after its cut-over", "drop `_t_gho`", "apply the tool's ALTER to the target's `shop`.`t` by hand"}
	wantU := []string{"an online schema change of `shop`.`u` is in progress", "shadow table `_u_new` exists", "(renames `_u_new` to `u`)"}
	// online reports the online_ddl items by object.
	online := func(t *testing.T, r *Report) map[string]Item {
		t.Helper()
		out := map[string]Item{}
		for _, it := range find(r, "online_ddl") {
			if _, dup := out[it.Object]; dup {
				t.Errorf("two online_ddl items on %s", it.Object)
			}
			out[it.Object] = it
		}
		return out
	}
	contains := func(t *testing.T, it Item, st State, parts ...string) {
		t.Helper()
		if it.State != st {
			t.Errorf("%s: state %s, want %s: %s", it.Object, it.State, st, it.Line())
		}
		for _, p := range parts {
			if !strings.Contains(it.Line(), p) {
				t.Errorf("%q does not contain %q", it.Line(), p)
			}
		}
	}

	for _, mode := range []string{config.ModeIncremental, config.ModeAll} {
		t.Run(mode, func(t *testing.T) {
			r := check(t, mode, true)
			if err := r.Err(); err != nil {
				t.Fatalf("Err() = %v, want nil: an online schema change in progress is a warning", err)
			}
			its := online(t, r)
			if len(its) != 2 {
				t.Fatalf("online_ddl items %+v, want warnings on `shop`.`_t_gho` and `shop`.`_u_new`", its)
			}
			contains(t, its["`shop`.`_t_gho`"], StateWarn, wantT...)
			contains(t, its["`shop`.`_u_new`"], StateWarn, wantU...)
			wantState(t, r, "source_tables", StatePass, "2 table(s)")
			wantState(t, r, "shard_table_schema", StatePass, "merged into 1 target table(s)")
		})
	}
	t.Run("do-tables names only t", func(t *testing.T) {
		cfg, sc := configs(config.ModeIncremental, true)
		cfg.BAList = config.BAList{DoTables: []config.TableRef{{DBName: "shop", TblName: "t"}}}
		its := online(t, runCheck(t, cfg, sc))
		if len(its) != 1 {
			t.Fatalf("online_ddl items %+v, want one warning on `shop`.`_t_gho`", its)
		}
		contains(t, its["`shop`.`_t_gho`"], StateWarn, wantT...)
	})
	t.Run("full mode", func(t *testing.T) {
		r := check(t, config.ModeFull, true)
		if its := find(r, "online_ddl"); len(its) != 0 {
			t.Errorf("full mode: online_ddl items %+v, want none (nothing syncs)", its)
		}
		wantState(t, r, "source_tables", StatePass, "2 table(s)")
	})
	t.Run("online-ddl off", func(t *testing.T) {
		r := check(t, config.ModeAll, false)
		if its := find(r, "online_ddl"); len(its) != 0 {
			t.Errorf("online-ddl off: online_ddl items %+v, want none", its)
		}
		wantState(t, r, "source_tables", StatePass, "6 table(s)")
		if its := find(r, "shard_table_schema"); len(its) == 0 || its[0].State != StateFail {
			t.Errorf("online-ddl off: shard_table_schema %+v, want failures (the tools' tables are shards like any)", its)
		}
	})

	// gh-ost cuts over on t; pt-osc is stopped and its shadow dropped.
	mariadbtest.MustExec(t, src.PlainDB(t), "RENAME TABLE shop.t TO shop._t_del, shop._t_gho TO shop.t", "DROP TABLE shop._t_del, shop._t_ghc")
	r := check(t, config.ModeAll, true)
	its := online(t, r)
	if len(its) != 1 || its["`shop`.`_u_new`"].State != StateWarn {
		t.Fatalf("after t's cut-over: online_ddl items %+v, want the warning on `shop`.`_u_new` only", its)
	}
	mariadbtest.MustExec(t, src.PlainDB(t), "DROP TABLE shop._u_new")
	r = check(t, config.ModeAll, true)
	wantState(t, r, "online_ddl", StatePass, "no online schema change is in progress on the selected tables of source mysql-01")
	// t now has c2: the shard merge of t and u is a failure again, which
	// shows the shards are compared.
	wantState(t, r, "shard_table_schema", StateFail, "`shop`.`t`", "`shop`.`u`")
}
