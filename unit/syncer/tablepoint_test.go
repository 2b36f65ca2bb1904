package syncer

import (
	"testing"

	"github.com/dmworker/dm-worker/pkg/binlog"
)

// TestKeylessPoints: a batch records the last change of each key-less
// table it holds, and none of keyed tables.
func TestKeylessPoints(t *testing.T) {
	keyed := &tableInfo{target: tableName{Schema: "db", Table: "k"}, key: []int{0}}
	a := &tableInfo{target: tableName{Schema: "db", Table: "a"}}
	b := &tableInfo{target: tableName{Schema: "db", Table: "b"}}
	at := func(pos uint32, row int) rowPoint {
		return rowPoint{loc: binlog.Location{Name: "bin.000001", Pos: pos}, row: row}
	}
	ch := func(ti *tableInfo, p rowPoint) *change { return &change{table: ti, loc: p.loc, row: p.row} }
	batch := []*change{ch(a, at(100, 0)), ch(keyed, at(100, 1)), ch(a, at(100, 2)), ch(b, at(200, 0)), ch(a, at(300, 0)),
		ch(keyed, at(400, 0))}
	got := keylessPoints(nil, batch)
	want := []tablePoint{{table: a.target, at: at(300, 0)}, {table: b.target, at: at(200, 0)}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("keylessPoints = %+v, want %+v", got, want)
	}
	if got := keylessPoints(got, batch[1:2]); len(got) != 0 {
		t.Fatalf("keylessPoints of keyed changes only = %+v, want none", got)
	}
}

// TestReplayedSkipsUpToThePoint: a restarted run skips the changes of a
// key-less table up to its point, exactly, and no change of another table.
func TestReplayedSkipsUpToThePoint(t *testing.T) {
	a := &tableInfo{target: tableName{Schema: "db", Table: "a"}}
	other := &tableInfo{target: tableName{Schema: "db", Table: "other"}}
	keyed := &tableInfo{target: a.target, key: []int{0}}
	loc := func(pos uint32) binlog.Location { return binlog.Location{Name: "bin.000002", Pos: pos} }
	r := &reader{points: map[tableName]rowPoint{a.target: {loc: loc(500), row: 3}}}
	for _, c := range []struct {
		ti   *tableInfo
		pos  uint32
		row  int
		skip bool
	}{
		{a, 400, 70, true},
		{other, 450, 0, false},
		{keyed, 460, 0, false},
		{a, 500, 0, true},
		{a, 500, 3, true},
		{a, 500, 4, false}, // the first change after the point
		{a, 500, 2, false}, // the point is forgotten once passed
	} {
		if got := r.replayed(&change{table: c.ti, loc: loc(c.pos), row: c.row}); got != c.skip {
			t.Errorf("replayed(%s at %d row %d) = %v, want %v", c.ti.target, c.pos, c.row, got, c.skip)
		}
	}
	if len(r.points) != 0 {
		t.Errorf("points left after the replay passed them: %v", r.points)
	}
}
