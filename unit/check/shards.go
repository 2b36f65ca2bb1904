package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// checkShards checks, for a sharding task (shard-mode set), the tables of
// this source that a route merges into one target table, as DM's checker
// does: they must have the same columns (a pessimistic lock compares the
// shards' DDLs; shards that already differ never agree), and an
// AUTO_INCREMENT key of shards merged into one table gives the same ids
// on every shard, which collide on the target. The other sources'
// shards are checked by their own subtasks' prechecks.
func (c *run) checkShards(s *server, tables []*table, l *items) {
	if c.cfg.ShardMode == "" {
		return
	}
	groups := map[filter.TableName][]*table{}
	var targets []filter.TableName
	for _, t := range tables {
		r := c.router.Route(t.schema, t.name)
		if _, ok := groups[r]; !ok {
			targets = append(targets, r)
		}
		groups[r] = append(groups[r], t)
	}
	slices.SortFunc(targets, func(a, b filter.TableName) int { return strings.Compare(a.String(), b.String()) })
	merged, differ := 0, 0
	var collide []string
	for _, target := range targets {
		members := groups[target]
		if len(members) < 2 {
			continue
		}
		merged++
		first := members[0]
		for _, m := range members[1:] {
			if d := compareShardColumns(first, m); d != "" {
				differ++
				l.fail("shard_table_schema", s.what, "make the shards' schemas equal before the task starts (ALTER the odd one), or route them to different target tables",
					"shards %s and %s of source %s merge into %s but their columns differ: %s", first, m, c.src.SourceID, target, d)
			}
		}
		collide = append(collide, c.autoKeysColliding(members)...)
	}
	if merged == 0 {
		return
	}
	if differ == 0 {
		l.pass("shard_table_schema", s.what, "the shards of source %s merged into %d target table(s) have the same columns", c.src.SourceID, merged)
	}
	if len(collide) > 0 {
		l.warn("shard_auto_increment", s.what, "make the shards' ids disjoint (auto_increment_offset/increment, or id ranges), or key the merged table by the id and the shard (extend columns)",
			"%d shard(s) of source %s have an AUTO_INCREMENT column in their key and are merged into one table: the same id on two shards is one row of the target, and the later write replaces the earlier: %s",
			len(collide), c.src.SourceID, capList(collide, listMax))
	}
}

// compareShardColumns says how the columns of shard b differ from a's
// ("" when they are the same).
func compareShardColumns(a, b *table) string {
	var d []string
	for i := 0; i < max(len(a.columns), len(b.columns)); i++ {
		switch {
		case i >= len(a.columns):
			d = append(d, fmt.Sprintf("%s has an extra column %d %s %s", b, i+1, sqlschema.QuoteName(b.columns[i].name), b.columns[i].typ))
		case i >= len(b.columns):
			d = append(d, fmt.Sprintf("%s lacks column %d %s %s", b, i+1, sqlschema.QuoteName(a.columns[i].name), a.columns[i].typ))
		case !strings.EqualFold(a.columns[i].name, b.columns[i].name) || a.columns[i].typ != b.columns[i].typ:
			d = append(d, fmt.Sprintf("column %d is %s %s on %s but %s %s on %s", i+1,
				sqlschema.QuoteName(a.columns[i].name), a.columns[i].typ, a, sqlschema.QuoteName(b.columns[i].name), b.columns[i].typ, b))
		}
	}
	return capJoin(d, 5, "; ")
}

// autoKeysColliding lists the AUTO_INCREMENT key columns of members whose
// ids can collide on the merged table: extend columns (route extractors)
// keep two shards' ids apart when their values differ, so only shards that
// share their extend values with another shard with such a key count.
func (c *run) autoKeysColliding(members []*table) []string {
	byValues := map[string][]*table{}
	var order []string
	for _, m := range members {
		if m.autoKey == "" {
			continue
		}
		ext, err := c.router.Extend(m.schema, m.name)
		if err != nil {
			ext = nil // the config check names a bad extractor
		}
		k := fmt.Sprint(ext)
		if _, ok := byValues[k]; !ok {
			order = append(order, k)
		}
		byValues[k] = append(byValues[k], m)
	}
	var out []string
	for _, k := range order {
		if ms := byValues[k]; len(ms) > 1 {
			for _, m := range ms {
				out = append(out, fmt.Sprintf("%s.%s", m, sqlschema.QuoteName(m.autoKey)))
			}
		}
	}
	return out
}
