package stream

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// fbtSizes are the byte sizes of MariaDB's fixed-size binary types, which
// SELECT prints as text but the binlog carries in binary (without
// trailing 0x00 bytes).
var fbtSizes = map[string]int{"inet4": 4, "inet6": 16, "uuid": 16}

// encodeFBT writes INET4, INET6 and UUID as the text SELECT prints.
func encodeFBT(c *sqlschema.Column, v any, snapshot bool) (colValue, error) {
	s, ok := valueText(v)
	if !ok {
		return colValue{}, unexpectedType(v)
	}
	if snapshot {
		return colValue{kind: valueIsString, text: s}, nil
	}
	size := fbtSizes[c.DataType]
	if len(s) > size {
		return colValue{}, fmt.Errorf("%s value of %d bytes, at most %d expected", c.DataType, len(s), size)
	}
	b := make([]byte, size)
	copy(b, s)
	var text string
	switch c.DataType {
	case "inet4":
		text = dottedQuad(b)
	case "inet6":
		text = formatInet6(b)
	default:
		h := hex.EncodeToString(b)
		text = h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	}
	return colValue{kind: valueIsString, text: text}, nil
}

func dottedQuad(b []byte) string {
	return strconv.Itoa(int(b[0])) + "." + strconv.Itoa(int(b[1])) + "." + strconv.Itoa(int(b[2])) + "." + strconv.Itoa(int(b[3]))
}

// formatInet6 prints a 16-byte address as MariaDB's INET6 does: the
// longest run of zero groups (the first of equal ones, even a single
// group) as "::", and IPv4-compatible (::a.b.c.d) and IPv4-mapped
// (::ffff:a.b.c.d) addresses with a dotted tail.
func formatInet6(b []byte) string {
	var words [8]uint16
	for i := range words {
		words[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
	}
	gapPos, gapLen := -1, 0
	for i := 0; i < 8; {
		if words[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && words[j] == 0 {
			j++
		}
		if j-i > gapLen {
			gapPos, gapLen = i, j-i
		}
		i = j
	}
	var sb strings.Builder
	for i := 0; i < 8; i++ {
		if i == gapPos {
			sb.WriteString("::")
			i += gapLen - 1
			continue
		}
		if i > 0 && i != gapPos+gapLen {
			sb.WriteByte(':')
		}
		if i == 6 && gapPos == 0 && (gapLen == 6 || gapLen == 5 && words[5] == 0xffff) {
			sb.WriteString(dottedQuad(b[12:]))
			break
		}
		sb.WriteString(strconv.FormatUint(uint64(words[i]), 16))
	}
	return sb.String()
}
