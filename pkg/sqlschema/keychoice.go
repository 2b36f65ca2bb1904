package sqlschema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// IndexShape is what paging needs to know of an index beyond Index: its
// type and whether it indexes whole columns.
type IndexShape struct {
	// Type is INDEX_TYPE: "BTREE", "HASH", "FULLTEXT", "SPATIAL".
	Type string
	// Prefix: some column is indexed by a prefix (SUB_PART is set), so
	// the index does not order the whole values.
	Prefix bool
}

// ReadIndexShapes reads the IndexShape of every index of schema.table, by
// index name.
func ReadIndexShapes(ctx context.Context, q Querier, schema, table string) (map[string]IndexShape, error) {
	out := map[string]IndexShape{}
	err := ScanAll(ctx, q, "SELECT INDEX_NAME, INDEX_TYPE, SUB_PART FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
		[]any{schema, table}, func(rows *sql.Rows) error {
			var name, typ string
			var subPart sql.NullInt64
			if err := rows.Scan(&name, &typ, &subPart); err != nil {
				return err
			}
			s := out[name]
			s.Type = typ
			s.Prefix = s.Prefix || subPart.Valid
			out[name] = s
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("read the indexes of %s.%s from information_schema: %w", schema, table, err)
	}
	return out, nil
}

// KeyRejected says why one index of a table cannot page it.
type KeyRejected struct {
	Index  string
	Reason string
}

// ChooseKeyset picks the key that pages t exactly: the primary key, else
// the first unique BTREE key in the server's key order whose columns are
// NOT NULL and whole (no prefix) and whose every column can page (KindOf).
// It returns nil when no index can, and in rejected every candidate it
// passed over and why, for the log. results is as for NewKeyset. An index
// naming a column the table lacks (altered between the reads) is an
// error.
func ChooseKeyset(t *Table, shapes map[string]IndexShape, results string) (k *Keyset, rejected []KeyRejected, err error) {
	var candidates []Index
	for _, ix := range t.Indexes {
		if ix.Primary {
			candidates = append([]Index{ix}, candidates...)
		} else if ix.Unique {
			candidates = append(candidates, ix)
		}
	}
	for _, ix := range candidates {
		shape, ok := shapes[ix.Name]
		switch {
		case ix.Nullable:
			rejected = append(rejected, KeyRejected{ix.Name, "a column of it may be NULL"})
			continue
		case !ok:
			rejected = append(rejected, KeyRejected{ix.Name, "its type is unknown (altered meanwhile?)"})
			continue
		case shape.Type != "BTREE":
			rejected = append(rejected, KeyRejected{ix.Name, "it is a " + shape.Type + " index, which does not order its values"})
			continue
		case shape.Prefix:
			rejected = append(rejected, KeyRejected{ix.Name, "it indexes a prefix of a column"})
			continue
		}
		for _, name := range ix.Columns {
			if t.ColumnIndex(name) < 0 {
				return nil, nil, fmt.Errorf("table %s: key %s names column %s, which information_schema does not list (altered meanwhile?)", t, ix.Name, name)
			}
		}
		k, err := NewKeyset(t, ix.Name, ix.Columns, results)
		if errors.Is(err, ErrCannotPage) {
			rejected = append(rejected, KeyRejected{ix.Name, err.Error()})
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		return k, rejected, nil
	}
	return nil, rejected, nil
}
