package validate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/rowimage"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// CodeCompare is the code of errors reading rows from the target.
const CodeCompare = "validator-compare"

// errTableGone is in the chain of a compare error when the target table
// does not exist (it was dropped, or not created yet): the caller may drop
// the table's pending rows.
var errTableGone = errors.New("validate: the target table does not exist")

// comparer reads target rows by key and judges them against the expected
// row images. Safe for concurrent use by several workers.
//
// Its pool must read TIMESTAMP values in UTC (session time_zone '+00:00')
// and over the text protocol with ParseTime off; openTarget opens such a
// pool. Strings are read as their stored bytes by the SELECT itself.
type comparer struct {
	db *sql.DB
	// full compares every column present on both sides; otherwise only
	// the existence of a row with the key is checked (fast mode).
	full bool

	mu sync.Mutex
	// columns caches each target table's columns by lower-cased name.
	columns map[filter.TableName]map[string]targetColumn
}

// newComparer returns a comparer reading the target through db; full
// selects full mode (compare columns) over fast mode (existence only).
func newComparer(db *sql.DB, full bool) *comparer {
	return &comparer{db: db, full: full, columns: map[filter.TableName]map[string]targetColumn{}}
}

// invalidate forgets the cached target structures, after a DDL.
func (c *comparer) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.columns)
}

// compare judges checks, all of table t (len(t.Key) > 0), with one
// SELECT ... WHERE <key> IN (...). It returns one rowResult per check, in
// the same order. An error wrapping errTableGone means the target table
// does not exist.
func (c *comparer) compare(ctx context.Context, t *rowimage.Table, checks []rowCheck) ([]rowResult, error) {
	if len(checks) == 0 {
		return nil, nil
	}
	if len(t.Key) == 0 {
		return nil, errs.New(CodeCompare, false, "validate: table %s has no key to read target rows by", t.Source)
	}
	cols, err := c.targetColumns(ctx, t.Target)
	if err != nil {
		return nil, err
	}
	sel := c.selected(t, cols)
	query, args := selectQuery(t, sel, checks, cols)
	rows, err := c.read(ctx, t, query, args, len(sel))
	if err != nil {
		return nil, err
	}
	return judge(t, sel, checks, rows, c.full), nil
}

// targetColumns returns the target table's columns by lower-cased name,
// from the cache or information_schema.
func (c *comparer) targetColumns(ctx context.Context, t filter.TableName) (map[string]targetColumn, error) {
	c.mu.Lock()
	cols, ok := c.columns[t]
	c.mu.Unlock()
	if ok {
		return cols, nil
	}
	cols, err := readTargetColumns(ctx, c.db, t)
	if err != nil {
		return nil, errs.Wrap(err, CodeCompare, "validate: read the columns of target table %s", t)
	}
	if len(cols) == 0 {
		return nil, errs.Wrap(errTableGone, CodeCompare, "validate: read target rows of %s", t)
	}
	c.mu.Lock()
	c.columns[t] = cols
	c.mu.Unlock()
	return cols, nil
}

// selected returns the positions of t's columns to read: the key columns
// first (in key order), then in full mode every other column the target
// also has (a column the target lacks is not compared).
func (c *comparer) selected(t *rowimage.Table, targetCols map[string]targetColumn) []int {
	sel := append([]int(nil), t.Key...)
	if !c.full {
		return sel
	}
	isKey := make([]bool, len(t.Columns))
	for _, k := range t.Key {
		isKey[k] = true
	}
	for i, name := range t.Columns {
		if _, ok := targetCols[strings.ToLower(name)]; ok && !isKey[i] {
			sel = append(sel, i)
		}
	}
	return sel
}

// selectExpr is the SELECT expression of column i whose text form is the
// exact value: floats as doubles (FLOAT alone prints 6 digits), BIT as an
// unsigned number, ENUM and SET as index and bitmask (as the binlog has
// them), YEAR as a number, strings as their stored bytes.
func selectExpr(t *rowimage.Table, i int) string {
	q := sqlschema.QuoteName(t.Columns[i])
	switch t.Types[i] {
	case mysql.MYSQL_TYPE_FLOAT, mysql.MYSQL_TYPE_DOUBLE:
		return q + "+0e0"
	case mysql.MYSQL_TYPE_BIT:
		return "CAST(" + q + " AS UNSIGNED)"
	case mysql.MYSQL_TYPE_ENUM, mysql.MYSQL_TYPE_SET, mysql.MYSQL_TYPE_YEAR:
		return q + "+0"
	}
	if isStringType(t.Types[i]) {
		return "CAST(" + q + " AS BINARY)"
	}
	return q
}

// selectQuery builds the SELECT of the sel columns of the rows with the
// checks' keys: k IN (?,..) for a one-column key, (a,b) IN ((?,?),..)
// otherwise. Values of a BINARY(n) key column get back the trailing zeros
// the binlog dropped, or they would match nothing.
func selectQuery(t *rowimage.Table, sel []int, checks []rowCheck, cols map[string]targetColumn) (string, []any) {
	var b strings.Builder
	b.WriteString("SELECT ")
	for n, i := range sel {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(selectExpr(t, i))
	}
	b.WriteString(" FROM ")
	b.WriteString(t.Target.String())
	b.WriteString(" WHERE ")
	one := "(" + strings.TrimSuffix(strings.Repeat("?,", len(t.Key)), ",") + ")"
	if len(t.Key) == 1 {
		one = "?"
		b.WriteString(sqlschema.QuoteName(t.Columns[t.Key[0]]))
	} else {
		b.WriteByte('(')
		for n, k := range t.Key {
			if n > 0 {
				b.WriteByte(',')
			}
			b.WriteString(sqlschema.QuoteName(t.Columns[k]))
		}
		b.WriteByte(')')
	}
	b.WriteString(" IN (")
	args := make([]any, 0, len(checks)*len(t.Key))
	for n, ch := range checks {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(one)
		for m, k := range t.Key {
			args = append(args, rowimage.WhereValue(padBinary(ch.key[m], cols[strings.ToLower(t.Columns[k])]), t.Binary[k]))
		}
	}
	b.WriteByte(')')
	return b.String(), args
}

// padBinary pads the bytes of a BINARY(n) column's value with zeros to n.
func padBinary(v any, col targetColumn) any {
	if b, ok := v.([]byte); ok && col.binaryLen > len(b) {
		return append(append([]byte{}, b...), make([]byte, col.binaryLen-len(b))...)
	}
	return v
}

// read runs the query and returns its rows; each value is nil for NULL,
// else the text bytes.
func (c *comparer) read(ctx context.Context, t *rowimage.Table, query string, args []any, n int) (_ [][]any, err error) {
	defer func() {
		if err != nil && isTableGone(err) {
			err = fmt.Errorf("%w (%w)", errTableGone, err)
		}
		err = errs.Wrap(err, CodeCompare, "validate: read target rows of %s", t.Target)
	}()
	rows, err := c.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, rows.Close()) }()
	var out [][]any
	raw := make([]sql.RawBytes, n)
	dest := make([]any, n)
	for i := range raw {
		dest[i] = &raw[i]
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		out = append(out, copyRow(raw))
	}
	return out, rows.Err()
}

// judge matches the target rows (sel columns) to the checks by key and
// returns each check's verdict.
func judge(t *rowimage.Table, sel []int, checks []rowCheck, rows [][]any, full bool) []rowResult {
	match := matchRows(t, checks, rows)
	out := make([]rowResult, len(checks))
	for n, ch := range checks {
		r := match[n]
		switch {
		case r < 0 && ch.want != nil:
			out[n].kind = KindMissing
		case r < 0:
		case ch.want == nil:
			out[n] = rowResult{kind: KindExtra, target: displayCols(t, sel, rows[r])}
		case full && differs(t, sel, ch.want, rows[r]):
			// Only a mismatch is shown, so equal rows cost no rendering.
			out[n] = rowResult{kind: KindDifferent, target: displayCols(t, sel, rows[r])}
		}
	}
	return out
}

// differs reports whether a target row (sel columns) differs from the
// expected image want (every column) in a compared column.
func differs(t *rowimage.Table, sel []int, want []any, row []any) bool {
	for j, i := range sel {
		if same, known := sameFast(t, i, want[i], row[j]); known {
			if !same {
				return true
			}
			continue
		}
		a, aok := canonValue(t, i, want[i])
		b, bok := canonValue(t, i, row[j])
		if aok != bok || a != b {
			return true
		}
	}
	return false
}

// matchRows returns, per check, the index of its target row or -1. A row
// matches a check whose key has the same canonical values; a row left over
// (the key's collation matched it, not its bytes: other case or trailing
// spaces) goes to a check left over whose text key is the same ignoring
// case and trailing spaces, so the caller sees a difference, not a missing
// row.
func matchRows(t *rowimage.Table, checks []rowCheck, rows [][]any) []int {
	exact := make(map[string]int, len(rows))
	for r, row := range rows {
		exact[keyString(t, row[:len(t.Key)], false)] = r
	}
	claimed := make([]bool, len(rows))
	match := make([]int, len(checks))
	for n, ch := range checks {
		r, ok := exact[keyString(t, ch.key, false)]
		if !ok {
			r = -1
		} else {
			claimed[r] = true
		}
		match[n] = r
	}
	loose := map[string][]int{}
	for r, row := range rows {
		if !claimed[r] {
			k := keyString(t, row[:len(t.Key)], true)
			loose[k] = append(loose[k], r)
		}
	}
	for n, ch := range checks {
		if match[n] >= 0 || len(loose) == 0 {
			continue
		}
		k := keyString(t, ch.key, true)
		if rs := loose[k]; len(rs) > 0 {
			match[n], loose[k] = rs[0], rs[1:]
		}
	}
	return match
}

// keyString encodes key values (Table.Key order) canonically; loose folds
// the case and trailing spaces of text columns.
func keyString(t *rowimage.Table, key []any, loose bool) string {
	var b strings.Builder
	for m, k := range t.Key {
		s, ok := canonValue(t, k, key[m])
		if !ok {
			b.WriteString("N;")
			continue
		}
		if loose && !t.Binary[k] && isStringType(t.Types[k]) {
			s = strings.ToLower(strings.TrimRight(s, " "))
		}
		fmt.Fprintf(&b, "%d:%s;", len(s), s)
	}
	return b.String()
}
