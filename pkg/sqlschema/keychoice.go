package sqlschema

import (
	"errors"
	"fmt"
)

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
// naming a column the table lacks (altered between ReadTable's column and
// index reads) is an error.
func ChooseKeyset(t *Table, results string) (k *Keyset, rejected []KeyRejected, err error) {
	var candidates []Index
	for _, ix := range t.Indexes {
		if ix.Primary {
			candidates = append([]Index{ix}, candidates...)
		} else if ix.Unique {
			candidates = append(candidates, ix)
		}
	}
	for _, ix := range candidates {
		switch {
		case ix.Nullable:
			rejected = append(rejected, KeyRejected{ix.Name, "a column of it may be NULL"})
			continue
		case ix.Type != "BTREE":
			rejected = append(rejected, KeyRejected{ix.Name, "it is a " + ix.Type + " index, which does not order its values"})
			continue
		case ix.Prefix:
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
