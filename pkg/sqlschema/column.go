package sqlschema

import (
	"fmt"
	"strconv"
	"strings"
)

// Column is one column of a table as information_schema's COLUMNS describes
// it. Build one with NewColumn, which derives Unsigned, Elems, Scale and
// Length from ColumnType.
type Column struct {
	Name string
	// Ordinal is ORDINAL_POSITION, from 1.
	Ordinal int
	// DataType is DATA_TYPE in lower case: "int", "decimal", "datetime",
	// "enum", "json", "blob", "bit", ...
	DataType string
	// ColumnType is COLUMN_TYPE, e.g. "int(10) unsigned", "enum('a','b')".
	ColumnType string
	Unsigned   bool
	// Elems are the ENUM / SET members in order (from ColumnType).
	Elems    []string
	Nullable bool
	// Charset is CHARACTER_SET_NAME in lower case ("" for columns that
	// hold no text); the binlog carries text in this charset.
	Charset string
	// Collation is COLLATION_NAME in lower case ("" for columns that hold
	// no text): how the server compares the column's values.
	Collation string
	// Scale is the DECIMAL scale or the fractional-second digits of a
	// DATETIME, TIMESTAMP or TIME column (from ColumnType).
	Scale int
	// Length is the declared length of a BINARY(n) column, to which the
	// binlog's right-trimmed value is padded back with 0x00 bytes; 0 for
	// every other type.
	Length int
	// Generated: a VIRTUAL or STORED (PERSISTENT) generated column, which
	// no INSERT may name.
	Generated bool
	// Invisible: MariaDB's INVISIBLE column, left out of SELECT *.
	Invisible bool
	// AutoIncrement: the table's AUTO_INCREMENT column.
	AutoIncrement bool
	// HasDefault: the column has a default (information_schema's
	// COLUMN_DEFAULT is not NULL). Default is COLUMN_DEFAULT as MariaDB
	// shows it since 10.2.7: an SQL expression that can be written after
	// DEFAULT as is ('text' quoted, 5, NULL, current_timestamp()). A NOT
	// NULL column without a DEFAULT clause has none; a nullable one has
	// "NULL". Set by the reader (SetDefault), not by NewColumn.
	HasDefault bool
	Default    string
}

// SetDefault sets HasDefault and Default from information_schema's
// COLUMN_DEFAULT (valid false: SQL NULL, no default).
func (c *Column) SetDefault(value string, valid bool) {
	c.HasDefault, c.Default = valid, ""
	if valid {
		c.Default = value
	}
}

// NewColumn builds a Column from information_schema's COLUMN_NAME,
// DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME and IS_NULLABLE; SetExtra
// adds what EXTRA says.
func NewColumn(name, dataType, columnType, charset string, nullable bool) (Column, error) {
	c := Column{
		Name:       name,
		DataType:   strings.ToLower(dataType),
		ColumnType: columnType,
		Nullable:   nullable,
		Charset:    strings.ToLower(charset),
		Unsigned:   strings.Contains(strings.ToLower(columnType), "unsigned"),
	}
	args := columnTypeArgs(columnType)
	switch c.DataType {
	case "enum", "set":
		elems, err := parseElems(args)
		if err != nil {
			return Column{}, fmt.Errorf("column %s: %w", name, err)
		}
		c.Elems = elems
	case "decimal", "numeric":
		if _, scale, ok := strings.Cut(args, ","); ok {
			c.Scale = columnAtoi(scale)
		}
	case "datetime", "timestamp", "time":
		c.Scale = columnAtoi(args)
	case "binary":
		c.Length = columnAtoi(args)
		if args == "" {
			c.Length = 1 // BINARY means BINARY(1)
		}
	}
	return c, nil
}

// SetExtra sets Generated, Invisible and AutoIncrement from
// information_schema's EXTRA ("VIRTUAL GENERATED", "STORED GENERATED",
// "PERSISTENT", "INVISIBLE", "auto_increment").
// MySQL 8's "DEFAULT_GENERATED" (an expression default) is no generated
// column.
func (c *Column) SetExtra(extra string) {
	e := strings.ToUpper(extra)
	c.Generated = strings.Contains(e, "VIRTUAL") || strings.Contains(e, "STORED") || strings.Contains(e, "PERSISTENT")
	c.Invisible = strings.Contains(e, "INVISIBLE")
	c.AutoIncrement = strings.Contains(e, "AUTO_INCREMENT")
}

// Binary reports whether the column holds bytes rather than text: a
// BINARY, VARBINARY or BLOB type (no character set). Such values compare
// and are written as bytes.
func (c *Column) Binary() bool {
	return c.Charset == "" && (strings.Contains(c.DataType, "binary") || strings.Contains(c.DataType, "blob"))
}

// columnTypeArgs returns what is between the first "(" of a COLUMN_TYPE and
// its matching ")" ("" when there is none), e.g. "40,10" of "decimal(40,10)".
func columnTypeArgs(columnType string) string {
	open := strings.IndexByte(columnType, '(')
	end := strings.LastIndexByte(columnType, ')')
	if open < 0 || end < open {
		return ""
	}
	return columnType[open+1 : end]
}

func columnAtoi(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0
	}
	return n
}

// parseElems parses the member list of an ENUM or SET COLUMN_TYPE: quoted
// members separated by commas, a quote inside a member doubled (MariaDB
// also accepts a backslash escape there); a member may hold commas.
func parseElems(list string) ([]string, error) {
	var elems []string
	for i := 0; i < len(list); {
		if list[i] != '\'' {
			return nil, fmt.Errorf("member list %q: expected a quote at offset %d", list, i)
		}
		var b strings.Builder
		i++
		for {
			if i >= len(list) {
				return nil, fmt.Errorf("member list %q: unterminated member", list)
			}
			ch := list[i]
			if ch == '\\' && i+1 < len(list) {
				b.WriteByte(list[i+1])
				i += 2
				continue
			}
			if ch == '\'' {
				if i+1 < len(list) && list[i+1] == '\'' {
					b.WriteByte('\'')
					i += 2
					continue
				}
				i++
				break
			}
			b.WriteByte(ch)
			i++
		}
		elems = append(elems, b.String())
		if i < len(list) {
			if list[i] != ',' {
				return nil, fmt.Errorf("member list %q: expected a comma at offset %d", list, i)
			}
			i++
		}
	}
	return elems, nil
}
