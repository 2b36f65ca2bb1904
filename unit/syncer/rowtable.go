package syncer

import (
	"context"
	"database/sql"

	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/dmworker/dm-worker/pkg/filter"
)

// Table is how the sync unit reads and writes one source table's row
// images, for a reader of the same binlog outside the unit (the validator):
// the same column names, types, routing and row key, and the same value
// conversion, so both see a row exactly as the target was given it.
// Read-only for its users.
type Table struct {
	Source, Target filter.TableName
	// Columns are the names in binlog order; Types the real binlog types
	// (ENUM and SET resolved); Unsigned and Binary per column as the sync
	// unit uses them.
	Columns  []string
	Types    []byte
	Unsigned []bool
	Binary   []bool
	// Key are the positions of the columns that identify a row (primary
	// key, else a NOT NULL unique key); empty when the table has none.
	Key  []int
	info *tableInfo
}

// ConvertRow converts one row image of the table to the values the sync
// unit writes to the target.
func (t *Table) ConvertRow(row []any) ([]any, error) { return t.info.convertRow(row) }

// AppendKey appends the exact encoding of a converted row image's key
// values (the one the sync unit's compaction keys rows by) to b: two
// images' encodings are equal exactly when their keys are.
func (t *Table) AppendKey(b []byte, image []any) []byte { return appendKey(b, image, t.Key, false) }

// WhereValue is the form of a converted value in a WHERE clause of the
// sync unit: text columns compare as text, binary columns as bytes.
func WhereValue(v any, binary bool) any { return whereValue(v, binary) }

// Tables resolves table maps to Tables as the sync unit does: the table
// map's metadata completed by the target's structure. Not safe for
// concurrent use.
type Tables struct {
	cache *tableCache
	views map[*tableInfo]*Table
}

// NewTables returns Tables reading target structures from db and routing
// with r.
func NewTables(db *sql.DB, r *filter.Router) *Tables {
	return &Tables{cache: newTableCache(db, r), views: map[*tableInfo]*Table{}}
}

// Get returns the Table a table map describes.
func (t *Tables) Get(ctx context.Context, tm *replication.TableMapEvent) (*Table, error) {
	ti, err := t.cache.get(ctx, tm)
	if err != nil {
		return nil, err
	}
	if v, ok := t.views[ti]; ok {
		return v, nil
	}
	v := &Table{Source: ti.source, Target: ti.target, Columns: ti.columns, Types: ti.types,
		Unsigned: ti.unsigned, Binary: ti.binary, Key: ti.key, info: ti}
	t.views[ti] = v
	return v, nil
}

// Invalidate forgets every table, after a DDL.
func (t *Tables) Invalidate() {
	t.cache.invalidate()
	clear(t.views)
}

// RowsRemovedBy names the tables (schema-qualified with the event's default
// schema) whose rows a DDL statement removes or moves away: TRUNCATE TABLE,
// DROP TABLE and the old names of RENAME TABLE; and the databases DROP
// DATABASE removes. A query that does not parse removes nothing.
func RowsRemovedBy(schema, query string) (tables []filter.TableName, dbs []string) {
	nodes, _, err := parser.New().Parse(query, "", "")
	if err != nil {
		return nil, nil
	}
	for _, n := range nodes {
		switch n := n.(type) {
		case *ast.TruncateTableStmt:
			tables = append(tables, qualify(n.Table, schema))
		case *ast.DropTableStmt:
			if n.IsView {
				continue
			}
			for _, t := range n.Tables {
				tables = append(tables, qualify(t, schema))
			}
		case *ast.RenameTableStmt:
			for _, tt := range n.TableToTables {
				tables = append(tables, qualify(tt.OldTable, schema))
			}
		case *ast.DropDatabaseStmt:
			dbs = append(dbs, n.Name.O)
		}
	}
	return tables, dbs
}
