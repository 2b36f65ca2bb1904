package syncer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// exprRules are expression filters of app.t of every kind: even inserts,
// updates from a negative v to one above 100 (old AND new), deletes of v 7,
// and an update rule with only a new side (the old side counts as TRUE).
var exprRules = []config.ExpressionFilter{
	{Name: "even", Schema: "app", Table: "t", InsertValueExpr: "v % 2 = 0"},
	{Name: "neg-to-big", Schema: "app", Table: "t", UpdateOldValueExpr: "v < 0", UpdateNewValueExpr: "v > 100"},
	{Name: "to-secret", Schema: "APP", Table: "T", UpdateNewValueExpr: "note = 'secret'"},
	{Name: "seven", Schema: "app", Table: "t", DeleteValueExpr: "v = 7"},
}

// TestExpressionFilters: rows an expression filter matches never reach
// the target, the others do, in safe mode too; rows of another table are
// untouched; status counts the filtered changes.
func TestExpressionFilters(t *testing.T) {
	for _, safe := range []bool{false, true} {
		t.Run(fmt.Sprintf("safe-mode=%v", safe), func(t *testing.T) {
			e := newEnv(t, mariadbtest.Options{FastCommit: true})
			cfg, src := e.configs(t, "expr")
			cfg.BAList = config.BAList{DoDBs: []string{"app"}}
			cfg.ExprFilter = exprRules
			cfg.Syncer.SafeMode = safe
			u := newUnit(t, cfg, src)
			defer u.Close()
			r := unittest.Start(u, false, 0)
			defer r.Stop(t)

			mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app",
				"CREATE TABLE app.t (id INT PRIMARY KEY, v INT, note VARCHAR(20))",
				"CREATE TABLE app.other (id INT PRIMARY KEY, v INT)",
				// Inserts: the even ones stay away.
				"INSERT INTO app.t SELECT seq, seq, 'n' FROM app.seq_1_to_10",
				"INSERT INTO app.other SELECT seq, seq FROM app.seq_1_to_10",
				// Updates: 1 and 3 go negative (replicated), then 1 goes above
				// 100 (filtered: old < 0 and new > 100), 3 goes to 50
				// (replicated); 5 goes to 200 from a positive v (replicated);
				// 9 gets the secret note (filtered by the new side alone).
				"UPDATE app.t SET v = -v WHERE id IN (1, 3)",
				"UPDATE app.t SET v = 101 WHERE id = 1",
				"UPDATE app.t SET v = 50 WHERE id = 3",
				"UPDATE app.t SET v = 200 WHERE id = 5",
				"UPDATE app.t SET note = 'secret' WHERE id = 9",
				// Deletes: v 7 stays on the target.
				"DELETE FROM app.t WHERE id IN (7, 5)",
				"DELETE FROM app.other WHERE id = 7",
				"CREATE TABLE app.marker (id INT PRIMARY KEY)", "INSERT INTO app.marker VALUES (1)",
			)
			e.waitEqual(t, same("app.marker", "app.other"), r)
			mariadbtest.MustExec(t, e.srcDB,
				"CREATE TABLE app.want (id INT PRIMARY KEY, v INT, note VARCHAR(20))",
				"INSERT INTO app.want VALUES (1, -1, 'n'), (3, 50, 'n'), (7, 7, 'n'), (9, 9, 'n')")
			e.waitEqual(t, map[string]string{"app.want": "app.t"}, r)
			st := u.Status().(Status)
			if st.FilteredInserts != 5 || st.FilteredUpdates != 2 || st.FilteredDeletes != 1 {
				t.Errorf("filtered inserts %d, updates %d, deletes %d; want 5, 2, 1", st.FilteredInserts, st.FilteredUpdates, st.FilteredDeletes)
			}
		})
	}
}

// TestExpressionFilterAfterDDL: as in DM, a rule whose column a DDL drops
// filters nothing (a status warning names the rule, the table and the
// column) and filters again once the column is back; the rows before the
// DDL are filtered with the table as it was, although the unit reads them
// only after the source dropped the column (the target's table, which has
// the rows' shape, describes it).
func TestExpressionFilterAfterDDL(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	cfg, src := e.configs(t, "exprddl")
	cfg.BAList = config.BAList{DoDBs: []string{"app"}}
	cfg.ExprFilter = []config.ExpressionFilter{{Name: "even_c", Schema: "app", Table: "t", InsertValueExpr: "c % 2 = 0"}}
	// Written before the unit starts: it reads rows 1 and 2 when the
	// source's table has no c any more.
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app",
		"CREATE TABLE app.t (id INT PRIMARY KEY, c INT)",
		"INSERT INTO app.t VALUES (1, 1), (2, 2)",
		"ALTER TABLE app.t DROP COLUMN c",
		"INSERT INTO app.t VALUES (3), (4)")
	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)
	defer r.Stop(t)
	testutil.Eventually(t, syncTimeout, "rows 1, 3 and 4 reach the target", func() error {
		var ids string
		if err := e.dstDB.QueryRow("SELECT GROUP_CONCAT(id ORDER BY id) FROM app.t").Scan(&ids); err != nil {
			return err
		}
		if ids != "1,3,4" {
			return fmt.Errorf("target app.t has ids %q", ids)
		}
		return nil
	})
	mariadbtest.MustExec(t, e.srcDB,
		"ALTER TABLE app.t ADD COLUMN c INT",
		"INSERT INTO app.t VALUES (5, 5), (6, 6)",
		"CREATE TABLE app.want (id INT PRIMARY KEY, c INT)",
		"INSERT INTO app.want VALUES (1, NULL), (3, NULL), (4, NULL), (5, 5)")
	e.waitEqual(t, map[string]string{"app.want": "app.t"}, r)
	testutil.Eventually(t, 10*time.Second, "a warning names the rule, table and column", func() error {
		w := strings.Join(u.Status().(Status).Warnings, "\n")
		for _, want := range []string{`"even_c"`, "`app`.`t`", `"c"`} {
			if !strings.Contains(w, want) {
				return fmt.Errorf("warnings %q do not name %s", w, want)
			}
		}
		return nil
	})
}

// TestExpressionFilterBindErrorPauses: a rule that cannot be bound to its
// table (a column type expression filters do not read) stops the run with
// a non-resumable error naming the rule, the table and the column; rows of
// the table before it were not applied, and the run never crashes.
func TestExpressionFilterBindErrorPauses(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	// Created before the start position (the parser of DDL knows no
	// spatial type); the target holds the points as bytes.
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app", "CREATE TABLE app.geo (id INT PRIMARY KEY, g POINT)")
	mariadbtest.MustExec(t, e.dstDB, "CREATE DATABASE app", "CREATE TABLE app.geo (id INT PRIMARY KEY, g BLOB)")
	cfg, src := e.configs(t, "exprerr")
	cfg.BAList = config.BAList{DoDBs: []string{"app"}}
	cfg.ExprFilter = []config.ExpressionFilter{{Name: "no-origin", Schema: "app", Table: "geo", InsertValueExpr: "g IS NULL"}}
	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)
	mariadbtest.MustExec(t, e.srcDB, "INSERT INTO app.geo VALUES (1, NULL), (2, POINT(1, 2))")
	res := r.Wait(t, 30*time.Second)
	if !res.Failed() || res.Resumable() {
		t.Fatalf("result %+v, want a non-resumable error", res)
	}
	got := res.Errors[0]
	t.Logf("the run stopped with: %s", got.Message)
	if got.Code != CodeExprFilter {
		t.Errorf("code %q, want %q", got.Code, CodeExprFilter)
	}
	for _, want := range []string{`"no-origin"`, "insert-value-expr", "app", "geo", "column g"} {
		if !strings.Contains(got.Message, want) {
			t.Errorf("message %q does not name %s", got.Message, want)
		}
	}
	var n int
	if err := e.dstDB.QueryRow("SELECT COUNT(*) FROM app.geo").Scan(&n); err != nil || n != 0 {
		t.Fatalf("target app.geo: %d rows, %v; want the table with no row", n, err)
	}
}
