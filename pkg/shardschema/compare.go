package shardschema

import (
	"fmt"
	"strings"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Compare says how one member's schema changed from prev to post: 0
// (equal columns), 1 (wider: columns added, types widened, NOT NULL
// relaxed), -1 (narrower: the reverse), or a *Conflict when the change goes
// both ways (a column dropped and another added, as a rename reads; a type
// moved to another ladder; a changed default) or changes the primary key.
// Other index changes do not count: they never make one table's rows unfit
// for the other. name names the table in the conflict.
func Compare(name string, prev, post *sqlschema.Table) (int, error) {
	acc := orderEqual
	var wider, narrower string // an example of each, for the message
	for i := range prev.Columns {
		a := &prev.Columns[i]
		b := findColumn(post, a.Name)
		if b == nil {
			acc = combine(acc, orderNarrower)
			narrower = "drops " + columnObject(a.Name)
			continue
		}
		o, why := columnOrder(a, b)
		if o == orderNone {
			return 0, &Conflict{Object: columnObject(a.Name), Tables: []string{name},
				Reason: fmt.Sprintf("changes %s to %s: %s", definition(a), definition(b), why)}
		}
		switch o {
		case orderWider:
			wider = "widens " + columnObject(a.Name) + " to " + definition(b)
		case orderNarrower:
			narrower = "narrows " + columnObject(a.Name) + " to " + definition(b)
		}
		acc = combine(acc, o)
	}
	for i := range post.Columns {
		if findColumn(prev, post.Columns[i].Name) == nil {
			acc = combine(acc, orderWider)
			wider = "adds " + columnObject(post.Columns[i].Name)
		}
	}
	pa, pb := primary(prev), primary(post)
	if (pa == nil) != (pb == nil) || (pa != nil && !indexEqual(pa, pb)) {
		return 0, &Conflict{Object: "primary key", Tables: []string{name},
			Reason: fmt.Sprintf("changes the primary key from %s to %s", primaryText(pa), primaryText(pb))}
	}
	switch acc {
	case orderEqual:
		return 0, nil
	case orderWider:
		return 1, nil
	case orderNarrower:
		return -1, nil
	}
	return 0, &Conflict{Object: "table", Tables: []string{name},
		Reason: fmt.Sprintf("the change both %s and %s (a renamed column reads this way): no join can tell which rows mean what", narrower, wider)}
}

func primary(t *sqlschema.Table) *sqlschema.Index {
	for i := range t.Indexes {
		if t.Indexes[i].Primary {
			return &t.Indexes[i]
		}
	}
	return nil
}

func primaryText(ix *sqlschema.Index) string {
	if ix == nil {
		return "none"
	}
	return indexText(ix)
}

// Pending is a member's change that is not part of the join yet because it
// conflicted: its schema before (Prev, nil for a table that joined the
// group with a conflicting schema) and after (Post).
type Pending struct {
	Name       string
	Prev, Post *sqlschema.Table
}

// delta is what a pending change needs every member to follow: removed are
// the columns of Prev that Post drops or does not merely widen (they must
// be gone from, or be as in Post on, the joined schema), added the columns
// Post adds or redefines (every member must have them).
func (p Pending) delta() (removed, added []string) {
	if p.Prev == nil {
		return nil, nil
	}
	for i := range p.Prev.Columns {
		a := &p.Prev.Columns[i]
		b := findColumn(p.Post, a.Name)
		if b == nil {
			removed = append(removed, a.Name)
			continue
		}
		if o, _ := columnOrder(a, b); o == orderNarrower || o == orderNone {
			removed = append(removed, a.Name)
		}
		if !columnEqual(a, b) {
			added = append(added, a.Name)
		}
	}
	for i := range p.Post.Columns {
		if findColumn(p.Prev, p.Post.Columns[i].Name) == nil {
			added = append(added, p.Post.Columns[i].Name)
		}
	}
	return removed, added
}

// Converged decides whether the pending changes can all take effect: the
// members' final schemas (finals: each member's Post if it is pending, its
// schema otherwise) join, and every pending change is followed by all (DM's
// rule for conflicting DDLs: once every member dropped or renamed away a
// column and has the new one, the change is no longer ambiguous). It
// returns the joined schema, or "" and why not yet.
func Converged(order *sqlschema.Table, pending []Pending, finals []Member) (*sqlschema.Table, string) {
	joined, err := Join(order, finals)
	if err != nil {
		return nil, err.Error()
	}
	for _, p := range pending {
		removed, added := p.delta()
		for _, name := range removed {
			want, got := findColumn(p.Post, name), findColumn(joined, name)
			switch {
			case want == nil && got != nil:
				return nil, fmt.Sprintf("%s dropped %s but %s still has it", p.Name, columnObject(name), holder(finals, name))
			case want != nil && !columnEqual(want, got):
				return nil, fmt.Sprintf("%s changed %s to %s but the tables join to %s", p.Name, columnObject(name), definition(want), definition(got))
			}
		}
		for _, name := range added {
			for _, f := range finals {
				if f.Table.ColumnIndex(name) < 0 {
					return nil, fmt.Sprintf("%s has %s but %s does not yet", p.Name, columnObject(name), f.Name)
				}
			}
		}
	}
	return joined, ""
}

func holder(finals []Member, column string) string {
	var names []string
	for _, f := range finals {
		if f.Table.ColumnIndex(column) >= 0 {
			names = append(names, f.Name)
		}
	}
	return strings.Join(names, ", ")
}

// Exclusive returns why the pending changes a and b can never converge
// together while b's table stays at b.Post ("" when they may): a needs
// every member to follow it, and b, itself held at a conflicting change,
// does not.
func Exclusive(a, b Pending) string {
	if _, err := Join(nil, []Member{{a.Name, a.Post}, {b.Name, b.Post}}); err != nil {
		return err.Error()
	}
	removed, added := a.delta()
	for _, name := range removed {
		want, got := findColumn(a.Post, name), findColumn(b.Post, name)
		switch {
		case want == nil && got != nil:
			return fmt.Sprintf("%s dropped %s but %s, held at its own conflicting change, keeps it", a.Name, columnObject(name), b.Name)
		case want != nil && got != nil && !columnEqual(want, got):
			return fmt.Sprintf("%s changed %s to %s but %s, held at its own conflicting change, has %s",
				a.Name, columnObject(name), definition(want), b.Name, definition(got))
		}
	}
	for _, name := range added {
		if b.Post.ColumnIndex(name) < 0 {
			return fmt.Sprintf("%s has %s but %s, held at its own conflicting change, has none", a.Name, columnObject(name), b.Name)
		}
	}
	return ""
}
