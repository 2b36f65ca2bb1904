package check

import (
	"context"
	"fmt"

	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/fkeys"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// checkForeignKeys warns about every cascading foreign key of the source
// (ON DELETE/UPDATE CASCADE, SET NULL, SET DEFAULT) of a selected table
// that the target will not reproduce: the source does not write the rows
// its cascades change to the binlog, so only the target's own key can make
// that change. A key whose child or parent the block-allow list leaves
// out, or whose routed child table exists on the target without the same
// key to the routed parent, is a warning naming the table and the key; a
// child table not on the target yet (the load creates it from the source's
// definition) is not.
func (c *run) checkForeignKeys(ctx context.Context, s *server, srcKeys []fkeys.Key, l *items) {
	sel := fkeys.Selection{
		Allowed: func(t filter.TableName) bool { return c.selected(t.Schema, t.Table) },
		Route:   func(t filter.TableName) filter.TableName { return c.router.Route(t.Schema, t.Table) },
	}
	cascading := 0
	routed := map[*table]filter.TableName{}
	for _, k := range srcKeys {
		if k.Cascades() && (sel.Allowed(k.Child) || sel.Allowed(k.Parent)) {
			cascading++
			routed[&table{schema: k.Child.Schema, name: k.Child.Table}] = c.router.Route(k.Child.Schema, k.Child.Table)
		}
	}
	if cascading == 0 {
		l.pass("foreign_keys", s.what, "no selected table of source %s has a cascading foreign key", c.src.SourceID)
		return
	}
	existing, key, err := readTargetTables(ctx, s, routed)
	if err != nil {
		l.warn("foreign_keys", s.what, "give the target user SELECT on information_schema of the target schemas",
			"read the target tables on %s: %v; whether the target reproduces the source's cascades was not checked", s.what, err)
		return
	}
	tgtKeys, err := query(ctx, func(ctx context.Context) ([]fkeys.Key, error) { return fkeys.Read(ctx, s.db, nil) })
	if err != nil {
		l.warn("foreign_keys", s.what, "give the target user SELECT on information_schema of the target schemas",
			"read the foreign keys of %s: %v; whether the target reproduces the source's cascades was not checked", s.what, err)
		return
	}
	problems := fkeys.Missing(srcKeys, sel, tgtKeys, func(t filter.TableName) bool {
		_, ok := existing[key(t)]
		return ok
	})
	for _, p := range problems {
		l.warn("foreign_keys", p.TargetChild.String(),
			fmt.Sprintf("give target table %s the same foreign key (ALTER TABLE %s ADD CONSTRAINT %s FOREIGN KEY ... %s), "+
				"or replicate both tables of the key", p.TargetChild, p.TargetChild, sqlschema.QuoteName(p.Key.Name), p.Key.Actions()),
			"%s", p.Message())
	}
	if len(problems) == 0 {
		l.pass("foreign_keys", s.what, "the target reproduces the %d cascading foreign key(s) of the selected tables of source %s (or will: their tables do not exist there yet)",
			cascading, c.src.SourceID)
	}
}
