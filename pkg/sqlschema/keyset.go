package sqlschema

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
)

// PageKind says how a key column's values, read as the text protocol gives
// them (raw bytes), are written back into a query as literals that compare
// with the column exactly as its own values do, if they can.
type PageKind int

const (
	// PageNone: the column cannot page a table exactly. FLOAT and DOUBLE
	// print otherwise than they compare; ENUM and SET sort by member
	// number but compare with strings as text; JSON, spatial and unknown
	// types are no keys to page by.
	PageNone PageKind = iota
	// PageNumber: integers, DECIMAL, YEAR, written as they print.
	PageNumber
	// PageText: character types, written as _charset X'..' (coercible:
	// the column's collation decides the comparison).
	PageText
	// PageBinary: BINARY, VARBINARY, BLOB types, written as X'..'.
	PageBinary
	// PageTemporal: DATE, TIME, DATETIME, TIMESTAMP, written quoted.
	PageTemporal
	// PageBit: BIT(n), read as its big-endian bytes and written as the
	// unsigned decimal number they hold. A hex literal X'..' would not
	// do: MariaDB compares a BIT column with it as doubles, so BIT(64)
	// values past 2^53 compare wrong (TestKeysetBit).
	PageBit
)

func (k PageKind) String() string {
	switch k {
	case PageNumber:
		return "number"
	case PageText:
		return "text"
	case PageBinary:
		return "binary"
	case PageTemporal:
		return "temporal"
	case PageBit:
		return "bit"
	}
	return "none"
}

// charsetName is a charset name that may follow "_" as an introducer.
var charsetName = regexp.MustCompile(`^[a-z0-9_]+$`)

// KindOf classifies c for paging (PageNone when its values cannot page a
// table exactly).
func KindOf(c *Column) PageKind {
	switch c.DataType {
	case "tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "year":
		return PageNumber
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext":
		if c.Charset == "" || c.Charset == "binary" {
			return PageBinary
		}
		if !charsetName.MatchString(c.Charset) {
			return PageNone
		}
		return PageText
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return PageBinary
	case "date", "time", "datetime", "timestamp":
		return PageTemporal
	case "bit":
		return PageBit
	}
	return PageNone
}

// ErrCannotPage is wrapped by NewKeyset when a key column's type cannot
// page the table exactly (see PageNone).
var ErrCannotPage = errors.New("its values cannot page the table exactly")

// KeyColumn is one column of a Keyset.
type KeyColumn struct {
	// Name as the table spells it.
	Name string
	// Column is its position in Table.Columns.
	Column int
	Kind   PageKind
	// Charset is what a PageText value is written in: the session's
	// character_set_results, or the column's own charset when the
	// session reads raw bytes (SET NAMES binary).
	Charset string
	// Integer: an integer type, whose key ranges split arithmetically.
	Integer bool
}

// Keyset is the one keyset chunker: a key that pages a table exactly in
// key order ("key > cursor ORDER BY key LIMIT n", or lower < key <= upper
// ranges), with how its raw values become literals.
type Keyset struct {
	// Index is the key's index name ("PRIMARY", a unique key's name; ""
	// when the caller named the columns).
	Index   string
	Columns []KeyColumn
}

// NewKeyset pages t by the columns names (in key order) of the index
// named index ("" if unknown). results is the session's
// character_set_results that the values are read in; "" or "binary" means
// raw bytes in each column's own charset. An unknown column is an error,
// and so is a column that cannot page (wrapping ErrCannotPage).
func NewKeyset(t *Table, index string, names []string, results string) (*Keyset, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("table %s: an empty key cannot page it", t)
	}
	results = strings.ToLower(results)
	k := &Keyset{Index: index}
	for _, name := range names {
		i := t.ColumnIndex(name)
		if i < 0 {
			return nil, fmt.Errorf("table %s: key column %s is not a column of the table (altered meanwhile?)", t, name)
		}
		c := &t.Columns[i]
		kind := KindOf(c)
		if kind == PageNone {
			return nil, fmt.Errorf("table %s: key column %s is of type %s: %w", t, c.Name, c.ColumnType, ErrCannotPage)
		}
		kc := KeyColumn{Name: c.Name, Column: i, Kind: kind, Integer: integerTypes[c.DataType]}
		if kind == PageText {
			kc.Charset = c.Charset
			if results != "" && results != "binary" {
				kc.Charset = results
			}
		}
		k.Columns = append(k.Columns, kc)
	}
	return k, nil
}

// integerTypes are the integer DATA_TYPEs.
var integerTypes = map[string]bool{"tinyint": true, "smallint": true, "mediumint": true, "int": true, "bigint": true}

// Names returns the key's column names in key order.
func (k *Keyset) Names() []string {
	names := make([]string, len(k.Columns))
	for i, c := range k.Columns {
		names[i] = c.Name
	}
	return names
}

// OrderBy is the key's columns quoted and comma-separated, for ORDER BY
// and SELECT lists.
func (k *Keyset) OrderBy() string {
	names := make([]string, len(k.Columns))
	for i, c := range k.Columns {
		names[i] = QuoteName(c.Name)
	}
	return strings.Join(names, ", ")
}

var (
	numberText   = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)
	temporalText = regexp.MustCompile(`^-?[0-9:. -]+$`)
)

// Literal writes v, a value of the key's i-th column as the text protocol
// gives it, as an SQL literal. NULL (nil) is an error: a key that pages
// has no NULLs.
func (k *Keyset) Literal(i int, v []byte) (string, error) {
	c := k.Columns[i]
	if v == nil {
		return "", fmt.Errorf("key column %s is NULL in a row: the key is not NOT NULL", c.Name)
	}
	switch c.Kind {
	case PageNumber:
		if !numberText.Match(v) {
			return "", fmt.Errorf("key column %s: %q is not a number", c.Name, v)
		}
		return string(v), nil
	case PageTemporal:
		if !temporalText.Match(v) {
			return "", fmt.Errorf("key column %s: %q is not a temporal value", c.Name, v)
		}
		return "'" + string(v) + "'", nil
	case PageText:
		return textLiteral(c.Charset, v), nil
	case PageBit:
		if len(v) > 8 {
			return "", fmt.Errorf("key column %s: %d bytes are no BIT value", c.Name, len(v))
		}
		return new(big.Int).SetBytes(v).String(), nil
	}
	return "X'" + hex.EncodeToString(v) + "'", nil
}

// Literals writes a row's key values (one per key column) as literals.
func (k *Keyset) Literals(vals [][]byte) ([]string, error) {
	if len(vals) != len(k.Columns) {
		return nil, fmt.Errorf("%d key values for the %d columns of key (%s)", len(vals), len(k.Columns), k.OrderBy())
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		var err error
		if out[i], err = k.Literal(i, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Where is " WHERE lower < key <= upper" over literals (from Literals);
// either bound may be nil (unbounded), "" when both are. A multi-column
// key compares lexicographically, written in the expanded form
// k1 >= c1 AND (k1 > c1 OR (k1 = c1 AND k2 > c2)) that the dump has
// always used: MariaDB reads it as a range of the key's index
// (TestKeysetRange checks EXPLAIN), which it does not promise for the
// row-value form (k1, k2) > (c1, c2).
func (k *Keyset) Where(lower, upper []string) string {
	var conds []string
	if lower != nil {
		conds = append(conds, k.compare(lower, ">", ">"))
	}
	if upper != nil {
		conds = append(conds, k.compare(upper, "<", "<="))
	}
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// compare writes key op v lexicographically: strict is the operator on
// the leading columns (> or <), last the one on the last column (>, >=,
// <, <=).
func (k *Keyset) compare(v []string, strict, last string) string {
	n := len(k.Columns) - 1
	cond := QuoteName(k.Columns[n].Name) + " " + last + " " + v[n]
	for i := n - 1; i >= 0; i-- {
		c := QuoteName(k.Columns[i].Name)
		cond = c + " " + strict + " " + v[i] + " OR (" + c + " = " + v[i] + " AND (" + cond + "))"
	}
	if n == 0 {
		return cond
	}
	return "(" + QuoteName(k.Columns[0].Name) + " " + strict + "= " + v[0] + " AND (" + cond + "))"
}

// textLiteral writes v, text in charset, as _charset X'..': hex, so that
// no sql_mode changes how it reads.
func textLiteral(charset string, v []byte) string {
	return "_" + charset + " X'" + hex.EncodeToString(v) + "'"
}

// stringLiteral writes s as a utf8mb4 string literal.
func stringLiteral(s string) string { return textLiteral("utf8mb4", []byte(s)) }
