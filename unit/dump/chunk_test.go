package dump

import (
	"bufio"
	"bytes"
	"database/sql"
	"math/rand/v2"
	"testing"

	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// TestRowWriterEscapes: the writer's output is dumpfile.AppendField of
// every field (NULL as \N), whatever the field's length and bytes, also
// across the pieces a long field is escaped in.
func TestRowWriterEscapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab\\\t\n\r\x00é")
	field := func(n int, specials bool) []byte {
		v := make([]byte, n)
		for i := range v {
			v[i] = 'a' + byte(rng.IntN(26))
			if specials && rng.IntN(8) == 0 {
				v[i] = alphabet[rng.IntN(len(alphabet))]
			}
		}
		return v
	}
	for _, n := range []int{0, 1, 15, 16, 17, 119, escapePiece - 1, escapePiece, escapePiece + 1, 3*escapePiece + 5} {
		for _, specials := range []bool{false, true} {
			vals := []sql.RawBytes{field(n, specials), nil, field(n, specials), []byte{}}
			var out bytes.Buffer
			w := &rowWriter{bw: bufio.NewWriterSize(&out, 64), vals: vals}
			if err := w.row(); err != nil {
				t.Fatal(err)
			}
			if err := w.bw.Flush(); err != nil {
				t.Fatal(err)
			}
			var want []byte
			want = dumpfile.AppendField(want, vals[0])
			want = append(want, '\t')
			want = append(want, dumpfile.Null...)
			want = append(want, '\t')
			want = dumpfile.AppendField(want, vals[2])
			want = append(want, '\t', '\n')
			if !bytes.Equal(out.Bytes(), want) || w.bytes != int64(len(want)) || w.rows != 1 {
				t.Fatalf("length %d specials %v: wrote %d bytes (counted %d), want %d", n, specials, out.Len(), w.bytes, len(want))
			}
			if got := plain(vals[0]); got != bytes.Equal(dumpfile.AppendField(nil, vals[0]), vals[0]) {
				t.Fatalf("plain(%q) = %v", vals[0], got)
			}
		}
	}
}
