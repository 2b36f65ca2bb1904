package dump

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/errs"
)

// litKind says how a key value read as raw bytes is written back into a
// query so that it compares with the column as the column's own values do.
type litKind int

const (
	litNumber   litKind = iota + 1 // integers, DECIMAL, YEAR: as they are
	litText                        // character types: _<charset> X'..' (the column's collation decides)
	litBinary                      // binary types: X'..'
	litTemporal                    // DATE, TIME, DATETIME, TIMESTAMP: '..'
)

// keyColumn is one column of the key a table is split on.
type keyColumn struct {
	name    string
	kind    litKind
	charset string // for litText
	integer bool   // an integer type (splitByRange applies)
}

// kindOfType classifies information_schema.COLUMNS.DATA_TYPE; 0 for types
// whose values cannot split a table exactly (FLOAT, DOUBLE and BIT print
// otherwise than they compare, ENUM and SET sort by member number, JSON and
// spatial types are no keys to split on).
func kindOfType(dataType string) litKind {
	switch dataType {
	case "tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "year":
		return litNumber
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext":
		return litText
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return litBinary
	case "date", "time", "datetime", "timestamp":
		return litTemporal
	}
	return 0
}

var (
	numberText   = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)
	temporalText = regexp.MustCompile(`^-?[0-9:. -]+$`)
	charsetName  = regexp.MustCompile(`^[a-z0-9_]+$`)
)

// literal writes v, a value of k read as raw bytes, as an SQL literal.
func (k keyColumn) literal(v []byte) (string, error) {
	if v == nil {
		return "", fmt.Errorf("key column %s is NULL", k.name)
	}
	switch k.kind {
	case litNumber:
		if !numberText.Match(v) {
			return "", fmt.Errorf("key column %s: %q is not a number", k.name, v)
		}
		return string(v), nil
	case litTemporal:
		if !temporalText.Match(v) {
			return "", fmt.Errorf("key column %s: %q is not a temporal value", k.name, v)
		}
		return "'" + string(v) + "'", nil
	case litText:
		return "_" + k.charset + " X'" + hex.EncodeToString(v) + "'", nil
	}
	return "X'" + hex.EncodeToString(v) + "'", nil
}

// readKey finds the key to split t on: the primary key, else the first
// unique BTREE key whose columns are all NOT NULL and whole (no prefix), if
// every column of it has a type that splits exactly. None is logged: the
// table is then one chunk.
func readKey(ctx context.Context, c *sql.Conn, t tableRef, cols []column, log *zap.Logger) ([]keyColumn, string, error) {
	idx, err := uniqueIndexes(ctx, c, t)
	if err != nil {
		return nil, "", err
	}
	if len(idx) == 0 {
		log.Info("the table has no primary key or unique key of NOT NULL columns; it is dumped as one chunk")
		return nil, "", nil
	}
	for _, ix := range idx {
		key := make([]keyColumn, 0, len(ix.columns))
		for _, name := range ix.columns {
			i := slices.IndexFunc(cols, func(c column) bool { return strings.EqualFold(c.name, name) })
			if i < 0 {
				return nil, "", errs.New(CodeDumpRead, true, "dump: table %s: key %s names column %s, which information_schema does not list; "+
					"DDL during the dump is not supported; resume to dump again", t, ix.name, name)
			}
			kind := kindOfType(cols[i].dataType)
			if kind == 0 || (kind == litText && !charsetName.MatchString(cols[i].charset)) {
				log.Info("a key column's type cannot split the table exactly; trying the next key",
					zap.String("key", ix.name), zap.String("column", cols[i].name), zap.String("type", cols[i].colType))
				key = nil
				break
			}
			key = append(key, keyColumn{name: cols[i].name, kind: kind, charset: cols[i].charset, integer: intTypes[cols[i].dataType]})
		}
		if key != nil {
			return key, ix.name, nil
		}
	}
	log.Info("no key of the table can split it; it is dumped as one chunk")
	return nil, "", nil
}

// index is a unique index usable as a key.
type index struct {
	name    string
	columns []string
}

// uniqueIndexes lists t's primary key and unique BTREE indexes whose
// columns are NOT NULL and whole, primary first, then in SHOW INDEX order
// (the order of the table's definition).
func uniqueIndexes(ctx context.Context, c *sql.Conn, t tableRef) ([]index, error) {
	rows, err := c.QueryContext(ctx, "SHOW INDEX FROM "+t.quoted())
	if err != nil {
		return nil, readErr(t, "SHOW INDEX", err)
	}
	var order []string
	byName := map[string]*index{}
	unusable := map[string]bool{}
	err = scanAll(rows, func(r *sql.Rows) error {
		m, err := rowMap(r)
		if err != nil {
			return err
		}
		name := m["key_name"].String
		if _, ok := byName[name]; !ok {
			order = append(order, name)
			byName[name] = &index{name: name}
		}
		if m["non_unique"].String != "0" || m["null"].String != "" || m["sub_part"].Valid || m["index_type"].String != "BTREE" {
			unusable[name] = true
		}
		byName[name].columns = append(byName[name].columns, m["column_name"].String)
		return nil
	})
	if err != nil {
		return nil, readErr(t, "SHOW INDEX", err)
	}
	var out []index
	for _, n := range order {
		if unusable[n] {
			continue
		}
		if n == "PRIMARY" {
			out = append([]index{*byName[n]}, out...)
		} else {
			out = append(out, *byName[n])
		}
	}
	return out, nil
}

// rowMap scans the current row into a map by lower-cased column name.
func rowMap(r *sql.Rows) (map[string]sql.NullString, error) {
	cols, err := r.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := r.Scan(ptrs...); err != nil {
		return nil, err
	}
	m := make(map[string]sql.NullString, len(cols))
	for i, c := range cols {
		m[strings.ToLower(c)] = vals[i]
	}
	return m, nil
}

// keyRange is the condition lower < key <= upper (either may be nil:
// unbounded), as literals, written so that MariaDB reads a range of the
// key's index: k1 >= c1 AND (k1 > c1 OR (k1 = c1 AND k2 > c2)).
func keyRange(key []keyColumn, lower, upper []string) string {
	var conds []string
	if lower != nil {
		conds = append(conds, keyCompare(key, lower, ">", ">"))
	}
	if upper != nil {
		conds = append(conds, keyCompare(key, upper, "<", "<="))
	}
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// keyCompare writes key op v lexicographically: strict is the operator on
// the other columns (> or <), last the one on the last column (>, >=, <,
// <=).
func keyCompare(key []keyColumn, v []string, strict, last string) string {
	n := len(key) - 1
	cond := quoteName(key[n].name) + " " + last + " " + v[n]
	for i := n - 1; i >= 0; i-- {
		c := quoteName(key[i].name)
		cond = c + " " + strict + " " + v[i] + " OR (" + c + " = " + v[i] + " AND (" + cond + "))"
	}
	if n == 0 {
		return cond
	}
	return "(" + quoteName(key[0].name) + " " + strict + "= " + v[0] + " AND (" + cond + "))"
}

// mysqlErrorNumber is the server error number in err's chain, 0 if none.
func mysqlErrorNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}
