package stream

import (
	"database/sql"
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// colValueKind says how a column value is written.
type colValueKind uint8

const (
	valueIsNull   colValueKind = iota
	valueIsNumber              // text is a JSON number literal
	valueIsInt                 // num is an int64's bits, written as a JSON number
	valueIsUint                // num is a uint64, written as a JSON number
	valueIsString              // text is UTF-8 text, written as a JSON string
	valueIsBytes               // raw is binary, written as base64 (debezium) or ISO-8859-1 (canal-json)
)

// colValue is one column value in its encoded form, shared by both formats.
type colValue struct {
	kind colValueKind
	text string
	// num is an integer's value (valueIsInt, valueIsUint): kept as a
	// number, not as text, so that an integer costs no allocation.
	num uint64
	raw []byte
	// alt, when hasAlt, is the canal-json text where it differs from text:
	// the ENUM index or SET bitmask (TiCDC's canal-json), or a float
	// without an exponent.
	alt    string
	hasAlt bool
}

// debezium appends the value as DESIGN.md §4 says: numbers as JSON
// numbers, binary as base64, everything else as a JSON string.
func (v colValue) debezium(b []byte) []byte {
	switch v.kind {
	case valueIsNumber:
		return append(b, v.text...)
	case valueIsInt:
		return strconv.AppendInt(b, int64(v.num), 10)
	case valueIsUint:
		return strconv.AppendUint(b, v.num, 10)
	case valueIsString:
		return appendJSONString(b, v.text)
	case valueIsBytes:
		b = append(b, '"')
		n := len(b)
		b = append(b, make([]byte, base64.StdEncoding.EncodedLen(len(v.raw)))...)
		base64.StdEncoding.Encode(b[n:], v.raw)
		return append(b, '"')
	default:
		return append(b, "null"...)
	}
}

// debeziumSize is the size of the value's debezium form: exact but for text
// with characters to escape.
func (v colValue) debeziumSize() int {
	switch v.kind {
	case valueIsNumber:
		return len(v.text)
	case valueIsInt, valueIsUint:
		return 20
	case valueIsString:
		return len(v.text) + 2
	case valueIsBytes:
		return base64.StdEncoding.EncodedLen(len(v.raw)) + 2
	}
	return 4
}

// canal returns the canal-json text of the value (every value is a
// string there) and false for NULL. Binary values map each byte to the
// rune of the same number (ISO-8859-1), as TiCDC and Canal do.
func (v colValue) canal() (string, bool) {
	switch {
	case v.kind == valueIsNull:
		return "", false
	case v.hasAlt:
		return v.alt, true
	case v.kind == valueIsInt:
		return strconv.FormatInt(int64(v.num), 10), true
	case v.kind == valueIsUint:
		return strconv.FormatUint(v.num, 10), true
	case v.kind == valueIsBytes:
		r := make([]rune, len(v.raw))
		for i, c := range v.raw {
			r[i] = rune(c)
		}
		return string(r), true
	default:
		return v.text, true
	}
}

// encodeValue turns one column value, as go-mysql's row decoder gives it
// (ParseTime off, UseDecimal on, TIMESTAMP in UTC) or as database/sql
// scans it ([]byte text, nil for NULL; snapshot reads), into its encoded form. snapshot
// says text values are already UTF-8 (read over a utf8mb4 connection)
// rather than in the column's charset as the binlog carries them.
func encodeValue(c *sqlschema.Column, v any, snapshot bool) (colValue, error) {
	switch x := v.(type) {
	case nil:
		return colValue{}, nil
	case sql.RawBytes:
		v = []byte(x)
	}
	if b, ok := v.([]byte); ok && b == nil { // database/sql's NULL
		return colValue{}, nil
	}
	var (
		out colValue
		err error
	)
	switch c.DataType {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year":
		out, err = encodeInt(c, v)
	case "bit":
		out, err = encodeBit(v)
	case "decimal", "numeric":
		out, err = encodeDecimal(c, v)
	case "float":
		out, err = encodeFloat(v, 32)
	case "double", "real", "double precision":
		out, err = encodeFloat(v, 64)
	case "date", "datetime", "timestamp", "time":
		out, err = encodeTemporal(c, v)
	case "enum":
		out, err = encodeEnum(c, v)
	case "set":
		out, err = encodeSet(c, v)
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "vector",
		"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
		"multipolygon", "geometrycollection":
		out, err = encodeBytes(c, v)
	case "inet4", "inet6", "uuid":
		out, err = encodeFBT(c, v, snapshot)
	default: // char, varchar, *text, json and types the encoder does not know
		out, err = encodeText(c, v, snapshot)
	}
	if err != nil {
		return colValue{}, fmt.Errorf("column %s (%s): %w", c.Name, c.ColumnType, err)
	}
	return out, nil
}

// valueText returns the text of a database/sql value, false for other types.
func valueText(v any) (string, bool) {
	switch x := v.(type) {
	case []byte:
		return string(x), true
	case string:
		return x, true
	}
	return "", false
}

func unexpectedType(v any) error {
	return fmt.Errorf("unexpected value of Go type %T", v)
}

// encodeInt handles every integer type and YEAR. The binlog decoder gives
// signed Go integers of the column's width; an UNSIGNED column's value is
// their bit pattern read unsigned (MEDIUMINT's 24 bits).
func encodeInt(c *sqlschema.Column, v any) (colValue, error) {
	var (
		n        int64
		u        uint64
		unsigned bool
	)
	switch x := v.(type) {
	case int8:
		n, u, unsigned = int64(x), uint64(uint8(x)), c.Unsigned
	case int16:
		n, u, unsigned = int64(x), uint64(uint16(x)), c.Unsigned
	case int32:
		n, u, unsigned = int64(x), uint64(uint32(x)), c.Unsigned
		if c.DataType == "mediumint" {
			u &= 0xFFFFFF
		}
	case int64:
		n, u, unsigned = x, uint64(x), c.Unsigned
	case int:
		n, u, unsigned = int64(x), uint64(x), c.Unsigned && x >= 0
	case uint8:
		u, unsigned = uint64(x), true
	case uint16:
		u, unsigned = uint64(x), true
	case uint32:
		u, unsigned = uint64(x), true
	case uint64:
		u, unsigned = x, true
	case uint:
		u, unsigned = uint64(x), true
	default:
		s, ok := valueText(v)
		if !ok {
			return colValue{}, unexpectedType(v)
		}
		var err error
		if strings.HasPrefix(s, "-") {
			n, err = strconv.ParseInt(s, 10, 64)
		} else {
			u, err = strconv.ParseUint(s, 10, 64)
			unsigned = true
		}
		if err != nil {
			return colValue{}, fmt.Errorf("integer text %q: %w", s, err)
		}
	}
	if unsigned {
		return colValue{kind: valueIsUint, num: u}, nil
	}
	return colValue{kind: valueIsInt, num: uint64(n)}, nil
}

// encodeBit: the binlog gives an int64 of the bits, database/sql the
// big-endian bytes of the column.
func encodeBit(v any) (colValue, error) {
	u, ok := valueInt(v)
	if !ok {
		s, ok := valueText(v)
		if !ok {
			return colValue{}, unexpectedType(v)
		}
		if len(s) > 8 {
			return colValue{}, fmt.Errorf("BIT value of %d bytes, at most 8 expected", len(s))
		}
		for i := 0; i < len(s); i++ {
			u = u<<8 | uint64(s[i])
		}
	}
	return colValue{kind: valueIsNumber, text: strconv.FormatUint(u, 10)}, nil
}

// encodeDecimal writes DECIMAL as a string with exactly the column's
// scale, as MariaDB prints it (but without ZEROFILL's leading zeros).
func encodeDecimal(c *sqlschema.Column, v any) (colValue, error) {
	var d decimal.Decimal
	switch x := v.(type) {
	case decimal.Decimal:
		d = x
	case float64:
		return colValue{kind: valueIsString, text: strconv.FormatFloat(x, 'f', c.Scale, 64)}, nil
	default:
		s, ok := valueText(v)
		if !ok {
			return colValue{}, unexpectedType(v)
		}
		var err error
		if d, err = decimal.NewFromString(s); err != nil {
			return colValue{}, fmt.Errorf("decimal text %q: %w", s, err)
		}
	}
	return colValue{kind: valueIsString, text: d.StringFixed(int32(c.Scale))}, nil
}

// encodeFloat writes FLOAT (bits 32) and DOUBLE (bits 64) as JSON numbers:
// the shortest text that reads back as the same float32 or float64, without
// an exponent unless the magnitude is below 1e-6 or from 1e21 on (as
// encoding/json writes floats). The binlog gives a FLOAT as a float32; a
// snapshot reads it as the text of the double that holds it exactly
// (CAST(col AS DOUBLE), see selectList), whose nearest float32 is the same
// value, so both forms encode alike.
func encodeFloat(v any, bits int) (colValue, error) {
	var f float64
	switch x := v.(type) {
	case float32:
		f = float64(x)
	case float64:
		f = x
	default:
		s, ok := valueText(v)
		if !ok {
			return colValue{}, unexpectedType(v)
		}
		var err error
		if f, err = strconv.ParseFloat(s, bits); err != nil {
			return colValue{}, fmt.Errorf("float text %q: %w", s, err)
		}
	}
	if bits == 32 {
		f = float64(float32(f)) // the FLOAT a float64 value stands for
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return colValue{}, fmt.Errorf("float %v has no JSON form", f)
	}
	return colValue{kind: valueIsNumber, text: jsonFloat(f, bits),
		alt: strconv.FormatFloat(f, 'f', -1, bits), hasAlt: true}, nil
}

// jsonFloat formats f as encoding/json does.
func jsonFloat(f float64, bits int) string {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	s := strconv.FormatFloat(f, format, -1, bits)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(s); n >= 4 && s[n-4] == 'e' && s[n-3] == '-' && s[n-2] == '0' {
			s = s[:n-2] + s[n-1:]
		}
	}
	return s
}

// encodeTemporal writes DATE, DATETIME, TIMESTAMP and TIME in MariaDB's
// text form with exactly the column's fractional digits (the binlog
// decoder drops a zero fraction of TIME; zero dates stay as they are).
// TIMESTAMP values must be in UTC: the binlog decoder's
// TimestampStringLocation, and time_zone '+00:00' for snapshot reads.
func encodeTemporal(c *sqlschema.Column, v any) (colValue, error) {
	var s string
	switch x := v.(type) {
	case time.Time:
		if c.DataType == "date" {
			s = x.Format(time.DateOnly)
		} else {
			s = x.Format("2006-01-02 15:04:05.000000")
		}
	case fmt.Stringer:
		s = x.String()
	default:
		var ok bool
		if s, ok = valueText(v); !ok {
			return colValue{}, unexpectedType(v)
		}
	}
	if c.DataType != "date" {
		s = withFraction(s, c.Scale)
	}
	return colValue{kind: valueIsString, text: s}, nil
}

// withFraction gives s exactly digits fractional-second digits, padding
// with zeros or cutting.
func withFraction(s string, digits int) string {
	whole, frac, _ := strings.Cut(s, ".")
	if digits == 0 {
		return whole
	}
	if len(frac) >= digits {
		return whole + "." + frac[:digits]
	}
	return whole + "." + frac + strings.Repeat("0", digits-len(frac))
}

// valueInt returns an integer binlog value (ENUM index, SET bitmask).
func valueInt(v any) (uint64, bool) {
	switch x := v.(type) {
	case int64:
		return uint64(x), true
	case int:
		return uint64(x), true
	case int32:
		return uint64(uint32(x)), true
	case uint64:
		return x, true
	}
	return 0, false
}

// encodeEnum writes an ENUM as its member (index 0, the invalid value, is
// ""); canal-json gets the 1-based index.
func encodeEnum(c *sqlschema.Column, v any) (colValue, error) {
	if idx, ok := valueInt(v); ok {
		name := ""
		if idx > 0 {
			if idx > uint64(len(c.Elems)) {
				return colValue{}, fmt.Errorf("ENUM index %d beyond the %d members %q", idx, len(c.Elems), c.Elems)
			}
			name = c.Elems[idx-1]
		}
		return colValue{kind: valueIsString, text: name, alt: strconv.FormatUint(idx, 10), hasAlt: true}, nil
	}
	s, ok := valueText(v)
	if !ok {
		return colValue{}, unexpectedType(v)
	}
	idx := 0
	for i, e := range c.Elems {
		if e == s {
			idx = i + 1
			break
		}
	}
	return colValue{kind: valueIsString, text: s, alt: strconv.Itoa(idx), hasAlt: true}, nil
}

// encodeSet writes a SET as its members joined by commas in column order;
// canal-json gets the bitmask.
func encodeSet(c *sqlschema.Column, v any) (colValue, error) {
	if mask, ok := valueInt(v); ok {
		if len(c.Elems) < 64 && mask>>uint(len(c.Elems)) != 0 {
			return colValue{}, fmt.Errorf("SET bitmask %#x beyond the %d members %q", mask, len(c.Elems), c.Elems)
		}
		var names []string
		for i, e := range c.Elems {
			if mask&(1<<uint(i)) != 0 {
				names = append(names, e)
			}
		}
		return colValue{kind: valueIsString, text: strings.Join(names, ","),
			alt: strconv.FormatUint(mask, 10), hasAlt: true}, nil
	}
	s, ok := valueText(v)
	if !ok {
		return colValue{}, unexpectedType(v)
	}
	var mask uint64
	if s != "" {
		for _, name := range strings.Split(s, ",") {
			for i, e := range c.Elems {
				if e == name {
					mask |= 1 << uint(i)
					break
				}
			}
		}
	}
	return colValue{kind: valueIsString, text: s, alt: strconv.FormatUint(mask, 10), hasAlt: true}, nil
}

// encodeBytes keeps binary values as bytes; a BINARY(n) value, which the
// binlog carries without its trailing 0x00 bytes, is padded back to n.
func encodeBytes(c *sqlschema.Column, v any) (colValue, error) {
	var b []byte
	switch x := v.(type) {
	case []byte:
		b = x
	case string:
		b = []byte(x)
	default:
		return colValue{}, unexpectedType(v)
	}
	if c.DataType == "binary" && len(b) < c.Length {
		b = append(append(make([]byte, 0, c.Length), b...), make([]byte, c.Length-len(b))...)
	}
	return colValue{kind: valueIsBytes, raw: b}, nil
}

// encodeText writes text as UTF-8. Binlog text is in the column's charset.
func encodeText(c *sqlschema.Column, v any, snapshot bool) (colValue, error) {
	s, ok := valueText(v)
	if !ok {
		return colValue{}, unexpectedType(v)
	}
	if snapshot {
		return colValue{kind: valueIsString, text: s}, nil
	}
	u, err := sqlschema.ToUTF8(c.Charset, s)
	if err != nil {
		return colValue{}, err
	}
	return colValue{kind: valueIsString, text: u}, nil
}
