package validate

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/shopspring/decimal"

	"github.com/dmworker/dm-worker/pkg/rowimage"
)

// isStringType reports whether a binlog type holds strings or bytes (CHAR,
// BINARY, VARCHAR, VARBINARY, TEXT, BLOB, MariaDB's JSON, GEOMETRY).
func isStringType(typ byte) bool {
	switch typ {
	case mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING,
		mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_TINY_BLOB, mysql.MYSQL_TYPE_MEDIUM_BLOB,
		mysql.MYSQL_TYPE_LONG_BLOB, mysql.MYSQL_TYPE_GEOMETRY:
		return true
	}
	return false
}

// isTemporalType reports whether a binlog type is a date or time.
func isTemporalType(typ byte) bool {
	switch typ {
	case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_NEWDATE, mysql.MYSQL_TYPE_TIME, mysql.MYSQL_TYPE_TIME2,
		mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_DATETIME2, mysql.MYSQL_TYPE_TIMESTAMP,
		mysql.MYSQL_TYPE_TIMESTAMP2:
		return true
	}
	return false
}

// canonValue is the canonical text of a value of t's column i, so that
// equal column values have equal texts: v is either a converted binlog
// value or the bytes the comparer's SELECT expression returned. ok is
// false for NULL.
func canonValue(t *rowimage.Table, i int, v any) (_ string, ok bool) {
	if v == nil {
		return "", false
	}
	typ, s := t.Types[i], text(v)
	switch {
	case typ == mysql.MYSQL_TYPE_FLOAT:
		return floatText(s, 32), true
	case typ == mysql.MYSQL_TYPE_DOUBLE:
		return floatText(s, 64), true
	case typ == mysql.MYSQL_TYPE_NEWDECIMAL || typ == mysql.MYSQL_TYPE_DECIMAL:
		if d, err := decimal.NewFromString(s); err == nil {
			return d.String(), true
		}
	case typ == mysql.MYSQL_TYPE_ENUM || typ == mysql.MYSQL_TYPE_SET || typ == mysql.MYSQL_TYPE_BIT:
		// A 64-member SET's bitmask: the binlog and SET+0 give it signed.
		if x, err := strconv.ParseInt(s, 10, 64); err == nil && x < 0 {
			return strconv.FormatUint(uint64(x), 10), true
		}
	case isTemporalType(typ):
		return trimFraction(s), true
	case typ == mysql.MYSQL_TYPE_JSON:
		return canonJSON(s), true
	case typ == mysql.MYSQL_TYPE_STRING && t.Binary[i]:
		return strings.TrimRight(s, "\x00"), true // BINARY(n) pads with zeros
	case typ == mysql.MYSQL_TYPE_STRING:
		return strings.TrimRight(s, " "), true // CHAR pads with spaces
	}
	return s, true
}

// text is a value's text: bytes and strings as they are, numbers in
// decimal, anything else by its String method (go-mysql's times) or %v.
func text(v any) string {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case fmt.Stringer:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}

// floatText is the shortest text of a float at bits precision (32: FLOAT,
// whose values the target prints as doubles), so any exact form of the
// same value gives the same text.
func floatText(s string, bits int) string {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	if bits == 32 {
		return strconv.FormatFloat(float64(float32(f)), 'g', -1, 32)
	}
	if f == 0 {
		f = 0 // -0 equals 0
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// trimFraction removes the trailing zeros of a time's fractional seconds
// (and the point when nothing is left): the binlog and the target print
// different numbers of digits for the same value.
func trimFraction(s string) string {
	dot := strings.LastIndexByte(s, '.')
	if dot < 0 {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// canonJSON is a JSON text re-encoded canonically: object keys sorted,
// numbers in shortest decimal form, no insignificant space. Text that is
// not JSON is returned as it is.
func canonJSON(s string) string {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return s
	}
	out, err := json.Marshal(canonNumbers(v))
	if err != nil {
		return s
	}
	return string(out)
}

// canonNumbers rewrites the numbers of a decoded JSON value in shortest
// decimal form (1.0 and 1 and 1e0 are the same number).
func canonNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if d, err := decimal.NewFromString(x.String()); err == nil {
			return json.Number(d.String())
		}
	case map[string]any:
		for k, e := range x {
			x[k] = canonNumbers(e)
		}
	case []any:
		for k, e := range x {
			x[k] = canonNumbers(e)
		}
	}
	return v
}

// displayRow renders converted values of t's columns (every column, in
// t.Columns order) as the JSON object shown to operators: column name to
// string, or null for NULL; bytes of binary columns as "0x" + hex.
func displayRow(t *rowimage.Table, vals []any) json.RawMessage {
	idx := make([]int, len(t.Columns))
	for i := range idx {
		idx[i] = i
	}
	return displayCols(t, idx, vals)
}

// keyJSON renders key values (t.Key order) as displayRow does, as the
// object of key column to value.
func keyJSON(t *rowimage.Table, key []any) json.RawMessage {
	return displayCols(t, t.Key, key)
}

// displayCols renders vals, the values of t's columns idx (same order), as
// a JSON object in that order.
func displayCols(t *rowimage.Table, idx []int, vals []any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	b.WriteByte('{')
	for n, i := range idx {
		if n > 0 {
			b.WriteByte(',')
		}
		_ = enc.Encode(t.Columns[i]) // strings always encode
		b.Truncate(b.Len() - 1)      // Encode's newline
		b.WriteByte(':')
		if n >= len(vals) || vals[n] == nil {
			b.WriteString("null")
			continue
		}
		_ = enc.Encode(displayValue(t, i, vals[n]))
		b.Truncate(b.Len() - 1)
	}
	b.WriteByte('}')
	return json.RawMessage(b.Bytes())
}

// displayValue is the text shown for a non-NULL value of column i: bytes
// of a binary column in hex, JSON as it is, other values in their
// canonical form (see canonValue), so both sides of an equal value show
// the same text.
func displayValue(t *rowimage.Table, i int, v any) string {
	typ := t.Types[i]
	if typ == mysql.MYSQL_TYPE_JSON {
		return text(v)
	}
	s, _ := canonValue(t, i, v)
	if t.Binary[i] && isStringType(typ) {
		return "0x" + hex.EncodeToString([]byte(s))
	}
	return s
}

// sameFast compares the common cases without building canonical texts:
// strings and bytes (CHAR and BINARY(n) without their padding) and
// integers. known is false for every other case, which canonValue
// decides. got is the target's text (nil for NULL).
func sameFast(t *rowimage.Table, i int, want, got any) (same, known bool) {
	g, isBytes := got.([]byte)
	if want == nil || got == nil {
		return want == nil && got == nil, true
	}
	if !isBytes {
		return false, false
	}
	typ := t.Types[i]
	switch w := want.(type) {
	case []byte:
		switch {
		case typ == mysql.MYSQL_TYPE_STRING && t.Binary[i]:
			return bytes.Equal(bytes.TrimRight(w, "\x00"), bytes.TrimRight(g, "\x00")), true
		case typ == mysql.MYSQL_TYPE_STRING:
			return bytes.Equal(bytes.TrimRight(w, " "), bytes.TrimRight(g, " ")), true
		case isStringType(typ):
			return bytes.Equal(w, g), true
		}
	case int64:
		if w >= 0 || typ != mysql.MYSQL_TYPE_ENUM && typ != mysql.MYSQL_TYPE_SET && typ != mysql.MYSQL_TYPE_BIT {
			var buf [24]byte
			return bytes.Equal(strconv.AppendInt(buf[:0], w, 10), g), true
		}
	case uint64:
		var buf [24]byte
		return bytes.Equal(strconv.AppendUint(buf[:0], w, 10), g), true
	}
	return false, false
}
