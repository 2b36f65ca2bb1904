package sqlschema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// ErrTableNotFound is wrapped by ReadTable when the server has no such
// table (dropped, renamed, or not visible to the user).
var ErrTableNotFound = errors.New("table not found")

// Querier is what the reader reads through: a *sql.DB, *sql.Conn or
// *sql.Tx (a transaction's consistent snapshot reads the model as of the
// snapshot only for what information_schema takes from it; see the dump).
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// TableName names a table by schema and name.
type TableName struct{ Schema, Name string }

const columnsSelect = "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, DATA_TYPE, COLUMN_TYPE, " +
	"IFNULL(CHARACTER_SET_NAME, ''), IS_NULLABLE, EXTRA, COLUMN_DEFAULT, IFNULL(COLLATION_NAME, '') FROM information_schema.COLUMNS WHERE "

// indexesSelect has no ORDER BY on the index name: the server lists a
// table's indexes in its own key order (see Table), which decides the row
// key of a table without a primary key.
const indexesSelect = "SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME, NULLABLE, INDEX_TYPE, SUB_PART " +
	"FROM information_schema.STATISTICS WHERE "

// ReadTable reads schema.table's model. A table the server does not list
// is an error wrapping ErrTableNotFound that names it.
func ReadTable(ctx context.Context, q Querier, schema, table string) (*Table, error) {
	tables, err := read(ctx, q, "TABLE_SCHEMA = ? AND TABLE_NAME = ?", []any{schema, table})
	if err != nil {
		return nil, fmt.Errorf("read the structure of %s.%s from information_schema: %w", schema, table, err)
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("%s.%s: %w (check that it exists and that the user may SELECT it)", schema, table, ErrTableNotFound)
	}
	return tables[0], nil
}

// ReadSchemas reads the model of every table and view in the given
// schemas (every non-system schema when none are given) in two queries,
// sorted by schema and name.
func ReadSchemas(ctx context.Context, q Querier, schemas ...string) ([]*Table, error) {
	cond, args := "TABLE_SCHEMA NOT IN "+SystemSchemaList(), []any(nil)
	if len(schemas) > 0 {
		cond = "TABLE_SCHEMA IN (" + strings.TrimSuffix(strings.Repeat("?,", len(schemas)), ",") + ")"
		for _, s := range schemas {
			args = append(args, s)
		}
	}
	tables, err := read(ctx, q, cond, args)
	if err != nil {
		return nil, fmt.Errorf("read table structures from information_schema: %w", err)
	}
	return tables, nil
}

// read builds the models of the tables where cond holds.
func read(ctx context.Context, q Querier, cond string, args []any) ([]*Table, error) {
	var out []*Table
	byName := map[TableName]*Table{}
	err := ScanAll(ctx, q, columnsSelect+cond+" ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION", args, func(rows *sql.Rows) error {
		var name TableName
		var colName, dataType, colType, charset, nullable, extra, collation string
		var ordinal int
		var def sql.NullString
		if err := rows.Scan(&name.Schema, &name.Name, &colName, &ordinal, &dataType, &colType, &charset, &nullable, &extra, &def, &collation); err != nil {
			return err
		}
		col, err := NewColumn(colName, dataType, colType, charset, nullable == "YES")
		if err != nil {
			return fmt.Errorf("%s.%s: %w", name.Schema, name.Name, err)
		}
		col.Ordinal = ordinal
		col.Collation = strings.ToLower(collation)
		col.SetExtra(extra)
		col.SetDefault(def.String, def.Valid)
		t := byName[name]
		if t == nil {
			t = &Table{Schema: name.Schema, Name: name.Name}
			byName[name] = t
			out = append(out, t)
		}
		t.Columns = append(t.Columns, col)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("columns: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	type indexName struct {
		table TableName
		index string
	}
	positions := map[indexName]int{}
	err = ScanAll(ctx, q, indexesSelect+cond, args, func(rows *sql.Rows) error {
		var name TableName
		var index, column, nullable, typ string
		var nonUnique, seq int
		var subPart sql.NullInt64
		if err := rows.Scan(&name.Schema, &name.Name, &index, &nonUnique, &seq, &column, &nullable, &typ, &subPart); err != nil {
			return err
		}
		t := byName[name]
		if t == nil {
			return nil // created between the two queries
		}
		key := indexName{name, index}
		pos, ok := positions[key]
		if !ok {
			pos = len(t.Indexes)
			positions[key] = pos
			t.Indexes = append(t.Indexes, Index{Name: index, Primary: index == "PRIMARY", Unique: nonUnique == 0, Type: typ})
		}
		ix := &t.Indexes[pos]
		for len(ix.Columns) < seq {
			ix.Columns = append(ix.Columns, "")
		}
		ix.Columns[seq-1] = column
		if strings.EqualFold(nullable, "YES") {
			ix.Nullable = true
		}
		if subPart.Valid {
			ix.Prefix = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("indexes: %w", err)
	}
	for _, t := range out {
		t.chooseRowKey()
	}
	return out, nil
}
