package exprfilter

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
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
//     _nopad_ one; UCA collations (unicode, uca, 0900) also drop control
//     characters and order punctuation < digits < letters. Expansions and contractions of the UCA collations
//     ('ß' = 'ss' under unicode_ci, ligatures) are not modelled; such
//     characters compare by their single folded code point.
type collation struct {
	name   string
	binary bool // compare bytes
	pad    bool // PAD SPACE: trailing spaces do not count
	uca    bool // a UCA collation (unicode_ci, ...): control characters weigh nothing
	// latin1: a latin1 collation, whose text is held as UTF-8 here; a
	// _bin one orders by the latin1 byte (latin1Byte)
	latin1 bool
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
	bin := strings.HasSuffix(n, "_bin")
	return &collation{
		name:   n,
		binary: bin,
		pad:    !strings.Contains(n, "_nopad_") && !strings.Contains(n, "0900"),
		uca:    !bin && (strings.Contains(n, "unicode") || strings.Contains(n, "uca") || strings.Contains(n, "0900")),
		latin1: strings.HasPrefix(n, "latin1_"),
	}
}

// charset is the charset the collation belongs to, from its name.
func (c *collation) charset() string {
	if i := strings.IndexByte(c.name, '_'); i > 0 {
		return c.name[:i]
	}
	return c.name
}

// unicode: a collation of a Unicode charset (utf8mb4, utf8mb3, ...), to
// which MariaDB converts the text of another charset in a comparison.
func (c *collation) unicode() bool {
	return strings.HasPrefix(c.name, "utf8") || strings.HasPrefix(c.name, "ucs2") || strings.HasPrefix(c.name, "utf16") || strings.HasPrefix(c.name, "utf32")
}

// compare returns -1, 0 or 1.
func (c *collation) compare(a, b string) int {
	if !c.pad {
		if c.binary {
			return strings.Compare(a, b)
		}
		return foldCompare(a, b)
	}
	// PAD SPACE: the shorter string compares as if padded with spaces,
	// so 'a' = 'a  ' and '' > x'00' (in a UCA collation x'00' weighs
	// nothing: '' = x'00')
	if c.uca {
		a, b = stripIgnorable(a), stripIgnorable(b)
	}
	for len(a) > 0 && len(b) > 0 {
		wa, na := c.next(a)
		wb, nb := c.next(b)
		if wa != wb {
			if wa < wb {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	sign := 1
	rest := a
	if len(b) > 0 {
		sign, rest = -1, b
	}
	space, _ := c.next(" ")
	for len(rest) > 0 {
		w, n := c.next(rest)
		switch {
		case w < space:
			return -sign
		case w > space:
			return sign
		}
		rest = rest[n:]
	}
	return 0
}

// ignorable reports whether a UCA collation gives r no weight (the C0
// controls other than TAB, LF, VT, FF, CR; DEL and the C1 controls).
func ignorable(r rune) bool {
	return r <= 0x08 || (r >= 0x0E && r <= 0x1F) || (r >= 0x7F && r <= 0x9F)
}

// stripIgnorable drops the characters a UCA collation does not weigh.
func stripIgnorable(s string) string {
	clean := true
	for _, r := range s {
		if ignorable(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	return strings.Map(func(r rune) rune {
		if ignorable(r) {
			return -1
		}
		return r
	}, s)
}

// next is the weight of the first character of s and its length.
func (c *collation) next(s string) (rune, int) {
	if c.binary {
		if c == binaryColl || s[0] < utf8.RuneSelf {
			return rune(s[0]), 1
		}
		r, n := utf8.DecodeRuneInString(s)
		if c.latin1 {
			return latin1Byte(r), n
		}
		return r, n
	}
	r, n := rune(s[0]), 1
	if r >= utf8.RuneSelf {
		r, n = utf8.DecodeRuneInString(s)
	}
	w := weight(r)
	if c.uca {
		w = ucaRank(w)
	}
	return w, n
}

// latin1Byte is the byte of MariaDB's latin1 that holds r; '?' for a
// character latin1 lacks, as MariaDB's conversion gives.
func latin1Byte(r rune) rune {
	if b, ok := sqlschema.Latin1Byte(r); ok {
		return rune(b)
	}
	return '?'
}

// ucaRank orders weights as the Unicode collation algorithm's table does
// by class: spaces, punctuation and symbols before digits before letters
// (under unicode_ci '{' < '7' < 'a'); within a class by code point, an
// approximation of the table's order.
func ucaRank(w rune) rune {
	const shift = 21 // above every code point
	switch {
	case unicode.IsLetter(w):
		return 3<<shift | w
	case unicode.IsDigit(w):
		return 2<<shift | w
	}
	return 1<<shift | w
}

// charEq reports whether two characters are equal under c (LIKE compares
// characters, without padding).
func (c *collation) charEq(a, b rune) bool {
	if c.binary {
		return a == b
	}
	return weight(a) == weight(b)
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
	if c.latin1 {
		// a one-byte charset compares character by character
		// (my_instr_simple): 'ÀBC' is found in 'abc'
		k := utf8.RuneCountInString(sub)
		for i := 0; i < len(s); {
			j, n := i, 0
			for ; n < k && j < len(s); n++ {
				_, w := utf8.DecodeRuneInString(s[j:])
				j += w
			}
			if n < k {
				break
			}
			if foldCompare(s[i:j], sub) == 0 {
				return i
			}
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
		}
		return -1
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
