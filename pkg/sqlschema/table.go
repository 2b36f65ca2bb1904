package sqlschema

import "strings"

// Index is one index of a table, columns in key order.
type Index struct {
	Name    string
	Columns []string
	Primary bool
	Unique  bool
	// Nullable: some column of the index may be NULL, so a unique index
	// does not identify a row (several rows may hold NULL there).
	Nullable bool
	// Type is INDEX_TYPE: "BTREE", "HASH", "FULLTEXT", "SPATIAL".
	Type string
	// Prefix: some column is indexed by a prefix (SUB_PART is set), so
	// the index does not order the whole values.
	Prefix bool
}

// KeyReason says why a table's RowKey is what it is.
type KeyReason int

const (
	// KeyPrimary: the PRIMARY KEY.
	KeyPrimary KeyReason = iota + 1
	// KeyUnique: no primary key; the first UNIQUE key, in the server's
	// key order, whose columns are all NOT NULL. It is the key InnoDB
	// clusters such a table on.
	KeyUnique
	// KeyNone: no key identifies a row; RowKey is every column.
	KeyNone
)

func (r KeyReason) String() string {
	switch r {
	case KeyPrimary:
		return "primary key"
	case KeyUnique:
		return "unique key over NOT NULL columns"
	case KeyNone:
		return "no key: all columns"
	}
	return "unknown"
}

// Table is a table's model: its columns in ordinal order, its indexes in
// the server's key order (PRIMARY first, then unique keys over NOT NULL
// columns, then the other unique keys, then the rest; MariaDB keeps keys
// in this order, and within each class in definition order), and the row
// key chosen from them. A Table read by Read must not be modified; it may
// be shared between goroutines.
type Table struct {
	Schema, Name string
	Columns      []Column
	Indexes      []Index
	// RowKey holds indexes into Columns: what identifies a row, see
	// KeyReason. Never empty for a table with columns.
	RowKey []int
	// RowKeyIndex is the index RowKey comes from: "PRIMARY", the unique
	// key's name, or "" for KeyNone.
	RowKeyIndex string
	KeyReason   KeyReason
}

// String names the table as schema.table.
func (t *Table) String() string { return t.Schema + "." + t.Name }

// HasPK reports whether the table has a primary key.
func (t *Table) HasPK() bool { return t.KeyReason == KeyPrimary }

// Keyed reports whether some key identifies a row (primary key or a unique
// key over NOT NULL columns).
func (t *Table) Keyed() bool { return t.KeyReason == KeyPrimary || t.KeyReason == KeyUnique }

// KeyColumns returns the names of the row key's columns in key order.
func (t *Table) KeyColumns() []string {
	names := make([]string, len(t.RowKey))
	for i, k := range t.RowKey {
		names[i] = t.Columns[k].Name
	}
	return names
}

// ColumnIndex returns the position in Columns of the column named name
// (compared case-insensitively, as the server compares column names), or
// -1.
func (t *Table) ColumnIndex(name string) int {
	for i := range t.Columns {
		if strings.EqualFold(t.Columns[i].Name, name) {
			return i
		}
	}
	return -1
}

// UniqueKeys returns the unique indexes (PRIMARY included) in key order.
func (t *Table) UniqueKeys() []Index {
	var out []Index
	for _, ix := range t.Indexes {
		if ix.Unique {
			out = append(out, ix)
		}
	}
	return out
}

// chooseRowKey sets RowKey, RowKeyIndex and KeyReason from Indexes.
func (t *Table) chooseRowKey() {
	pick := func(ix Index, reason KeyReason) bool {
		key := make([]int, 0, len(ix.Columns))
		for _, name := range ix.Columns {
			i := t.ColumnIndex(name)
			if i < 0 {
				return false
			}
			key = append(key, i)
		}
		if len(key) == 0 {
			return false
		}
		t.RowKey, t.RowKeyIndex, t.KeyReason = key, ix.Name, reason
		return true
	}
	for _, ix := range t.Indexes {
		if ix.Primary && pick(ix, KeyPrimary) {
			return
		}
	}
	for _, ix := range t.Indexes {
		if ix.Unique && !ix.Primary && !ix.Nullable && pick(ix, KeyUnique) {
			return
		}
	}
	t.RowKey, t.RowKeyIndex, t.KeyReason = make([]int, len(t.Columns)), "", KeyNone
	for i := range t.RowKey {
		t.RowKey[i] = i
	}
}
