package stream

import (
	"bytes"
	"strings"
	"testing"
)

// TestEncodeArenaEventsAlike encodes the same row changes with and without
// an arena, in both formats, with values long enough to outgrow the size
// estimate (text to escape) and to fill several chunks, and checks that
// every event's key and value are the same bytes and that no later event
// overwrote an earlier one's.
func TestEncodeArenaEventsAlike(t *testing.T) {
	s := encSchema(t)
	for _, format := range []string{FormatDebezium, FormatCanalJSON} {
		e := encEncoder(t, format)
		var a arena
		var got, want []Event
		for i := range 1500 {
			name := strings.Repeat("x", i%300)
			if i%7 == 0 {
				name = strings.Repeat("\"\\\n", 100+i%50) // escapes: each byte grows to two
			}
			before := []any{int32(i), name, int64(i), int64(1)}
			after := []any{int32(i + i%2), name + "!", int64(-i), int64(2)}
			// Rows events of a few rows each, in two files, with and
			// without GTIDs: the arena's source block follows them.
			pos := encPos
			pos.Row, pos.Pos, pos.TsMs = i%5, uint32(1000+i/5*300), encPos.TsMs+int64(i/10)
			if i%400 >= 200 {
				pos.File, pos.GTID, pos.ServerID = "mariadb-bin.000004", "", 2
			}
			ev, err := e.row(&a, s, "c", nil, after, pos)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := e.Row(s, "c", nil, after, pos)
			if err != nil {
				t.Fatal(err)
			}
			got, want = append(got, ev), append(want, ref)
			first, second, two, err := e.update(&a, s, before, after, pos)
			if err != nil {
				t.Fatal(err)
			}
			refs, err := e.Update(s, before, after, pos)
			if err != nil {
				t.Fatal(err)
			}
			got, want = append(got, first), append(want, refs...)
			if two {
				got = append(got, second)
			}
			if len(got) != len(want) {
				t.Fatalf("row %d: update gave %d events through the arena, %d without", i, len(got), len(want))
			}
		}
		for i := range got {
			if !bytes.Equal(got[i].Value, want[i].Value) || !bytes.Equal(got[i].Key, want[i].Key) || got[i].ID != want[i].ID {
				t.Fatalf("%s event %d through the arena:\n%s %s\nwithout:\n%s %s", format, i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
			}
			if cap(got[i].Value) != len(got[i].Value) {
				t.Fatalf("%s event %d: value capacity %d beyond its length %d (an append would overwrite the key)", format, i, cap(got[i].Value), len(got[i].Value))
			}
		}
		if len(got) < 2*arenaChunk/400 {
			t.Fatalf("%d events do not fill two chunks", len(got))
		}
	}
}
