package syncer

import (
	"bytes"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/dmworker/dm-worker/pkg/rowimage"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Compaction. A batch is one target transaction, so only its end state is
// ever visible. For a table whose identifying key is the target table's only
// unique key, rows with different keys never constrain each other, so the
// batch's changes of that table can be reduced to the last state of each key
// it touches: gone (one DELETE for all such keys) or present with its last
// row image (one multi-row INSERT ... ON DUPLICATE KEY UPDATE). A sysbench
// write-only transaction (update, update, delete, insert of one row) becomes
// one row of one statement. Writing end states is idempotent, so compaction
// is as safe to replay after a crash as safe mode's REPLACEs.

// exactKeyType reports whether values of a key column of this type are the
// same target key exactly when their converted values are equal. Text under
// a collation is not (case, accents and trailing spaces may not count), nor
// are floats (0 equals -0).
func exactKeyType(typ byte, binary bool) bool {
	switch typ {
	case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_LONG,
		mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_YEAR, mysql.MYSQL_TYPE_BIT,
		mysql.MYSQL_TYPE_DECIMAL, mysql.MYSQL_TYPE_NEWDECIMAL,
		mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_NEWDATE, mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_DATETIME2,
		mysql.MYSQL_TYPE_TIMESTAMP, mysql.MYSQL_TYPE_TIMESTAMP2, mysql.MYSQL_TYPE_TIME, mysql.MYSQL_TYPE_TIME2,
		mysql.MYSQL_TYPE_ENUM, mysql.MYSQL_TYPE_SET:
		return true
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_BLOB,
		mysql.MYSQL_TYPE_TINY_BLOB, mysql.MYSQL_TYPE_MEDIUM_BLOB, mysql.MYSQL_TYPE_LONG_BLOB:
		return binary
	}
	return false
}

// compactable decides tableInfo.compact: the table has a key, the target
// has exactly one unique key (the primary key counts) and it is that key,
// column for column, and every key column compares exactly.
func compactable(ti *rowimage.Table, targetUniques [][]int) bool {
	if len(ti.Key) == 0 || len(targetUniques) != 1 || len(targetUniques[0]) != len(ti.Key) {
		return false
	}
	for n, i := range ti.Key {
		if targetUniques[0][n] != i || !exactKeyType(ti.Types[i], ti.Binary[i]) {
			return false
		}
	}
	return true
}

// keyState is the state a batch leaves one key of a compacted table in.
type keyState struct {
	// ti reads row; row is the last image (present) or an image holding the
	// key (gone).
	ti      *tableInfo
	row     []any
	present bool
	// fresh: the key's first change in the batch was an insert outside safe
	// mode, so the row did not exist before and a plain INSERT (which fails
	// on a duplicate, as an insert would) writes it.
	fresh bool
}

// compactGroup collects the end states of one target table's keys.
type compactGroup struct {
	keys  map[string]*keyState
	order []*keyState // by first change, for a deterministic statement order
}

func (g *compactGroup) state(key []byte, first bool) *keyState {
	if st, ok := g.keys[string(key)]; ok {
		return st
	}
	st := &keyState{fresh: first}
	g.keys[string(key)] = st
	g.order = append(g.order, st)
	return st
}

// add folds one change into the group.
func (g *compactGroup) add(c *change, buf []byte) []byte {
	ti := c.table
	switch c.kind {
	case kindInsert:
		buf = rowimage.AppendValues(buf[:0], c.after, ti.Key, false)
		st := g.state(buf, !c.safe)
		st.ti, st.row, st.present = ti, c.after, true
	case kindDelete:
		buf = rowimage.AppendValues(buf[:0], c.before, ti.Key, false)
		st := g.state(buf, false)
		st.ti, st.row, st.present = ti, c.before, false
	case kindUpdate:
		buf = rowimage.AppendValues(buf[:0], c.before, ti.Key, false)
		n := len(buf)
		buf = rowimage.AppendValues(buf, c.after, ti.Key, false)
		if !bytes.Equal(buf[:n], buf[n:]) {
			st := g.state(buf[:n], false)
			st.ti, st.row, st.present = ti, c.before, false
		}
		st := g.state(buf[n:], false)
		st.ti, st.row, st.present = ti, c.after, true
	}
	return buf
}

// statements writes the group's end states: one DELETE of the gone keys,
// one INSERT of the fresh rows, one upsert of the others, per table info
// (several only when a route merges source tables into this target). Keys
// are distinct, so the order of the statements does not matter.
func (g *compactGroup) statements(out []stmt) []stmt {
	var gone, fresh, upsert []rowsOf
	for _, st := range g.order {
		switch {
		case !st.present:
			gone = addRow(gone, st.ti, st.row)
		case st.fresh:
			fresh = addRow(fresh, st.ti, st.row)
		default:
			upsert = addRow(upsert, st.ti, st.row)
		}
	}
	for _, r := range gone {
		out = append(out, deleteKeysStmt(r.ti, r.rows))
	}
	for _, r := range fresh {
		out = append(out, insertStmt(r.ti, r.rows, false))
	}
	for _, r := range upsert {
		out = append(out, upsertStmt(r.ti, r.rows))
	}
	return out
}

// upsertStmt writes rows of a compactable table whatever the target holds
// for their keys: INSERT ... ON DUPLICATE KEY UPDATE of every other column.
func upsertStmt(ti *tableInfo, rows [][]any) stmt {
	s := insertStmt(ti, rows, false)
	var b strings.Builder
	b.WriteString(s.sql)
	b.WriteString(" ON DUPLICATE KEY UPDATE ")
	isKey := make([]bool, len(ti.Columns))
	for _, k := range ti.Key {
		isKey[k] = true
	}
	n := 0
	for i, c := range ti.Columns {
		if isKey[i] {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		q := sqlschema.QuoteName(c)
		b.WriteString(q + "=VALUES(" + q + ")")
	}
	if n == 0 { // every column is in the key: nothing to update
		q := sqlschema.QuoteName(ti.Columns[ti.Key[0]])
		b.WriteString(q + "=" + q)
	}
	s.sql = b.String()
	return s
}

// compact splits a batch: the changes of target tables whose every change
// comes from a compactable table are reduced to end states; the rest keep
// their order. Changes of different compactable tables commute: unique keys
// are per table, and a table a foreign key of the target touches is never
// compactable (foreign_keys.go).
//
// A target table whose every change in the batch is a plain insert (a bulk
// load) is written as the plain INSERT compaction would write, without
// copying every key into a map: its rows are new keys, in binlog order (a
// key inserted twice fails, as it did not on the source).
func compact(changes []*change) (stmts []stmt, rest []*change) {
	mixed := map[tableName]bool{}
	inserts := map[tableName]bool{} // compactable tables with only plain inserts so far
	some := false
	for _, c := range changes {
		t := c.table.Target
		switch {
		case !c.table.compact:
			mixed[t] = true
		case c.kind == kindInsert && !c.safe:
			if _, seen := inserts[t]; !seen {
				inserts[t] = true
			}
		default:
			inserts[t] = false
		}
	}
	for t := range inserts {
		if !mixed[t] {
			some = true
		}
	}
	if !some {
		return nil, changes
	}
	groups := map[tableName]*compactGroup{}
	var order []*compactGroup
	var buf []byte
	var plain []rowsOf // rows of insert-only tables, per table info
	for _, c := range changes {
		if !c.table.compact || mixed[c.table.Target] {
			rest = append(rest, c)
			continue
		}
		if inserts[c.table.Target] {
			plain = addRow(plain, c.table, c.after)
			continue
		}
		g := groups[c.table.Target]
		if g == nil {
			g = &compactGroup{keys: map[string]*keyState{}}
			groups[c.table.Target] = g
			order = append(order, g)
		}
		buf = g.add(c, buf)
	}
	for _, g := range order {
		stmts = g.statements(stmts)
	}
	for _, r := range plain {
		stmts = append(stmts, insertStmt(r.ti, r.rows, false))
	}
	return stmts, rest
}

// rowsOf is rows of one table info, for one statement.
type rowsOf struct {
	ti   *tableInfo
	rows [][]any
}

// addRow appends row to ti's rows in list.
func addRow(list []rowsOf, ti *tableInfo, row []any) []rowsOf {
	for i := range list {
		if list[i].ti == ti {
			list[i].rows = append(list[i].rows, row)
			return list
		}
	}
	return append(list, rowsOf{ti: ti, rows: [][]any{row}})
}
