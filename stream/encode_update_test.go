package stream

import (
	"strings"
	"testing"
)

// TestEncodeUpdate: an update keeping the key is one "u" event; one that
// changes it is a "d" under the old key (identity suffixed ":d") and a "c"
// under the new one, in that order, in both formats.
func TestEncodeUpdate(t *testing.T) {
	for _, format := range []string{FormatDebezium, FormatCanalJSON} {
		e := encEncoder(t, format)
		s := encSchema(t)
		before := []any{int32(7), "pen", int64(5), int64(2)}
		same := []any{int32(7), "pen", int64(6), int64(2)}
		evs, err := e.Update(s, before, same, encPos)
		if err != nil || len(evs) != 1 || evs[0].Op != "u" || string(evs[0].Key) != `{"id":7}` || evs[0].ID != EventID("mysql-01", encPos) {
			t.Fatalf("%s: same key: %+v, %v; want one u event under {\"id\":7}", format, evs, err)
		}
		moved := []any{int32(9), "pen", int64(5), int64(2)}
		evs, err = e.Update(s, before, moved, encPos)
		if err != nil || len(evs) != 2 {
			t.Fatalf("%s: key change: %+v, %v; want two events", format, evs, err)
		}
		d, c := evs[0], evs[1]
		if d.Op != "d" || string(d.Key) != `{"id":7}` || d.ID != EventID("mysql-01", encPos)+":d" {
			t.Errorf("%s: first event %s %s %s; want d under {\"id\":7} with the :d identity", format, d.Op, d.Key, d.ID)
		}
		if c.Op != "c" || string(c.Key) != `{"id":9}` || c.ID != EventID("mysql-01", encPos) {
			t.Errorf("%s: second event %s %s %s; want c under {\"id\":9}", format, c.Op, c.Key, c.ID)
		}
		if format == FormatDebezium && (!strings.Contains(string(d.Value), `"after":null`) || !strings.Contains(string(c.Value), `"before":null`)) {
			t.Errorf("debezium images: d %s, c %s", d.Value, c.Value)
		}
		if _, err := e.Update(s, nil, moved, encPos); err == nil {
			t.Errorf("%s: update without its before image was accepted", format)
		}
	}
}
