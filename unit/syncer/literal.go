package syncer

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
)

// Statement text with the values written in: a batch's statements carry
// their values as arguments of `?` placeholders, and execTx used to hand
// them to the driver, which checks and converts every argument (a slice
// of driver values per query) and interpolates them into a buffer of its
// own, copied again into the query string: a bulk batch of 4,096 sysbench
// rows is 16,384 arguments and ~800 kB of text, and that path was 15 % of
// the worker's CPU in the prepare of TestSyncFromPos4 (docs/benchmarks.md).
// writeStatements writes the values straight into the query text instead,
// with the driver's own literal forms, so the target reads exactly what it
// read before:
//   - nil (and a nil []byte) as NULL; signed and unsigned integers in
//     decimal; float64 as strconv's shortest 'g' form; bool as 1 or 0;
//   - []byte as _binary'...' (the unit passes string columns as bytes, so
//     the column's own charset reads them), string as '...';
//   - inside the quotes, with backslash escapes (\0 \n \r \Z \' \" \\) or,
//     when the target's session has NO_BACKSLASH_ESCAPES, by doubling quotes;
//   - except that in a multi-row INSERT, bytes of up to hexLiteralMax for a
//     target column of a string type are written as X'...' (appendHex).
//
// Any other argument type, or a placeholder count that does not match,
// leaves the whole query to the driver as before.

// escapeMode is how the target's sessions read string literals.
type escapeMode uint8

const (
	// escapeUnknown: the unit has not read the session's sql_mode; the
	// driver interpolates (it knows each connection's mode).
	escapeUnknown escapeMode = iota
	escapeBackslash
	// escapeQuotes: NO_BACKSLASH_ESCAPES, a backslash is an ordinary byte.
	escapeQuotes
)

// targetEscapes reads the escape mode of db's sessions. Every connection
// of the pool sets the same literal session variables when it connects
// (dbconn.DriverConfig, openTarget), and the unit runs nothing that
// changes sql_mode afterwards, so one session answers for all.
func targetEscapes(ctx context.Context, db *sql.DB) (escapeMode, error) {
	var mode string
	if err := db.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode").Scan(&mode); err != nil {
		return escapeUnknown, err
	}
	for _, m := range strings.Split(mode, ",") {
		if strings.EqualFold(strings.TrimSpace(m), "NO_BACKSLASH_ESCAPES") {
			return escapeQuotes, nil
		}
	}
	return escapeBackslash, nil
}

// backslashEscapes maps each byte that needs a backslash escape to the
// character after the backslash.
var backslashEscapes = [256]byte{0: '0', '\n': 'n', '\r': 'r', 0x1a: 'Z', '\'': '\'', '"': '"', '\\': '\\'}

// appendQuoted appends v inside single quotes, escaped for mode.
func appendQuoted[T string | []byte](buf []byte, v T, mode escapeMode) []byte {
	buf = append(buf, '\'')
	start := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if mode == escapeQuotes {
			if c != '\'' {
				continue
			}
			buf = append(append(buf, v[start:i]...), '\'', '\'')
		} else {
			esc := backslashEscapes[c]
			if esc == 0 {
				continue
			}
			buf = append(append(buf, v[start:i]...), '\\', esc)
		}
		start = i + 1
	}
	return append(append(buf, v[start:]...), '\'')
}

// appendLiteral appends the SQL literal of one argument; ok is false for
// a type it does not write (the caller leaves the query to the driver).
func appendLiteral(buf []byte, arg any, mode escapeMode) (_ []byte, ok bool) {
	switch v := arg.(type) {
	case nil:
		return append(buf, "NULL"...), true
	case []byte:
		if v == nil {
			return append(buf, "NULL"...), true
		}
		return appendQuoted(append(buf, "_binary"...), v, mode), true
	case string:
		return appendQuoted(buf, v, mode), true
	case int64:
		return strconv.AppendInt(buf, v, 10), true
	case uint64:
		return strconv.AppendUint(buf, v, 10), true
	case int:
		return strconv.AppendInt(buf, int64(v), 10), true
	case int32:
		return strconv.AppendInt(buf, int64(v), 10), true
	case uint32:
		return strconv.AppendUint(buf, uint64(v), 10), true
	case uint:
		return strconv.AppendUint(buf, uint64(v), 10), true
	case float64:
		return strconv.AppendFloat(buf, v, 'g', -1, 64), true
	case bool:
		if v {
			return append(buf, '1'), true
		}
		return append(buf, '0'), true
	}
	return buf, false
}

// appendStatement appends s's text with each placeholder replaced by its
// argument's literal. A `?` inside a quoted name or string is text; the
// unit's statements hold no comments, so one that seems to (# -- /*) is
// refused, like an unknown argument type or a count that does not match.
func appendStatement(buf []byte, s stmt, mode escapeMode) (_ []byte, ok bool) {
	q, arg := s.sql, 0
	hexCols := len(s.textCols) > 0 && s.rowArgs%len(s.textCols) == 0
	var quote byte // the open quote: ` ' " or 0
	last := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		if quote != 0 {
			switch {
			case c == '\\' && quote != '`' && mode == escapeBackslash:
				i++ // the escaped byte
			case c == quote:
				quote = 0 // a doubled quote closes and opens again
			}
			continue
		}
		switch c {
		case '`', '\'', '"':
			quote = c
		case '#':
			return buf, false
		case '-', '/':
			if i+1 < len(q) && (c == '-' && q[i+1] == '-' || c == '/' && q[i+1] == '*') {
				return buf, false
			}
		case '?':
			if arg == len(s.args) {
				return buf, false
			}
			buf = append(buf, q[last:i]...)
			if b, isBytes := s.args[arg].([]byte); isBytes && b != nil && len(b) <= hexLiteralMax && hexCols &&
				arg < s.rowArgs && s.textCols[arg%len(s.textCols)] {
				buf = appendHex(buf, b)
			} else if buf, ok = appendLiteral(buf, s.args[arg], mode); !ok {
				return buf, false
			}
			arg++
			last = i + 1
		}
	}
	if arg != len(s.args) || quote != 0 {
		return buf, false
	}
	return append(buf, q[last:]...), true
}

// hexLiteralMax is the longest value written as a hex literal. What a
// hex literal saves the target is per value (no charset introducer to look
// up, no item name converted from binary; 50 k sysbench rows of 119- and
// 59-byte strings cost a MariaDB 10.11 target ~30 % less server CPU than
// with _binary'...', median of 6 tries), while it doubles the bytes to
// send and lex; for long values that would cost more than it saves.
const hexLiteralMax = 256

const hexDigits = "0123456789abcdef"

// appendHex appends b as a hex literal, X'...'. In a column of a string
// type (tableInfo.textCols) it stores the same bytes as _binary'...':
// both are binary strings, converted to the column's charset alike.
func appendHex(buf, b []byte) []byte {
	buf = append(buf, 'X', '\'')
	for _, c := range b {
		buf = append(buf, hexDigits[c>>4], hexDigits[c&15])
	}
	return append(buf, '\'')
}

// literalSize estimates s's text with its values written in, assuming
// nothing needs an escape (a buffer grows when something does) and bytes
// of a statement with text columns are written in hex.
func literalSize(s stmt) int {
	n := len(s.sql)
	for _, a := range s.args {
		switch v := a.(type) {
		case []byte:
			if s.textCols != nil && len(v) <= hexLiteralMax {
				n += 2*len(v) + 3
			} else {
				n += len(v) + 9
			}
		case string:
			n += len(v) + 2
		default:
			n += 20
		}
	}
	return n
}
