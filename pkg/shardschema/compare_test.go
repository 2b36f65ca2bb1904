package shardschema

import (
	"errors"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

func TestCompare(t *testing.T) {
	id := func() sqlschema.Column { return col(t, "id", "int(11)", "not null") }
	prev := table([]sqlschema.Column{id(), col(t, "a", "int(11)")}, pk("id"))
	cases := []struct {
		name     string
		post     *sqlschema.Table
		want     int
		conflict []string
	}{
		{"unchanged", table([]sqlschema.Column{id(), col(t, "a", "int(11)")}, pk("id")), 0, nil},
		{"index added", table([]sqlschema.Column{id(), col(t, "a", "int(11)")}, pk("id"), idx("ia", "a")), 0, nil},
		{"column added", table([]sqlschema.Column{id(), col(t, "a", "int(11)"), col(t, "c", "int(11)")}, pk("id")), 1, nil},
		{"widened", table([]sqlschema.Column{id(), col(t, "a", "bigint(20)")}, pk("id")), 1, nil},
		{"NOT NULL relaxed", table([]sqlschema.Column{col(t, "id", "int(11)"), col(t, "a", "int(11)")}, pk("id")), 1, nil},
		{"column dropped", table([]sqlschema.Column{id()}, pk("id")), -1, nil},
		{"narrowed", table([]sqlschema.Column{id(), col(t, "a", "smallint(6)")}, pk("id")), -1, nil},
		{"renamed", table([]sqlschema.Column{id(), col(t, "b", "int(11)")}, pk("id")), 0,
			[]string{"table of t9", "drops column `a`", "adds column `b`", "renamed column"}},
		{"type moved to another ladder", table([]sqlschema.Column{id(), col(t, "a", "varchar(10)", "charset utf8mb4")}, pk("id")), 0,
			[]string{"column `a` of t9", "changes `a` int(11) NULL DEFAULT NULL to `a` varchar(10)", "no common widening ladder"}},
		{"default changed", table([]sqlschema.Column{id(), col(t, "a", "int(11)", "default 3")}, pk("id")), 0,
			[]string{"default NULL differs from 3"}},
		{"widened and made NOT NULL", table([]sqlschema.Column{id(), col(t, "a", "bigint(20)", "not null")}, pk("id")), 0,
			[]string{"widens one of type and NULL and narrows the other"}},
		{"primary key changed", table([]sqlschema.Column{id(), col(t, "a", "int(11)")}, pk("id", "a")), 0,
			[]string{"primary key of t9", "from PRIMARY KEY (`id`) to PRIMARY KEY (`id`, `a`)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Compare("t9", prev, c.post)
			if c.conflict != nil {
				if !errors.Is(err, ErrIncompatible) {
					t.Fatalf("Compare = %d, %v; want a conflict", got, err)
				}
				for _, s := range c.conflict {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("conflict %q does not say %q", err, s)
					}
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Compare = %d, %v; want %d", got, err, c.want)
			}
		})
	}
}

// TestConverged covers DM's rule for conflicting changes: they take
// effect once every member made them.
func TestConverged(t *testing.T) {
	id := func() sqlschema.Column { return col(t, "id", "int(11)", "not null") }
	withA := table([]sqlschema.Column{id(), col(t, "a", "int(11)")})
	withB := table([]sqlschema.Column{id(), col(t, "b", "int(11)")})
	withC := table([]sqlschema.Column{id(), col(t, "c", "int(11)")})
	onlyID := table([]sqlschema.Column{id()})
	aText := table([]sqlschema.Column{id(), col(t, "a", "varchar(10)", "charset utf8mb4")})
	aNotNull := table([]sqlschema.Column{id(), col(t, "a", "int(11)"), col(t, "n", "int(11)", "not null")})

	rename := func(name string) Pending { return Pending{Name: name, Prev: withA, Post: withB} }
	cases := []struct {
		name    string
		pending []Pending
		finals  []Member
		wait    string // "" converged
		columns string
	}{
		{"rename on one of two", []Pending{rename("t1")}, []Member{{"t1", withB}, {"t2", withA}},
			"t1 dropped column `a` but t2 still has it", ""},
		{"rename on both", []Pending{rename("t1"), rename("t2")}, []Member{{"t1", withB}, {"t2", withB}},
			"", "id int(11) NOT NULL, b int(11) NULL DEFAULT NULL"},
		{"rename on one, drop on the other", []Pending{rename("t1")}, []Member{{"t1", withB}, {"t2", onlyID}},
			"t1 has column `b` but t2 does not yet", ""},
		{"type change on one", []Pending{{Name: "t1", Prev: withA, Post: aText}}, []Member{{"t1", aText}, {"t2", withA}},
			"column `a` of t1 and t2", ""},
		{"type change on both", []Pending{{Name: "t1", Prev: withA, Post: aText}, {Name: "t2", Prev: withA, Post: aText}},
			[]Member{{"t1", aText}, {"t2", aText}}, "", "id int(11) NOT NULL, a varchar(10) CHARACTER SET utf8mb4 NULL DEFAULT NULL"},
		{"NOT NULL column added by one", []Pending{{Name: "t1", Prev: withA, Post: aNotNull}}, []Member{{"t1", aNotNull}, {"t2", withA}},
			"NOT NULL without a default", ""},
		{"NOT NULL column added by both", []Pending{{Name: "t1", Prev: withA, Post: aNotNull}, {Name: "t2", Prev: withA, Post: aNotNull}},
			[]Member{{"t1", aNotNull}, {"t2", aNotNull}}, "", "id int(11) NOT NULL, a int(11) NULL DEFAULT NULL, n int(11) NOT NULL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j, wait := Converged(nil, c.pending, c.finals)
			if c.wait != "" {
				if j != nil || !strings.Contains(wait, c.wait) {
					t.Fatalf("Converged = %v, %q; want no join and a wait saying %q", j, wait, c.wait)
				}
				return
			}
			if wait != "" || j == nil {
				t.Fatalf("Converged: not converged: %s", wait)
			}
			if got := colNames(j); got != c.columns {
				t.Errorf("joined %s, want %s", got, c.columns)
			}
		})
	}

	// Two tables held at renames of a to different names never converge.
	if why := Exclusive(rename("t1"), Pending{Name: "t2", Prev: withA, Post: withC}); !strings.Contains(why, "t1 has column `b` but t2, held at its own conflicting change, has none") {
		t.Errorf("Exclusive(a->b, a->c) = %q", why)
	}
	if why := Exclusive(rename("t1"), rename("t2")); why != "" {
		t.Errorf("Exclusive(a->b, a->b) = %q, want none", why)
	}
	if why := Exclusive(Pending{Name: "t1", Prev: withA, Post: aText}, Pending{Name: "t2", Prev: onlyID, Post: withA}); why == "" {
		t.Error("Exclusive(a to text, a added as int) found no contradiction")
	}
}
