package exprfilter

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// collation is how two strings of a column compare.
//
// Implemented (the differential test checks these against MariaDB):
//   - binary (BINARY, VARBINARY, BLOB, and byte-string literals): bytes,
//     trailing spaces significant (NO PAD);
//   - *_bin: bytes (code points in order for UTF-8), trailing spaces
//     ignored (PAD SPACE);
//   - every other collation (*_general_ci, *_unicode_ci, *_unicode_520_ci,
//     *_0900_ai_ci, *_uca1400_ai_ci, *_swedish_ci, ...): case- and
//     accent-insensitive, by an approximation: each character weighs as
//     its base letter (canonical decomposition, combining marks dropped)
//     in upper case; trailing spaces ignored unless the collation is a
//     _nopad_ one. Expansions and contractions of the UCA collations
//     ('ß' = 'ss' under unicode_ci, ligatures) are not modelled; such
//     characters compare by their single folded code point.
type collation struct {
	name   string
	binary bool // compare bytes
	pad    bool // PAD SPACE: trailing spaces do not count
}

var (
	binaryColl = &collation{name: "binary", binary: true}
	// defaultColl is the collation of string literals: the connection's,
	// utf8mb4_general_ci by default on MariaDB.
	defaultColl = &collation{name: "utf8mb4_general_ci", pad: true}
)

// collationOf returns the collation named by information_schema's
// COLLATION_NAME ("" for a column without one: binary).
func collationOf(name string) *collation {
	n := strings.ToLower(name)
	switch {
	case n == "" || n == "binary":
		return binaryColl
	case n == defaultColl.name:
		return defaultColl
	}
	return &collation{
		name:   n,
		binary: strings.HasSuffix(n, "_bin"),
		pad:    !strings.Contains(n, "_nopad_") && !strings.Contains(n, "0900"),
	}
}

// compare returns -1, 0 or 1.
func (c *collation) compare(a, b string) int {
	if c.pad {
		a, b = trimTrailingSpaces(a), trimTrailingSpaces(b)
	}
	if c.binary {
		return strings.Compare(a, b)
	}
	return foldCompare(a, b)
}

// charEq reports whether two characters are equal under c (LIKE compares
// characters, without padding).
func (c *collation) charEq(a, b rune) bool {
	if c.binary {
		return a == b
	}
	return weight(a) == weight(b)
}

func trimTrailingSpaces(s string) string {
	i := len(s)
	for i > 0 && s[i-1] == ' ' {
		i--
	}
	return s[:i]
}

// foldCompare compares case- and accent-insensitively without allocating.
func foldCompare(a, b string) int {
	for len(a) > 0 && len(b) > 0 {
		var ra, rb rune
		if a[0] < utf8.RuneSelf && b[0] < utf8.RuneSelf {
			ca, cb := a[0], b[0]
			if 'a' <= ca && ca <= 'z' {
				ca -= 'a' - 'A'
			}
			if 'a' <= cb && cb <= 'z' {
				cb -= 'a' - 'A'
			}
			if ca != cb {
				if ca < cb {
					return -1
				}
				return 1
			}
			a, b = a[1:], b[1:]
			continue
		}
		var na, nb int
		ra, na = utf8.DecodeRuneInString(a)
		rb, nb = utf8.DecodeRuneInString(b)
		wa, wb := weight(ra), weight(rb)
		if wa != wb {
			if wa < wb {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case len(a) > 0:
		return 1
	case len(b) > 0:
		return -1
	}
	return 0
}

// weight is a character's weight in the case- and accent-insensitive
// approximation: its base letter in upper case.
func weight(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			return r - ('a' - 'A')
		}
		return r
	}
	var buf [utf8.UTFMax]byte
	n := utf8.EncodeRune(buf[:], r)
	if p := norm.NFD.Properties(buf[:n]); p.Decomposition() != nil {
		if base, _ := utf8.DecodeRune(p.Decomposition()); base != utf8.RuneError {
			r = base
		}
	}
	return unicode.ToUpper(r)
}

// indexOf is the byte offset of sub in s under c (LOCATE, INSTR), -1
// when absent.
func (c *collation) indexOf(s, sub string) int {
	if c.binary {
		return strings.Index(s, sub)
	}
	if sub == "" {
		return 0
	}
	// MariaDB compares the needle with the substrings of the same byte
	// length at each character (my_instr_mb): 'ÀBC' is not found in 'abc'
	for i := 0; i+len(sub) <= len(s); {
		if foldCompare(s[i:i+len(sub)], sub) == 0 {
			return i
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		i += n
	}
	return -1
}
