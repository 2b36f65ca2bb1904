package exprfilter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/shopspring/decimal"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// column compiles a column reference into a reader of the row image.
//
// The values arrive as go-mysql's row decoder gives them with this
// repository's settings (pkg/binlog/upstream: UseDecimal on, ParseTime off,
// TimestampStringLocation UTC): integers as int8/int16/int32/int64 (signed
// whatever the column's signedness; MEDIUMINT as a sign-extended int32),
// YEAR as int, DECIMAL as decimal.Decimal, FLOAT as float32, DOUBLE as
// float64, BIT and SET (bitmask) and ENUM (1-based index) as int64,
// CHAR/VARCHAR/BINARY/VARBINARY as string, TEXT/BLOB (and MariaDB's JSON,
// a LONGTEXT) as []byte, MySQL's JSON as string, DATE/DATETIME/TIMESTAMP/
// TIME as strings. pkg/rowimage's converted forms (uint64, decimal text,
// []byte text) are read as well.
func (c *compiler) column(name string) (node, error) {
	i := c.table.ColumnIndex(name)
	if i < 0 {
		return node{}, fmt.Errorf("unknown column %s in table %s (columns: %s)", name, c.table, columnNames(c.table))
	}
	col := &c.table.Columns[i]
	at := func(row []any) any { return row[i] }
	switch col.DataType {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
		return intColumn(i, col), nil
	case "year":
		// YEAR is unsigned: i + y is BIGINT UNSIGNED arithmetic
		return node{t: typ{k: kUint, coer: coerImplicit, year: true}, f: func(row []any) (val, error) {
			v := at(row)
			if v == nil {
				return nullVal, nil
			}
			n, ok := anyInt(v)
			if !ok {
				return nullVal, badValue(col, v)
			}
			return uintVal(uint64(n)), nil
		}}, nil
	case "bit":
		// a number, whose text (LIKE, CONCAT) is its bytes, as MariaDB's
		bits, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSuffix(strings.ToLower(col.ColumnType), ")"), "bit("))
		if err != nil || bits <= 0 {
			bits = 1
		}
		nbytes := int8((bits + 7) / 8)
		return node{t: typ{k: kUint, coer: coerImplicit, bit: true}, f: func(row []any) (val, error) {
			v := at(row)
			if v == nil {
				return nullVal, nil
			}
			n, ok := anyInt(v)
			if !ok {
				return nullVal, badValue(col, v)
			}
			out := uintVal(uint64(n))
			out.bitLen = nbytes
			return out, nil
		}}, nil
	case "decimal", "numeric":
		scale := int32(col.Scale)
		return node{t: typ{k: kDec, scale: scale, coer: coerImplicit, uns: col.Unsigned}, f: func(row []any) (val, error) {
			switch x := at(row).(type) {
			case nil:
				return nullVal, nil
			case decimal.Decimal:
				return decVal(x), nil
			case string:
				d, err := decimal.NewFromString(x)
				if err != nil {
					return nullVal, badValue(col, x)
				}
				return decVal(d), nil
			case []byte:
				d, err := decimal.NewFromString(string(x))
				if err != nil {
					return nullVal, badValue(col, x)
				}
				return decVal(d), nil
			case float64:
				return decVal(decimal.NewFromFloat(x)), nil
			default:
				return nullVal, badValue(col, x)
			}
		}}, nil
	case "float", "double", "real":
		return node{t: typ{k: kFloat, coer: coerImplicit}, f: func(row []any) (val, error) {
			switch x := at(row).(type) {
			case nil:
				return nullVal, nil
			case float32:
				v := floatVal(float64(x))
				v.f32 = col.DataType == "float"
				return v, nil
			case float64:
				return floatVal(x), nil
			default:
				return nullVal, badValue(col, x)
			}
		}}, nil
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json",
		"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		coll := columnCollation(col)
		if col.Binary() || col.Charset == "binary" {
			coll = binaryColl
		}
		// Text is compared as UTF-8, as the expression's literals are
		// written; the binlog carries it in the column's charset.
		charset := col.Charset
		if coll == binaryColl {
			charset = "binary"
		}
		if !sqlschema.ReadsCharset(charset) {
			return node{}, fmt.Errorf("column %s of table %s is in charset %s, which expression filters do not read (supported: utf8mb4, utf8mb3, ascii, latin1, binary); convert the column or remove it from the expression",
				col.Name, c.table, charset)
		}
		t := typ{k: kStr, coll: coll, coer: coerImplicit}
		padTo := 0
		if col.DataType == "binary" {
			padTo = col.Length
		}
		return node{t: t, f: func(row []any) (val, error) {
			v := at(row)
			if v == nil {
				return nullVal, nil
			}
			s, ok := rowText(v)
			if !ok {
				return nullVal, badValue(col, v)
			}
			if charset == "latin1" {
				s, _ = sqlschema.ToUTF8(charset, s) // latin1 converts every byte
			}
			if padTo > len(s) {
				// the binlog strips BINARY(n)'s trailing 0x00 bytes; the
				// value the server compares has them
				s += strings.Repeat("\x00", padTo-len(s))
			}
			return strVal(s, coll), nil
		}}, nil
	case "enum", "set":
		return enumColumn(i, col, columnCollation(col)), nil
	case "date", "datetime", "timestamp":
		date := col.DataType == "date"
		fsp := int8(col.Scale)
		var loc *time.Location
		if col.DataType == "timestamp" && c.loc != time.UTC {
			loc = c.loc
		}
		return node{t: typ{k: kTime, date: date, fsp: fsp, coer: coerImplicit}, f: func(row []any) (val, error) {
			var s string
			switch x := at(row).(type) {
			case nil:
				return nullVal, nil
			case string:
				s = x
			case []byte:
				s = unsafe.String(unsafe.SliceData(x), len(x))
			case time.Time:
				return fromGoTime(x.In(c.loc), fsp), nil
			default:
				return nullVal, badValue(col, x)
			}
			p, _, _, ok := parseDatetime(s)
			if !ok {
				return nullVal, badValue(col, s)
			}
			if loc != nil && p != 0 {
				// TIMESTAMP text is UTC; the session sees it in its zone
				if t, ok := goTime(p, time.UTC); ok {
					v := fromGoTime(t.In(loc), fsp)
					v.date = date
					return v, nil
				}
			}
			v := timeVal(p, date, fsp)
			v.s = s
			return v, nil
		}}, nil
	case "time":
		fsp := int8(col.Scale)
		return node{t: typ{k: kDur, fsp: fsp, coer: coerImplicit}, f: func(row []any) (val, error) {
			v := at(row)
			if v == nil {
				return nullVal, nil
			}
			s, ok := rowText(v)
			if !ok {
				return nullVal, badValue(col, v)
			}
			us, _, ok := parseDuration(s)
			if !ok {
				return nullVal, badValue(col, s)
			}
			return val{k: kDur, i: us, fsp: fsp, s: s}, nil
		}}, nil
	}
	return node{}, fmt.Errorf("column %s of table %s has the type %s, which expression filters do not read (supported: integers, DECIMAL, FLOAT, DOUBLE, BIT, YEAR, CHAR, VARCHAR, TEXT, BINARY, VARBINARY, BLOB, JSON, ENUM, SET, DATE, DATETIME, TIMESTAMP, TIME)",
		col.Name, c.table, col.ColumnType)
}

// columnCollation is the column's collation; a text column whose model
// has no COLLATION_NAME (a table not read from information_schema) gets
// its charset's default, which the approximation treats alike: case- and
// accent-insensitive with PAD SPACE.
func columnCollation(col *sqlschema.Column) *collation {
	if col.Collation == "" && col.Charset != "" && col.Charset != "binary" {
		return collationOf(col.Charset + "_general_ci")
	}
	return collationOf(col.Collation)
}

func columnNames(t *sqlschema.Table) string {
	names := make([]string, len(t.Columns))
	for i := range t.Columns {
		names[i] = t.Columns[i].Name
	}
	return strings.Join(names, ", ")
}

// rowText is a value the decoder gives as text (string or []byte) as a
// string, without a copy.
func rowText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case []byte:
		return unsafe.String(unsafe.SliceData(x), len(x)), true
	}
	return "", false
}

func badValue(col *sqlschema.Column, v any) error {
	return fmt.Errorf("column %s (%s): unexpected value %v of Go type %T in the row image", col.Name, col.ColumnType, v, v)
}

// anyInt reads any Go integer (and the []byte / string of a number).
func anyInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return int64(x), true
	case uint:
		return int64(x), true
	}
	return 0, false
}

// intColumn reads an integer column: the decoder's signed value
// reinterpreted as unsigned for an UNSIGNED column of its width.
func intColumn(i int, col *sqlschema.Column) node {
	if !col.Unsigned {
		return node{t: typ{k: kInt, coer: coerImplicit}, f: func(row []any) (val, error) {
			switch x := row[i].(type) {
			case nil:
				return nullVal, nil
			case int64:
				return intVal(x), nil
			case int32:
				return intVal(int64(x)), nil
			case int16:
				return intVal(int64(x)), nil
			case int8:
				return intVal(int64(x)), nil
			default:
				n, ok := anyInt(x)
				if !ok {
					return nullVal, badValue(col, x)
				}
				return intVal(n), nil
			}
		}}
	}
	var mask uint64 = math.MaxUint64
	switch col.DataType {
	case "tinyint":
		mask = 0xFF
	case "smallint":
		mask = 0xFFFF
	case "mediumint":
		mask = 0xFFFFFF
	case "int", "integer":
		mask = 0xFFFFFFFF
	}
	return node{t: typ{k: kUint, coer: coerImplicit}, f: func(row []any) (val, error) {
		switch x := row[i].(type) {
		case nil:
			return nullVal, nil
		case uint64:
			return uintVal(x), nil
		default:
			n, ok := anyInt(x)
			if !ok {
				return nullVal, badValue(col, x)
			}
			return uintVal(uint64(n) & mask), nil
		}
	}}
}

// enumColumn reads an ENUM (1-based index) or SET (bitmask) column: a
// string that is also a number.
func enumColumn(i int, col *sqlschema.Column, coll *collation) node {
	elems := col.Elems
	isSet := col.DataType == "set"
	// SET texts of small sets are built once
	var setTexts []string
	if isSet && len(elems) <= 8 {
		setTexts = make([]string, 1<<len(elems))
		for m := range setTexts {
			setTexts[m] = setText(elems, uint64(m))
		}
	}
	return node{t: typ{k: kStr, coll: coll, coer: coerImplicit, enum: true}, f: func(row []any) (val, error) {
		v := row[i]
		if v == nil {
			return nullVal, nil
		}
		var n int64
		switch x := v.(type) {
		case string:
			return enumFromText(elems, isSet, x, coll), nil
		case []byte:
			return enumFromText(elems, isSet, string(x), coll), nil
		default:
			var ok bool
			if n, ok = anyInt(v); !ok {
				return nullVal, badValue(col, v)
			}
		}
		out := val{k: kStr, coll: coll, hasNum: true, i: n}
		if isSet {
			if setTexts != nil && uint64(n) < uint64(len(setTexts)) {
				out.s = setTexts[n]
			} else {
				out.s = setText(elems, uint64(n))
			}
		} else if n >= 1 && int(n) <= len(elems) {
			out.s = elems[n-1]
		}
		return out, nil
	}}
}

func setText(elems []string, mask uint64) string {
	var b strings.Builder
	for j := range elems {
		if mask&(1<<uint(j)) != 0 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(elems[j])
		}
	}
	return b.String()
}

// enumFromText is an ENUM/SET value delivered as its text (a converted
// row): its number is looked up.
func enumFromText(elems []string, isSet bool, s string, coll *collation) val {
	out := val{k: kStr, s: s, coll: coll, hasNum: true}
	if isSet {
		for _, part := range strings.Split(s, ",") {
			for j, e := range elems {
				if e == part {
					out.i |= 1 << uint(j)
				}
			}
		}
		return out
	}
	for j, e := range elems {
		if e == s {
			out.i = int64(j + 1)
		}
	}
	if out.i == 0 {
		if n, err := strconv.Atoi(s); err == nil && n >= 1 && n <= len(elems) {
			out.i, out.s = int64(n), elems[n-1]
		}
	}
	return out
}
