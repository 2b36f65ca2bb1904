package syncer

import (
	"context"
	"database/sql"
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/fkeys"
	"github.com/dmworker/dm-worker/pkg/rowimage"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
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
	// textCols marks the columns whose target column is a character or
	// binary string type: their byte values are written as hex literals
	// (literal.go). Nil when the target table could not be read.
	textCols []bool
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
	tt, err := c.rows.Target(ctx, rt.Target)
	if err != nil {
		return nil, err
	}
	ti.textCols = textColumns(rt.Columns, tt)
	c.infos[rt.Source] = ti
	return ti, nil
}

// stringTypes are the DATA_TYPEs that store a string as its bytes (in the
// column's charset): a hex literal and a _binary literal of the same bytes
// store the same value in them.
var stringTypes = map[string]bool{"char": true, "varchar": true, "binary": true, "varbinary": true,
	"tinytext": true, "text": true, "mediumtext": true, "longtext": true,
	"tinyblob": true, "blob": true, "mediumblob": true, "longblob": true}

// textColumns marks each of cols whose target column in tt is of a
// string type; nil without a target model.
func textColumns(cols []string, tt *sqlschema.Table) []bool {
	if tt == nil {
		return nil
	}
	types := make(map[string]string, len(tt.Columns))
	for _, c := range tt.Columns {
		types[strings.ToLower(c.Name)] = c.DataType
	}
	out := make([]bool, len(cols))
	for i, c := range cols {
		out[i] = stringTypes[types[strings.ToLower(c)]]
	}
	return out
}
