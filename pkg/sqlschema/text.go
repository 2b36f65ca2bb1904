package sqlschema

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text in a column's charset: the binlog carries a text column's value as
// the bytes of the column's charset, while the worker's consumers (stream
// events, expression filters) compare and write UTF-8.

// ReadsCharset reports whether ToUTF8 converts every value of charset:
// utf8*, ascii, binary (and "", no charset) pass as they are, latin1 is
// converted. Any other charset's text passes only when it happens to be
// valid UTF-8.
func ReadsCharset(charset string) bool {
	switch charset {
	case "", "utf8", "utf8mb3", "utf8mb4", "ascii", "binary", "latin1":
		return true
	}
	return false
}

// ToUTF8 converts s, text in MariaDB charset charset, to UTF-8. It
// allocates only for latin1 text with bytes above 0x7F.
func ToUTF8(charset, s string) (string, error) {
	switch charset {
	case "", "utf8", "utf8mb3", "utf8mb4", "ascii", "binary":
		return s, nil
	case "latin1":
		return latin1ToUTF8(s), nil
	}
	if utf8.ValidString(s) {
		return s, nil
	}
	return "", fmt.Errorf("text in charset %s, which cannot be converted to UTF-8 here; "+
		"convert the column to utf8mb4 or leave the table out", charset)
}

// latin1High maps 0x80–0x9F of MariaDB's latin1 (which is cp1252, with
// the five bytes cp1252 leaves undefined mapped to C1 controls).
var latin1High = [32]rune{
	0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
	0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D, 0x017D, 0x008F,
	0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
	0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178,
}

// Latin1Byte is the byte of MariaDB's latin1 that holds r; ok is false
// for a character latin1 lacks.
func Latin1Byte(r rune) (b byte, ok bool) {
	switch {
	case r < 0x80 || r >= 0xA0 && r <= 0xFF:
		return byte(r), true
	}
	for i, h := range latin1High {
		if h == r {
			return byte(0x80 + i), true
		}
	}
	return 0, false
}

func latin1ToUTF8(s string) string {
	ascii := 0
	for ascii < len(s) && s[ascii] < 0x80 {
		ascii++
	}
	if ascii == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + (len(s)-ascii)/2)
	b.WriteString(s[:ascii])
	for i := ascii; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x80:
			b.WriteByte(c)
		case c < 0xA0:
			b.WriteRune(latin1High[c-0x80])
		default:
			b.WriteRune(rune(c))
		}
	}
	return b.String()
}
