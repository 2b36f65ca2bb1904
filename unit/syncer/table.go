package syncer

import (
	"context"
	"database/sql"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/fkeys"
	"github.com/dmworker/dm-worker/pkg/rowimage"
)

// tableInfo is what the apply path needs to know about one source table:
// the shared row model (column names in binlog order, how to convert
// values, which columns identify a row on the target; see pkg/rowimage)
// and how the sync unit applies its changes.
type tableInfo struct {
	*rowimage.Table
	// compact: a batch's changes of the table may be reduced to each key's
	// end state (see compact.go).
	compact bool
	// fkGroup names the group of target tables foreign keys connect this
	// table's target table to ("" when no key of the target touches it):
	// its changes are applied in binlog order on one worker, with the
	// source session's foreign_key_checks (see foreign_keys.go).
	fkGroup string
}

// tableCache caches table info for the read loop that owns it (not safe for
// concurrent use). DDL clears it.
type tableCache struct {
	db *sql.DB
	// rows holds the row models and the target's table models
	// (*sqlschema.Table) they were built from, as of the last DDL.
	rows  *rowimage.Tables
	infos map[tableName]*tableInfo
	// groups are the target's foreign key groups, read with the first
	// table after a DDL; nil until then.
	groups *fkeys.Groups
}

func newTableCache(db *sql.DB, r *filter.Router) *tableCache {
	return &tableCache{db: db, rows: rowimage.NewTables(db, r), infos: map[tableName]*tableInfo{}}
}

// invalidate forgets everything, after a DDL.
func (c *tableCache) invalidate() {
	c.rows.Invalidate()
	clear(c.infos)
	c.groups = nil
}

// get returns the info of the table a table map describes.
func (c *tableCache) get(ctx context.Context, tm *replication.TableMapEvent) (*tableInfo, error) {
	rt, err := c.rows.Get(ctx, tm)
	if err != nil {
		return nil, err
	}
	if ti, ok := c.infos[rt.Source]; ok && ti.Table == rt {
		return ti, nil
	}
	ti := &tableInfo{Table: rt, compact: compactable(rt, rt.TargetUniques)}
	if err := c.setForeignKeyGroup(ctx, ti); err != nil {
		return nil, err
	}
	c.infos[rt.Source] = ti
	return ti, nil
}
