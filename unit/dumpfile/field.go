package dumpfile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Null is a NULL field.
const Null = `\N`

// AppendField appends v escaped for LOAD DATA's defaults (ESCAPED BY '\\'):
// backslash, tab, newline, carriage return and NUL become \\ \t \n \r \0.
// A nil v is not NULL: use Null for that.
func AppendField(dst, v []byte) []byte {
	for {
		i := bytes.IndexAny(v, "\\\t\n\r\x00")
		if i < 0 {
			return append(dst, v...)
		}
		dst = append(dst, v[:i]...)
		switch v[i] {
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case 0:
			dst = append(dst, '\\', '0')
		}
		v = v[i+1:]
	}
}

// Reader reads the rows of a chunk file back into fields (tests, and a
// loader that builds INSERT statements instead of LOAD DATA).
type Reader struct {
	r    *bufio.Reader
	line []byte
	row  []Field
	buf  []byte
}

// Field is one field of a row; Null is set for \N.
type Field struct {
	Value []byte
	Null  bool
}

// NewReader reads chunk rows from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the next row's fields, valid until the next call, or io.EOF
// after the last row.
func (r *Reader) Next() ([]Field, error) {
	line, err := r.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		r.line = append(r.line[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = r.r.ReadSlice('\n')
			r.line = append(r.line, line...)
		}
		line = r.line
	}
	if err == io.EOF && len(line) > 0 {
		return nil, fmt.Errorf("dumpfile: last row has no line end (file cut short)")
	}
	if err != nil {
		return nil, err
	}
	line = line[:len(line)-1]
	r.row, r.buf = r.row[:0], r.buf[:0]
	// Unescape into one buffer, then slice it per field.
	type span struct {
		from, to int
		null     bool
	}
	spans := make([]span, 0, 16)
	start := 0
	for i := 0; i <= len(line); i++ {
		if i < len(line) && line[i] != '\t' {
			continue
		}
		f := line[start:i]
		if string(f) == Null {
			spans = append(spans, span{null: true})
		} else {
			from := len(r.buf)
			for j := 0; j < len(f); j++ {
				c := f[j]
				if c == '\\' && j+1 < len(f) {
					j++
					switch f[j] {
					case 't':
						c = '\t'
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case '0':
						c = 0
					default:
						c = f[j]
					}
				}
				r.buf = append(r.buf, c)
			}
			spans = append(spans, span{from: from, to: len(r.buf)})
		}
		start = i + 1
	}
	for _, s := range spans {
		if s.null {
			r.row = append(r.row, Field{Null: true})
		} else {
			r.row = append(r.row, Field{Value: r.buf[s.from:s.to:s.to]})
		}
	}
	return r.row, nil
}
