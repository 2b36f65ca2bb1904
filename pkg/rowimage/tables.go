package rowimage

import (
	"context"
	"errors"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Tables resolves table maps to Tables: the table map's metadata completed
// by the target table's model, routed with a Router. It caches the target
// models it reads and the Tables it builds until Invalidate (after a DDL).
// Not safe for concurrent use: one reader of the binlog owns it.
type Tables struct {
	db     sqlschema.Querier
	route  *filter.Router
	tables map[filter.TableName]*Table
	// targets are the target tables' models by target name; a nil model:
	// the target has no such table.
	targets map[filter.TableName]*sqlschema.Table
}

// NewTables returns Tables reading target models through db and routing
// source tables with r.
func NewTables(db sqlschema.Querier, r *filter.Router) *Tables {
	return &Tables{db: db, route: r, tables: map[filter.TableName]*Table{}, targets: map[filter.TableName]*sqlschema.Table{}}
}

// Get returns the Table a table map describes, the cached one while the
// table map's shape is unchanged.
func (c *Tables) Get(ctx context.Context, tm *replication.TableMapEvent) (*Table, error) {
	src := filter.TableName{Schema: string(tm.Schema), Table: string(tm.Table)}
	if t, ok := c.tables[src]; ok && (t.shape == tm || sameShape(t.shape, tm)) {
		t.shape = tm
		return t, nil
	}
	target := c.route.Route(src.Schema, src.Table)
	ext, err := c.route.Extend(src.Schema, src.Table)
	if err != nil {
		return nil, errs.New(CodeTableInfo, false, "sync: table %s: %v", src, err)
	}
	tt, err := c.Target(ctx, target)
	if err != nil {
		return nil, err
	}
	t, err := NewExtended(src, target, tm, tt, ext)
	if err != nil {
		return nil, err
	}
	c.tables[src] = t
	return t, nil
}

// Target returns (and caches) the model of target table name; nil when
// the target has no such table.
func (c *Tables) Target(ctx context.Context, name filter.TableName) (*sqlschema.Table, error) {
	if tt, ok := c.targets[name]; ok {
		return tt, nil
	}
	tt, err := ReadTarget(ctx, c.db, name)
	if err != nil {
		return nil, errs.Wrap(err, CodeTableInfo, "sync: read structure of target table %s", name)
	}
	c.targets[name] = tt
	return tt, nil
}

// Invalidate forgets every table and target model, after a DDL.
func (c *Tables) Invalidate() {
	clear(c.tables)
	clear(c.targets)
}

// ReadTarget reads the model of table name through q; nil (and no error)
// when the server has no such table.
func ReadTarget(ctx context.Context, q sqlschema.Querier, name filter.TableName) (*sqlschema.Table, error) {
	tt, err := sqlschema.ReadTable(ctx, q, name.Schema, name.Table)
	if errors.Is(err, sqlschema.ErrTableNotFound) {
		return nil, nil
	}
	return tt, err
}
