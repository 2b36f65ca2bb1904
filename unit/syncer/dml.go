package syncer

import (
	"hash/maphash"
	"strings"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/rowimage"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// changeKind is the kind of a row change.
type changeKind int

const (
	kindInsert changeKind = iota
	kindUpdate
	kindDelete
)

func (k changeKind) String() string {
	switch k {
	case kindInsert:
		return filter.EvInsert
	case kindUpdate:
		return filter.EvUpdate
	default:
		return filter.EvDelete
	}
}

// change is one row change ready to apply: values are already converted.
type change struct {
	kind   changeKind
	table  *tableInfo
	before []any // update, delete
	after  []any // insert, update
	// loc is the location after the rows event the change comes from, row
	// the change's index among the event's changes.
	loc binlog.Location
	row int
	// safe applies the change idempotently (REPLACE, DELETE + REPLACE).
	safe bool
	// fkChecks: the source session wrote the change with
	// foreign_key_checks on; it matters for tables of a foreign key group.
	fkChecks bool
	// size estimates the memory the change's values hold (rowSize), which
	// batches and the dispatcher's in-flight budget are sized by.
	size int
}

// rowSize estimates the memory a converted row image holds: the bytes of
// its strings and byte slices plus a word pair per value.
func rowSize(row []any) int {
	n := 0
	for _, v := range row {
		switch x := v.(type) {
		case []byte:
			n += len(x) + 24
		case string:
			n += len(x) + 16
		default:
			n += 16
		}
	}
	return n
}

// stmt is one statement with its arguments.
type stmt struct {
	sql  string
	args []any
	// textCols, for a multi-row INSERT, marks the columns whose byte
	// values may be written as hex literals: the first rowArgs arguments
	// are rows of len(textCols) values (literal.go).
	textCols []bool
	rowArgs  int
}

func columnList(ti *tableInfo) string {
	var b strings.Builder
	for i, c := range ti.Columns {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(sqlschema.QuoteName(c))
	}
	return b.String()
}

func placeholders(n int) string {
	return "(" + strings.TrimSuffix(strings.Repeat("?,", n), ",") + ")"
}

// where builds the row match: the identifying key, else every column
// (NULL-safe) with LIMIT 1 so one of identical rows is touched.
func where(ti *tableInfo, row []any) (string, []any) {
	var b strings.Builder
	var args []any
	cols := ti.Key
	op := "="
	if len(cols) == 0 {
		op = "<=>"
		cols = make([]int, len(ti.Columns))
		for i := range cols {
			cols[i] = i
		}
	}
	for n, i := range cols {
		if n > 0 {
			b.WriteString(" AND ")
		}
		b.WriteString(sqlschema.QuoteName(ti.Columns[i]))
		b.WriteString(op)
		b.WriteByte('?')
		args = append(args, ti.WhereArg(row[i], i))
	}
	return b.String(), args
}

// insertStmt writes rows (one or more inserts of the same table) with one
// INSERT, or REPLACE in safe mode.
func insertStmt(ti *tableInfo, rows [][]any, replace bool) stmt {
	verb := "INSERT INTO "
	if replace {
		verb = "REPLACE INTO "
	}
	var b strings.Builder
	target, cols, ph := ti.Target.String(), columnList(ti), placeholders(len(ti.Columns))
	b.Grow(len(verb) + len(target) + len(cols) + 10 + len(rows)*(len(ph)+1))
	b.WriteString(verb)
	b.WriteString(target)
	b.WriteString(" (")
	b.WriteString(cols)
	b.WriteString(") VALUES ")
	args := make([]any, 0, len(rows)*len(ti.Columns))
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(ph)
		args = append(args, r...)
	}
	return stmt{sql: b.String(), args: args, textCols: ti.textCols, rowArgs: len(args)}
}

func deleteStmt(ti *tableInfo, row []any) stmt {
	w, args := where(ti, row)
	return stmt{sql: "DELETE FROM " + ti.Target.String() + " WHERE " + w + " LIMIT 1", args: args}
}

func updateStmt(ti *tableInfo, before, after []any) stmt {
	var b strings.Builder
	b.WriteString("UPDATE ")
	b.WriteString(ti.Target.String())
	b.WriteString(" SET ")
	args := make([]any, 0, len(after)*2)
	for i, c := range ti.Columns {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(sqlschema.QuoteName(c))
		b.WriteString("=?")
		args = append(args, after[i])
	}
	w, wargs := where(ti, before)
	b.WriteString(" WHERE ")
	b.WriteString(w)
	b.WriteString(" LIMIT 1")
	return stmt{sql: b.String(), args: append(args, wargs...)}
}

// deleteKeysStmt deletes several rows of a table with a key (at most one
// target row matches each key) in one statement: key IN (...) for a
// one-column key, an OR of key matches otherwise; both use the key's index.
func deleteKeysStmt(ti *tableInfo, rows [][]any) stmt {
	var b strings.Builder
	b.WriteString("DELETE FROM ")
	b.WriteString(ti.Target.String())
	b.WriteString(" WHERE ")
	args := make([]any, 0, len(rows)*len(ti.Key))
	if len(ti.Key) == 1 {
		k := ti.Key[0]
		b.WriteString(sqlschema.QuoteName(ti.Columns[k]))
		b.WriteString(" IN ")
		b.WriteString(placeholders(len(rows)))
		for _, r := range rows {
			args = append(args, ti.WhereArg(r[k], k))
		}
		return stmt{sql: b.String(), args: args}
	}
	for n, r := range rows {
		if n > 0 {
			b.WriteString(" OR ")
		}
		b.WriteByte('(')
		for m, k := range ti.Key {
			if m > 0 {
				b.WriteString(" AND ")
			}
			b.WriteString(sqlschema.QuoteName(ti.Columns[k]))
			b.WriteString("=?")
			args = append(args, ti.WhereArg(r[k], k))
		}
		b.WriteByte(')')
	}
	return stmt{sql: b.String(), args: args}
}

// stmtList collects statements, joining adjacent REPLACEs of one table into
// one multi-row REPLACE (which replaces its rows in order, as the separate
// statements would).
type stmtList struct {
	out      []stmt
	repTable *tableInfo
	repRows  [][]any
}

func (l *stmtList) add(s stmt) {
	l.flush()
	l.out = append(l.out, s)
}

func (l *stmtList) replace(ti *tableInfo, row []any) {
	if l.repTable != ti {
		l.flush()
		l.repTable = ti
	}
	l.repRows = append(l.repRows, row)
}

func (l *stmtList) flush() {
	if l.repTable != nil {
		l.out = append(l.out, insertStmt(l.repTable, l.repRows, true))
		l.repTable, l.repRows = nil, nil
	}
}

// statements turns a batch of changes into statements. Changes of
// compactable tables are reduced to end states (see compact); the others
// keep their order, merged only where the result is the same as applying
// them one by one:
// runs of inserts into one table become one multi-row INSERT; runs of
// deletes from one table with a key become one DELETE (deleting distinct
// rows commutes; a key deleted twice matches nothing the second time);
// adjacent REPLACEs (safe mode) of one table become one multi-row REPLACE.
//
// Changes of tables in a foreign key group are written one by one in order,
// with the source session's foreign_key_checks (groupStatements).
func statements(changes []*change) []stmt {
	out, changes := compact(changes)
	l := stmtList{out: out}
	var fk fkSession
	for i := 0; i < len(changes); {
		c := changes[i]
		if c.table.fkGroup != "" {
			i = groupStatements(&l, &fk, changes, i)
			continue
		}
		j := i + 1
		switch c.kind {
		case kindInsert:
			if c.safe {
				l.replace(c.table, c.after)
				break
			}
			rows := [][]any{c.after}
			for j < len(changes) && changes[j].kind == kindInsert && changes[j].table == c.table && !changes[j].safe {
				rows = append(rows, changes[j].after)
				j++
			}
			l.add(insertStmt(c.table, rows, false))
		case kindUpdate:
			if c.safe {
				l.add(deleteStmt(c.table, c.before))
				l.replace(c.table, c.after)
			} else {
				l.add(updateStmt(c.table, c.before, c.after))
			}
		case kindDelete:
			if len(c.table.Key) == 0 {
				l.add(deleteStmt(c.table, c.before))
				break
			}
			rows := [][]any{c.before}
			for j < len(changes) && changes[j].kind == kindDelete && changes[j].table == c.table {
				rows = append(rows, changes[j].before)
				j++
			}
			if len(rows) == 1 {
				l.add(deleteStmt(c.table, c.before))
			} else {
				l.add(deleteKeysStmt(c.table, rows))
			}
		}
		i = j
	}
	fk.restore(&l)
	l.flush()
	return l.out
}

// causalityKeys appends to keys what c conflicts on, hashed: every unique
// key's values (old and new row; text folded to lower case, as the usual
// case-insensitive collations compare), or the table itself when it has no
// key; for a table of a foreign key group, the group alone, so that every
// change of the group stays in order on one worker. Two changes sharing a
// hash stay in order on one worker; a collision of different keys only
// costs parallelism. buf is scratch space.
func causalityKeys(keys []uint64, c *change, seed maphash.Seed, buf []byte) ([]uint64, []byte) {
	ti := c.table
	if ti.fkGroup != "" {
		return appendGroupKey(keys, ti, seed, buf)
	}
	buf = append(buf[:0], ti.Target.Schema...)
	buf = append(buf, 0)
	buf = append(buf, ti.Target.Table...)
	buf = append(buf, 0)
	prefix := len(buf)
	n := len(keys)
	add := func(row []any) {
		if row == nil {
			return
		}
	next:
		for u, cols := range ti.Uniques {
			for _, i := range cols {
				if row[i] == nil {
					continue next // NULLs never conflict in a unique key
				}
			}
			buf = rowimage.AppendValues(append(buf[:prefix], byte(u)), row, cols, true)
			keys = append(keys, maphash.Bytes(seed, buf))
		}
	}
	if len(ti.Key) > 0 {
		add(c.before)
		add(c.after)
	}
	if len(keys) == n {
		// Rows matched on all columns: keep the whole table in order.
		keys = append(keys, maphash.Bytes(seed, buf[:prefix]))
	}
	return keys, buf
}
