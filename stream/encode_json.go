package stream

import (
	"encoding/binary"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// jsonObject appends a JSON object to buf member by member, in the order
// the members are written, so that encoded events are deterministic.
type jsonObject struct {
	buf []byte
	n   int
}

// startObject begins an object at the end of b.
func startObject(b []byte) jsonObject {
	return jsonObject{buf: append(b, '{')}
}

// key writes the separator and the member name; the caller appends the
// member's value to o.buf next.
func (o *jsonObject) key(name string) {
	if o.n > 0 {
		o.buf = append(o.buf, ',')
	}
	o.n++
	o.buf = appendJSONString(o.buf, name)
	o.buf = append(o.buf, ':')
}

// lit is key for a name written as a JSON string literal with its colon,
// `"name":`: constant member names cost no escaping.
func (o *jsonObject) lit(quoted string) {
	if o.n > 0 {
		o.buf = append(o.buf, ',')
	}
	o.n++
	o.buf = append(o.buf, quoted...)
}

func (o *jsonObject) str(name, v string) {
	o.key(name)
	o.buf = appendJSONString(o.buf, v)
}

func (o *jsonObject) int(name string, v int64) {
	o.key(name)
	o.buf = strconv.AppendInt(o.buf, v, 10)
}

func (o *jsonObject) uint(name string, v uint64) {
	o.key(name)
	o.buf = strconv.AppendUint(o.buf, v, 10)
}

func (o *jsonObject) bool(name string, v bool) {
	o.key(name)
	o.buf = strconv.AppendBool(o.buf, v)
}

// raw writes a member whose value is already JSON.
func (o *jsonObject) raw(name, json string) {
	o.key(name)
	o.buf = append(o.buf, json...)
}

// end closes the object and returns the buffer.
func (o *jsonObject) end() []byte {
	return append(o.buf, '}')
}

const hexDigits = "0123456789abcdef"

// jsonPlain marks the bytes a JSON string holds as they are: ASCII from
// 0x20 on but the double quote and the backslash.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// plain8 reports whether the eight bytes of s from i are all plain
// (jsonPlain): none below 0x20, none from 0x80, no '"' and no '\\'.
func plain8(s string, i int) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	w := binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))
	q, bs := w^(lo*'"'), w^(lo*'\\')
	// Bytes below 0x20, zero bytes of q or bs (a quote or a backslash in
	// w), and bytes from 0x80 each leave their high bit in special; with
	// no high bit in w the first three tests are exact.
	special := (w-lo*0x20)&^w | (q-lo)&^q | (bs-lo)&^bs | w
	return special&hi == 0
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does; <, > and & stay as they are.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		for i+8 <= len(s) && plain8(s, i) {
			i += 8 // eight plain bytes at a time
		}
		for i < len(s) && jsonPlain[s[i]] {
			i++ // the common case: a run of ASCII that needs no escape
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
