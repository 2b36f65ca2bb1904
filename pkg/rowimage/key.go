package rowimage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// AppendValues appends an encoding of row's values in cols to b: two rows'
// encodings are equal exactly when the values are (with fold, text values
// compare case-insensitively, ASCII and Unicode simple folding).
func AppendValues(b []byte, row []any, cols []int, fold bool) []byte {
	for _, i := range cols {
		switch v := row[i].(type) {
		case nil:
			b = append(b, 'n')
		case int64:
			b = strconv.AppendInt(append(b, 'i'), v, 10)
		case uint64:
			b = strconv.AppendUint(append(b, 'u'), v, 10)
		case []byte:
			if fold {
				v = bytes.ToLower(v)
			}
			b = binary.AppendUvarint(append(b, 'b'), uint64(len(v)))
			b = append(b, v...)
		case string:
			if fold {
				v = strings.ToLower(v)
			}
			b = binary.AppendUvarint(append(b, 's'), uint64(len(v)))
			b = append(b, v...)
		case float64:
			b = strconv.AppendFloat(append(b, 'f'), v, 'g', -1, 64)
		default:
			s := fmt.Sprint(v)
			b = binary.AppendUvarint(append(b, '?'), uint64(len(s)))
			b = append(b, s...)
		}
		b = append(b, 0)
	}
	return b
}

// AppendKey appends the exact encoding of a converted row image's Key
// values (the one the sync unit's compaction keys rows by) to b: two
// images' encodings are equal exactly when their keys are.
func (t *Table) AppendKey(b []byte, image []any) []byte { return AppendValues(b, image, t.Key, false) }
