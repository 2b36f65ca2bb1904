package stream

import (
	"fmt"
	"slices"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// fitSchema returns the part of s that describes the rows of a rows event
// whose table map is tm. The schema cache reads the table as it is now,
// while a stream that is behind replays rows written before a later ALTER:
//   - with the same column count, s fits as it is;
//   - when the table map names its columns (binlog_row_metadata=FULL),
//     the columns are picked by name;
//   - else, with fewer columns in the rows than in the table, the rows are
//     taken to hold the first columns (ALTER TABLE … ADD COLUMN appends);
//   - else (a column was dropped since) the rows cannot be described, and
//     the error says how to get past that.
//
// The key is narrowed to the columns kept; when a key column is not among
// them, every kept column is the key.
func fitSchema(s *sqlschema.Table, tm *replication.TableMapEvent) (*sqlschema.Table, error) {
	n := int(tm.ColumnCount)
	if n == len(s.Columns) {
		return s, nil
	}
	var pick []int
	switch {
	case len(tm.ColumnName) == n:
		byName := make(map[string]int, len(s.Columns))
		for i, c := range s.Columns {
			byName[c.Name] = i
		}
		for _, name := range tm.ColumnName {
			i, ok := byName[string(name)]
			if !ok {
				return nil, fmt.Errorf("stream: %s: the binlog's rows have column %q, which the table no longer has "+
					"(dropped or renamed since); resume with ignore-untreated to skip past these rows", s, name)
			}
			pick = append(pick, i)
		}
	case n < len(s.Columns):
		for i := range n {
			pick = append(pick, i)
		}
	default:
		return nil, fmt.Errorf("stream: %s: the binlog's rows have %d columns but the table now has %d (a column was "+
			"dropped since these rows were written); set binlog_row_metadata=FULL on the source so rows name their "+
			"columns, or resume with ignore-untreated to skip past these rows", s, n, len(s.Columns))
	}
	return subSchema(s, pick), nil
}

// subSchema is s with only the columns at pick, in that order, and the
// indexes all of whose columns are kept.
func subSchema(s *sqlschema.Table, pick []int) *sqlschema.Table {
	out := &sqlschema.Table{Schema: s.Schema, Name: s.Name, KeyReason: s.KeyReason, RowKeyIndex: s.RowKeyIndex}
	at := make(map[int]int, len(pick))
	for j, i := range pick {
		out.Columns = append(out.Columns, s.Columns[i])
		at[i] = j
	}
	for _, ix := range s.Indexes {
		if slices.IndexFunc(ix.Columns, func(c string) bool { return out.ColumnIndex(c) < 0 }) < 0 {
			out.Indexes = append(out.Indexes, ix)
		}
	}
	for _, k := range s.RowKey {
		j, ok := at[k]
		if !ok {
			out.RowKey, out.KeyReason, out.RowKeyIndex = nil, sqlschema.KeyNone, ""
			break
		}
		out.RowKey = append(out.RowKey, j)
	}
	if out.RowKey == nil {
		for j := range out.Columns {
			out.RowKey = append(out.RowKey, j)
		}
	}
	return out
}
