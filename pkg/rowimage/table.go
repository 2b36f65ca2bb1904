package rowimage

import (
	"bytes"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// binaryCollation is the collation id of the binary character set.
const binaryCollation = 63

// Table is the row model of one source table: its column names in binlog
// order, how to convert their values, and which columns identify a row on
// the target. Build one with New (or through Tables). Read-only once
// built; it may be shared between goroutines.
type Table struct {
	Source, Target filter.TableName
	// Columns are the names in binlog order.
	Columns []string
	// Types are the real binlog column types (ENUM and SET resolved).
	Types []byte
	// Unsigned and Binary (a string column holding bytes: binary
	// collation) per column.
	Unsigned []bool
	Binary   []bool
	// Fixed is the byte length of a BINARY(n) column (0 for any other):
	// the binlog strips its trailing 0x00 bytes.
	Fixed []int
	// Key identifies a row: the table map's primary key, else the
	// target's row key when that is a unique key over NOT NULL columns
	// (sqlschema.KeyUnique: the first such key in the server's key
	// order). Empty: the table has none and rows are matched on all
	// columns.
	Key []int
	// Uniques are every unique key (Key first), the causality keys.
	Uniques [][]int
	// TargetUniques are the target's unique keys in its key order, as
	// positions in Columns; nil for a key naming a column the binlog
	// lacks.
	TargetUniques [][]int
	// Model is the target table's model the Table was built with; nil when
	// the target has no such table.
	Model *sqlschema.Table
	// Extend are the extend columns of the route rule (DM's extend-column)
	// and this table's values in them; they follow the binlog's columns in
	// Columns, and Key and Uniques include them (see extend.go).
	Extend []filter.ExtendColumn
	// extendValues are Extend's values as converted row values.
	extendValues []any
	// shape is the table map the Table was built from, to notice changes
	// (only the owner of the Tables that built it touches it).
	shape *replication.TableMapEvent
}

// New combines a table map's metadata with the target table's model tt
// (nil when the target has no such table) into the row model of source
// table src, whose rows go to target.
func New(src, target filter.TableName, tm *replication.TableMapEvent, tt *sqlschema.Table) (*Table, error) {
	return NewExtended(src, target, tm, tt, nil)
}

// NewExtended is New for a source table whose rows go to a target table
// with extend columns ext (Router.Extend): the columns follow the
// binlog's, every row gets their values, and the row key and every unique
// key include them.
func NewExtended(src, target filter.TableName, tm *replication.TableMapEvent, tt *sqlschema.Table, ext []filter.ExtendColumn) (*Table, error) {
	n := int(tm.ColumnCount)
	names, err := columnNames(src, target, tm, withoutExtend(tt, ext))
	if err != nil {
		return nil, err
	}
	if err := checkExtendNames(src, names, ext); err != nil {
		return nil, err
	}
	m := n + len(ext)
	t := &Table{Source: src, Target: target, shape: tm, Model: tt, Columns: names,
		Types: make([]byte, n, m), Unsigned: make([]bool, n, m), Binary: make([]bool, n, m), Fixed: make([]int, n, m)}
	t.setColumnTypes(tm, tt)
	t.addExtend(ext)
	byName := columnPositions{}
	for i, name := range t.Columns {
		byName[strings.ToLower(name)] = i
	}
	t.setKeys(tm, tt, byName)
	return t, nil
}

// modelColumns are tt's columns, none for a missing table.
func modelColumns(tt *sqlschema.Table) []sqlschema.Column {
	if tt == nil {
		return nil
	}
	return tt.Columns
}

// columnNames are the table's column names in binlog order: from the table
// map when the source writes them (binlog_row_metadata FULL), else from the
// target table, which must then have as many columns.
func columnNames(src, target filter.TableName, tm *replication.TableMapEvent, tt *sqlschema.Table) ([]string, error) {
	n := int(tm.ColumnCount)
	names := tm.ColumnNameString()
	if len(names) == n {
		return names, nil
	}
	cols := modelColumns(tt)
	if len(cols) == 0 || len(cols) != n {
		return nil, errs.New(CodeTableInfo, false,
			"sync: table %s: the binlog has %d columns without names (is binlog_row_metadata FULL on the source?) "+
				"and target table %s has %d columns; create the target table with the same columns",
			src, n, target, len(cols))
	}
	names = make([]string, n)
	for i, col := range cols {
		names[i] = col.Name
	}
	return names, nil
}

// setColumnTypes sets each column's real type, signedness and whether it
// holds bytes: from the table map's metadata where the source writes it,
// else from the target's column of the same name, else (binary) from the
// type.
func (t *Table) setColumnTypes(tm *replication.TableMapEvent, tt *sqlschema.Table) {
	tcol := map[string]*sqlschema.Column{}
	cols := modelColumns(tt)
	for i := range cols {
		tcol[strings.ToLower(cols[i].Name)] = &cols[i]
	}
	unsigned := tm.UnsignedMap()
	collations := tm.CollationMap()
	for i := range t.Types {
		t.Types[i] = realType(tm, i)
		tc, known := tcol[strings.ToLower(t.Columns[i])]
		if unsigned != nil {
			t.Unsigned[i] = unsigned[i]
		} else if known {
			t.Unsigned[i] = tc.Unsigned
		}
		if coll, ok := collations[i]; ok {
			t.Binary[i] = coll == binaryCollation
		} else if known {
			t.Binary[i] = tc.Binary()
		} else {
			t.Binary[i] = t.Types[i] == mysql.MYSQL_TYPE_BLOB
		}
		if t.Binary[i] && t.Types[i] == mysql.MYSQL_TYPE_STRING {
			t.Fixed[i] = stringLength(tm.ColumnMeta[i])
		}
	}
}

// setKeys sets the key that identifies a row (the table map's primary key,
// else the target's first unique key over NOT NULL columns that the binlog
// has) and every unique key.
//
// Which unique key: the first in the server's key order (the order of
// sqlschema.Table.Indexes: PRIMARY, then unique keys over NOT NULL columns
// in definition order), the key InnoDB clusters a key-less table on and
// the one sqlschema.Table.RowKey, the stream and every other reader of the
// model pick. The sync unit used to order unique keys by name here, so of
// two NOT NULL unique keys it could match rows on another key than
// everyone else.
func (t *Table) setKeys(tm *replication.TableMapEvent, tt *sqlschema.Table, byName columnPositions) {
	if len(tm.PrimaryKey) > 0 {
		for _, k := range tm.PrimaryKey {
			t.Key = append(t.Key, int(k))
		}
		t.Key = t.withExtendKey(t.Key)
	} else if tt != nil {
		for _, idx := range tt.UniqueKeys() {
			if idx.Nullable {
				continue
			}
			if cols := byName.indexes(idx.Columns); cols != nil {
				t.Key = t.withExtendKey(cols)
				break
			}
		}
	}
	if len(t.Key) > 0 {
		t.Uniques = append(t.Uniques, t.Key)
	}
	if tt == nil {
		return
	}
	for _, idx := range tt.UniqueKeys() {
		cols := byName.indexes(idx.Columns)
		t.TargetUniques = append(t.TargetUniques, cols)
		if cols == nil {
			continue
		}
		if cols = t.withExtendKey(cols); slices.Equal(cols, t.Key) {
			continue
		}
		t.Uniques = append(t.Uniques, cols)
	}
}

// columnPositions maps a lower-cased column name to its binlog position.
type columnPositions map[string]int

// indexes returns the positions of cols, or nil when one is not a column.
func (p columnPositions) indexes(cols []string) []int {
	out := make([]int, 0, len(cols))
	for _, name := range cols {
		i, ok := p[strings.ToLower(name)]
		if !ok {
			return nil
		}
		out = append(out, i)
	}
	return out
}

// realType resolves ENUM and SET, which the table map writes as STRING.
func realType(tm *replication.TableMapEvent, i int) byte {
	t := tm.ColumnType[i]
	if t == mysql.MYSQL_TYPE_STRING && tm.ColumnMeta[i] >= 256 {
		if rt := byte(tm.ColumnMeta[i] >> 8); rt == mysql.MYSQL_TYPE_ENUM || rt == mysql.MYSQL_TYPE_SET {
			return rt
		}
	}
	return t
}

// sameShape reports whether two table maps describe the same columns
// (types, metadata, names, primary key).
func sameShape(a, b *replication.TableMapEvent) bool {
	if a.ColumnCount != b.ColumnCount || !bytes.Equal(a.ColumnType, b.ColumnType) ||
		!slices.Equal(a.ColumnMeta, b.ColumnMeta) || len(a.ColumnName) != len(b.ColumnName) ||
		!slices.Equal(a.PrimaryKey, b.PrimaryKey) {
		return false
	}
	for i := range a.ColumnName {
		if !bytes.Equal(a.ColumnName[i], b.ColumnName[i]) {
			return false
		}
	}
	return true
}

// stringLength is the byte length of a CHAR/BINARY column from its table
// map metadata (the encoding go-mysql decodes values with).
func stringLength(meta uint16) int {
	if meta < 256 {
		return int(meta)
	}
	b0, b1 := uint8(meta>>8), uint8(meta&0xFF)
	if b0&0x30 != 0x30 {
		return int(uint16(b1) | uint16((b0&0x30)^0x30)<<4)
	}
	return int(b1)
}
