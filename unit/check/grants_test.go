package check

import (
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

func TestGrantsParse(t *testing.T) {
	g := &grants{}
	for _, l := range []string{
		"GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '*AB'",
		"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `u`@`%`",
		"GRANT SELECT ON `d\\_b%`.* TO `u`@`%`",
		"GRANT ALL PRIVILEGES ON `whole`.* TO `u`@`%`",
		"GRANT SELECT, INSERT ON `shop`.`orders` TO `u`@`%`",
		"GRANT SELECT (`id`, `qty`), INSERT (`id`) ON `shop`.`items` TO `u`@`%`",
		"GRANT SELECT ON `we``ird`.`t``1` TO `u`@`%`",
		"GRANT EXECUTE ON PROCEDURE `shop`.`p` TO `u`@`%`",
		"GRANT PROXY ON ``@`%` TO `u`@`%`",
		"GRANT `r1`, `r2` TO `u`@`%`",
		"SET DEFAULT ROLE `r1` FOR `u`@`%`",
	} {
		g.add(l)
	}
	for _, c := range []struct {
		priv, db, table string
		want            bool
	}{
		{"SELECT", "d_b1", "t", true},
		{"SELECT", "d_b", "t", true},
		{"SELECT", "dxb1", "t", false}, // \_ is a literal underscore
		{"SELECT", "whole", "t", true},
		{"DELETE", "whole", "t", true},
		{"SELECT", "shop", "orders", true},
		{"SELECT", "shop", "items", false}, // column grants do not cover the table
		{"SELECT", "shop", "other", false},
		{"SELECT", "we`ird", "t`1", true},
		{"REPLICATION SLAVE", "any", "t", true},
	} {
		if got := g.onTable(c.priv, c.db, c.table); got != c.want {
			t.Errorf("onTable(%s, %s, %s) = %v, want %v", c.priv, c.db, c.table, got, c.want)
		}
	}
	if !g.global("REPLICATION CLIENT", "BINLOG MONITOR") || g.global("RELOAD") || g.global("SELECT") {
		t.Errorf("global privileges wrong: %+v", g.lines)
	}
	if strings.Join(g.roles, "|") != "`r1`, `r2`" {
		t.Errorf("roles = %q", g.roles)
	}
	all := &grants{}
	all.add("GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION")
	if !all.global("RELOAD") || !all.onTable("SELECT", "x", "y") {
		t.Error("ALL PRIVILEGES ON *.* does not cover everything")
	}
	if got := quoteAccount("dm'x@10.0.%"); got != "'dm''x'@'10.0.%'" {
		t.Errorf("quoteAccount = %s", got)
	}
}

// TestPrivilegesFromGrants: SELECT granted on some selected tables only,
// RELOAD missing (a warning), and REPLICATION CLIENT coming from the
// user's default role.
func TestPrivilegesFromGrants(t *testing.T) {
	src := mariadbtest.Start(t, fast("source", true))
	tgt := mariadbtest.Start(t, fast("target", false))
	src.Exec(t, "CREATE DATABASE shop")
	src.Exec(t, "CREATE TABLE shop.orders (id INT PRIMARY KEY)")
	src.Exec(t, "CREATE TABLE shop.items (id INT PRIMARY KEY)")
	src.Exec(t, "CREATE USER 'part'@'%' IDENTIFIED BY 'pw'")
	src.Exec(t, "GRANT REPLICATION SLAVE ON *.* TO 'part'@'%'")
	src.Exec(t, "GRANT SELECT ON shop.orders TO 'part'@'%'")
	src.Exec(t, "GRANT INSERT ON shop.items TO 'part'@'%'") // visible, not readable
	src.Exec(t, "CREATE ROLE monitor")
	src.Exec(t, "GRANT BINLOG MONITOR ON *.* TO monitor")
	src.Exec(t, "GRANT monitor TO 'part'@'%'")
	src.Exec(t, "SET DEFAULT ROLE monitor FOR 'part'@'%'")

	r := runMode(t, config.ModeAll, src, tgt, "part", "pw")
	wantState(t, r, "privilege_replication_client", StatePass)
	wantState(t, r, "privilege_replication_slave", StatePass)
	wantState(t, r, "privilege_reload", StateWarn, "lacks RELOAD", "one reader", "binlog_snapshot_file", "fix: GRANT RELOAD ON *.* TO 'part'@'%'")
	wantState(t, r, "privilege_select", StateFail, "lacks SELECT on 1 selected table(s)", "`shop`.`items`", "fix: GRANT SELECT ON `shop`.* TO 'part'@'%'")
	if fails := r.Failures(); len(fails) != 1 {
		t.Errorf("failures %+v, want only privilege_select", fails)
	}
	// Incremental mode does not read the tables.
	if err := runMode(t, config.ModeIncremental, src, tgt, "part", "pw").Err(); err != nil {
		t.Errorf("incremental: Err() = %v, want nil", err)
	}
}
