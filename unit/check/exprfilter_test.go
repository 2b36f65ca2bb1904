package check

import (
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestExpressionFilterBinding: in the modes that sync, every table with
// expression filters gets one expression_filters item: pass when its rules
// bind, failure for a column type they cannot read, warnings for a column
// the table lacks and for a table the block-allow list leaves out, pass
// for a table the source does not have yet. Full mode has no such item.
func TestExpressionFilterBinding(t *testing.T) {
	src := mariadbtest.Start(t, fast("source", true))
	tgt := mariadbtest.Start(t, fast("target", false))
	mariadbtest.MustExec(t, src.PlainDB(t), "CREATE DATABASE shop",
		"CREATE TABLE shop.t (id INT PRIMARY KEY, v INT)", "CREATE TABLE shop.geo (id INT PRIMARY KEY, g POINT)")
	rules := []config.ExpressionFilter{
		{Name: "even", Schema: "shop", Table: "t", InsertValueExpr: "v % 2 = 0"},
		{Name: "gone", Schema: "shop", Table: "T", DeleteValueExpr: "c = 1"},
		{Name: "origin", Schema: "shop", Table: "geo", InsertValueExpr: "g IS NULL"},
		{Name: "elsewhere", Schema: "other", Table: "x", InsertValueExpr: "v = 1"},
		{Name: "later", Schema: "shop", Table: "later", InsertValueExpr: "v = 1"},
	}
	items := func(t *testing.T, mode string) map[string]Item {
		t.Helper()
		cfg, sc := subtask(mode, src, tgt, mariadbtest.SourceUser, mariadbtest.SourcePassword)
		cfg.ExprFilter = rules
		out := map[string]Item{}
		for _, it := range find(runCheck(t, cfg, sc), "expression_filters") {
			if _, dup := out[it.Object]; dup {
				t.Errorf("two items for %s", it.Object)
			}
			out[it.Object] = it
		}
		return out
	}
	got := items(t, config.ModeIncremental)
	for obj, want := range map[string]struct {
		st    State
		parts []string
	}{
		"`shop`.`t`":     {StateWarn, []string{`"gone"`, `"c"`, "filters nothing"}},
		"`shop`.`geo`":   {StateFail, []string{`"origin"`, "type point", "fix: correct the rule"}},
		"`other`.`x`":    {StateWarn, []string{`"elsewhere"`, "does not select"}},
		"`shop`.`later`": {StatePass, []string{`"later"`, "not on source mysql-01 yet"}},
	} {
		it, ok := got[obj]
		if !ok {
			t.Errorf("no expression_filters item for %s", obj)
			continue
		}
		if it.State != want.st {
			t.Errorf("%s: state %s, want %s: %s", obj, it.State, want.st, it.Line())
		}
		for _, p := range want.parts {
			if !strings.Contains(it.Line(), p) {
				t.Errorf("%s: %q does not contain %q", obj, it.Line(), p)
			}
		}
	}
	if len(got) != 4 {
		t.Errorf("%d expression_filters items, want 4: %v", len(got), got)
	}
	if got := items(t, config.ModeFull); len(got) != 0 {
		t.Errorf("full mode has expression_filters items: %v", got)
	}
}
