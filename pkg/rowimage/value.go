package rowimage

import (
	"strconv"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/shopspring/decimal"

	"github.com/dmworker/dm-worker/pkg/errs"
)

// ConvertValue turns a value decoded from a row image into a query
// argument that writes exactly the same value: unsigned integers (decoded
// as signed) are reinterpreted, decimals keep every digit, strings are
// passed as bytes (so the column's own charset reads them), BIT values
// become unsigned. Times arrive as strings (ParseTime off, TIMESTAMP in
// UTC, which target sessions use too).
func ConvertValue(v any, typ byte, unsigned bool) any {
	switch x := v.(type) {
	case nil:
		return nil
	case int8:
		if unsigned {
			return uint64(uint8(x))
		}
		return int64(x)
	case int16:
		if unsigned {
			return uint64(uint16(x))
		}
		return int64(x)
	case int32:
		if unsigned {
			if typ == mysql.MYSQL_TYPE_INT24 {
				return uint64(uint32(x) & 0xFFFFFF)
			}
			return uint64(uint32(x))
		}
		return int64(x)
	case int64:
		if unsigned || typ == mysql.MYSQL_TYPE_BIT {
			return uint64(x)
		}
		return x
	case int:
		return int64(x)
	case decimal.Decimal:
		return x.String()
	case float64:
		if typ == mysql.MYSQL_TYPE_NEWDECIMAL {
			return strconv.FormatFloat(x, 'f', -1, 64)
		}
		return x
	case float32:
		return float64(x)
	case string:
		return []byte(x)
	case []byte:
		// Never nil: an empty BLOB must stay '' (nil is NULL).
		return append([]byte{}, x...)
	default:
		return v
	}
}

// WhereArg is the WHERE form of column i's converted value: WhereValue,
// and a BINARY(n) value padded with 0x00 to n bytes, which the binlog strips
// and without which `k = value` does not match the stored bytes.
func (t *Table) WhereArg(v any, i int) any {
	if n := t.fixedLen(i); n > 0 {
		if b, ok := v.([]byte); ok && len(b) < n {
			return append(append(make([]byte, 0, n), b...), make([]byte, n-len(b))...)
		}
	}
	return WhereValue(v, t.Binary[i])
}

// WhereValue is the form of a converted value in a WHERE clause: text
// columns compare as text (so the column's collation and index apply),
// binary columns as bytes.
func WhereValue(v any, binary bool) any {
	if b, ok := v.([]byte); ok && !binary {
		return string(b)
	}
	return v
}

// ConvertRow converts one row image of the table from binlog values to
// the values written to the target; the image must hold every column.
// The extend columns' values (Extend) follow the image's.
func (t *Table) ConvertRow(row []any) ([]any, error) {
	if n := len(t.Columns) - len(t.Extend); len(row) != n {
		return nil, errs.New(CodeTableInfo, false,
			"sync: table %s: row image has %d of %d columns; the source needs binlog_row_image=FULL",
			t.Source, len(row), n)
	}
	out := make([]any, len(row), len(t.Columns))
	for i, v := range row {
		out[i] = ConvertValue(v, t.Types[i], t.Unsigned[i])
	}
	return append(out, t.extendValues...), nil
}

// ConvertRowInPlace is ConvertRow writing the converted values over row,
// for a reader that owns the decoded rows event and keeps nothing else of
// it (with extend columns, the values are appended, which may copy).
func (t *Table) ConvertRowInPlace(row []any) ([]any, error) {
	if len(row) != len(t.Columns)-len(t.Extend) {
		return t.ConvertRow(row) // the same error
	}
	for i, v := range row {
		row[i] = ConvertValue(v, t.Types[i], t.Unsigned[i])
	}
	return append(row[:len(row):len(row)], t.extendValues...), nil
}

// fixedLen is Fixed[i], 0 when the table has no fixed lengths.
func (t *Table) fixedLen(i int) int {
	if i < len(t.Fixed) {
		return t.Fixed[i]
	}
	return 0
}
