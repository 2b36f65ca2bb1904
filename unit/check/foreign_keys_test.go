package check

import (
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestForeignKeysWarn: a table with an ON DELETE CASCADE key routed to a
// target table without it, and a cascading key whose parent the
// block-allow list leaves out, are warnings naming the table and the
// constraint in the modes that sync; the task still passes. A key the
// target has, and full mode, give none.
func TestForeignKeysWarn(t *testing.T) {
	src := mariadbtest.Start(t, fast("source", true))
	tgt := mariadbtest.Start(t, fast("target", false))
	src.Exec(t, "CREATE DATABASE shop")
	src.Exec(t, "CREATE DATABASE other")
	src.Exec(t, "CREATE TABLE shop.p (id INT PRIMARY KEY)")
	src.Exec(t, "CREATE TABLE other.q (id INT PRIMARY KEY)")
	src.Exec(t, "CREATE TABLE shop.c (id INT PRIMARY KEY, p INT, CONSTRAINT c_parent FOREIGN KEY (p) REFERENCES shop.p (id) ON DELETE CASCADE)")
	src.Exec(t, "CREATE TABLE shop.ok (id INT PRIMARY KEY, p INT, CONSTRAINT ok_parent FOREIGN KEY (p) REFERENCES shop.p (id) ON UPDATE SET NULL)")
	src.Exec(t, "CREATE TABLE shop.orphan (id INT PRIMARY KEY, q INT, CONSTRAINT orphan_parent FOREIGN KEY (q) REFERENCES other.q (id) ON DELETE SET NULL)")
	tgt.Exec(t, "CREATE DATABASE shop")
	tgt.Exec(t, "CREATE TABLE shop.p (id INT PRIMARY KEY)")
	tgt.Exec(t, "CREATE TABLE shop.c_copy (id INT PRIMARY KEY, p INT)")
	tgt.Exec(t, "CREATE TABLE shop.ok (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES shop.p (id) ON UPDATE SET NULL)")

	for _, mode := range []string{config.ModeIncremental, config.ModeAll, config.ModeFull} {
		t.Run(mode, func(t *testing.T) {
			cfg, sc := subtask(mode, src, tgt, mariadbtest.SourceUser, mariadbtest.SourcePassword)
			cfg.RouteRules = []config.RouteRule{{SchemaPattern: "shop", TablePattern: "c", TargetSchema: "shop", TargetTable: "c_copy"}}
			r := runCheck(t, cfg, sc)
			if err := r.Err(); err != nil {
				t.Fatalf("Err() = %v, want nil: a missing cascade is a warning", err)
			}
			its := find(r, "foreign_keys")
			if mode == config.ModeFull {
				if len(its) != 0 {
					t.Errorf("full mode: foreign key items %+v, want none (nothing replicates)", its)
				}
				return
			}
			want := map[string][]string{
				"`shop`.`c_copy`": {"source table `shop`.`c`", "`c_parent`", "ON DELETE CASCADE", "target table `shop`.`c_copy` has no foreign key"},
				"`shop`.`orphan`": {"`orphan_parent`", "ON DELETE SET NULL", "parent table `other`.`q` is not replicated"},
			}
			if len(its) != len(want) {
				t.Fatalf("foreign key items %+v, want %d warnings", its, len(want))
			}
			for _, it := range its {
				parts, ok := want[it.Object]
				if !ok || it.State != StateWarn {
					t.Errorf("item %+v: want a warning on one of %v", it, want)
					continue
				}
				for _, p := range parts {
					if !strings.Contains(it.Line(), p) {
						t.Errorf("%q does not contain %q", it.Line(), p)
					}
				}
				if strings.Contains(it.Line(), "ok_parent") {
					t.Errorf("warning about a key the target has: %s", it.Line())
				}
			}
		})
	}
}
