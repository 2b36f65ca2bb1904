package fkeys

import (
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/pkg/filter"
)

func tn(s string) filter.TableName {
	schema, table, _ := strings.Cut(s, ".")
	return filter.TableName{Schema: schema, Table: table}
}

func key(name, child, parent, onDelete string) Key {
	return Key{Name: name, Child: tn(child), Parent: tn(parent), Cols: []string{"p"}, RefCols: []string{"id"},
		OnDelete: onDelete, OnUpdate: "RESTRICT"}
}

func TestGroups(t *testing.T) {
	g := NewGroups([]Key{
		key("a", "s.c", "s.p", "CASCADE"),
		key("b", "s.gc", "s.c", "CASCADE"),      // a chain joins one group
		key("c", "s.Self", "s.self", "CASCADE"), // self reference, names folded
		key("d", "x.c", "y.p", "SET NULL"),      // across schemas
		key("e", "s.c2", "s.p", "RESTRICT"),     // a second child of s.p
	})
	for _, tc := range []struct {
		table, group string
	}{
		{"s.p", "s.c"}, {"s.c", "s.c"}, {"s.gc", "s.c"}, {"s.c2", "s.c"},
		{"s.self", "s.self"}, {"S.SELF", "s.self"},
		{"x.c", "x.c"}, {"y.p", "x.c"},
		{"s.other", ""},
	} {
		got, ok := g.Of(tn(tc.table))
		if got != tc.group || ok != (tc.group != "") {
			t.Errorf("Of(%s) = %q, %v; want %q", tc.table, got, ok, tc.group)
		}
	}
	if _, ok := (*Groups)(nil).Of(tn("s.p")); ok {
		t.Error("a nil Groups has a group")
	}
}

func TestMissing(t *testing.T) {
	source := []Key{
		key("fk_ok", "s.ok", "s.p", "CASCADE"),
		key("fk_routed", "s.r", "s.p", "CASCADE"),   // target table lacks the key
		key("fk_rule", "s.rule", "s.p", "SET NULL"), // target key restricts instead
		key("fk_parent", "s.c", "gone.p", "CASCADE"),
		key("fk_child", "gone.c", "s.p", "CASCADE"),
		key("fk_new", "s.new", "s.p", "CASCADE"),     // not on the target yet
		key("fk_restrict", "s.x", "s.p", "RESTRICT"), // cascades nothing
		key("fk_other", "gone.a", "gone.b", "CASCADE"),
	}
	target := []Key{
		key("any_name", "t.ok", "t.p", "CASCADE"),
		key("fk_rule", "t.rule", "t.p", "NO ACTION"),
	}
	sel := Selection{
		Allowed: func(t filter.TableName) bool { return t.Schema == "s" },
		Route: func(x filter.TableName) filter.TableName {
			if x.Table == "r" {
				return tn("t.r_merged")
			}
			return filter.TableName{Schema: "t", Table: x.Table}
		},
	}
	exists := func(x filter.TableName) bool { return x.Table != "new" }
	got := Missing(source, sel, target, exists)
	want := map[string]string{
		"fk_child":  "the child table itself is not replicated",
		"fk_parent": "its parent table `gone`.`p` is not replicated",
		"fk_routed": "target table `t`.`r_merged` has no foreign key (`p`) REFERENCES `t`.`p` (`id`) ON DELETE CASCADE",
		"fk_rule":   "target table `t`.`rule` has no foreign key (`p`) REFERENCES `t`.`p` (`id`) ON DELETE SET NULL",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d: %+v", len(got), len(want), got)
	}
	for _, p := range got {
		w, ok := want[p.Key.Name]
		if !ok || !strings.Contains(p.Message(), w) || !strings.Contains(p.Message(), p.Key.Child.String()) {
			t.Errorf("problem %s: %q, want it to contain %q and the table", p.Key.Name, p.Message(), w)
		}
	}
	if got[0].Key.Child.String() > got[len(got)-1].Key.Child.String() {
		t.Errorf("problems not sorted by child table: %+v", got)
	}
}

func TestActionsIn(t *testing.T) {
	def := "CREATE TABLE `c` (\n  `id` int(11) NOT NULL,\n  `p` int(11) DEFAULT NULL,\n" +
		"  CONSTRAINT `a` FOREIGN KEY (`p`) REFERENCES `p` (`id`) ON DELETE CASCADE ON UPDATE SET NULL,\n" +
		"  CONSTRAINT `b` FOREIGN KEY (`p`) REFERENCES `p` (`id`) ON UPDATE CASCADE,\n" +
		"  CONSTRAINT `c` FOREIGN KEY (`p`) REFERENCES `p` (`id`)\n) ENGINE=InnoDB"
	for name, want := range map[string][2]string{
		"a": {"CASCADE", "SET NULL"}, "b": {"RESTRICT", "CASCADE"}, "c": {"RESTRICT", "RESTRICT"},
	} {
		d, u := actionsIn(def, name)
		if d != want[0] || u != want[1] {
			t.Errorf("actionsIn(%s) = %s, %s; want %v", name, d, u, want)
		}
	}
}
