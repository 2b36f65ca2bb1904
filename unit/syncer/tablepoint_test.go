package syncer

import (
	"reflect"
	"testing"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/rowimage"
)

// TestTablePointStmt: a batch records the last change of each ordered
// source table it holds (no key, or a foreign key group), keyed by the
// source table, and nothing for keyed tables outside a group.
func TestTablePointStmt(t *testing.T) {
	keyed := &tableInfo{Table: &rowimage.Table{Source: tableName{Schema: "db", Table: "k"}, Key: []int{0}}}
	a := &tableInfo{Table: &rowimage.Table{Source: tableName{Schema: "db", Table: "a"}}}
	grouped := &tableInfo{Table: &rowimage.Table{Source: tableName{Schema: "db", Table: "child"}, Key: []int{0}}, fkGroup: "db.parent"}
	at := func(pos uint32, row int) rowPoint {
		return rowPoint{loc: binlog.Location{Name: "bin.000001", Pos: pos}, row: row}
	}
	ch := func(ti *tableInfo, p rowPoint) *change { return &change{table: ti, loc: p.loc, row: p.row} }
	s := &checkpointStore{schema: "dm_meta", task: "t1", source: "s1"}
	batch := []*change{ch(a, at(100, 0)), ch(keyed, at(100, 1)), ch(grouped, at(100, 2)), ch(a, at(100, 3)),
		ch(grouped, at(200, 0)), ch(a, at(300, 0)), ch(keyed, at(400, 0))}
	st, ok := s.tablePointStmt(batch)
	if !ok {
		t.Fatal("no table point statement for a batch with ordered tables")
	}
	want := []any{"t1", "s1", "db", "a", "bin.000001", uint32(300), 0, "t1", "s1", "db", "child", "bin.000001", uint32(200), 0}
	if !reflect.DeepEqual(st.args, want) {
		t.Fatalf("table point args %v, want %v", st.args, want)
	}
	if _, ok := s.tablePointStmt([]*change{ch(keyed, at(100, 0))}); ok {
		t.Fatal("a table point statement for keyed changes only")
	}
}

// TestRowPointAfter: a change is replayed (skipped) when it is at or
// before its table's point, by location, then by row within one event.
func TestRowPointAfter(t *testing.T) {
	p := rowPoint{loc: binlog.Location{Name: "mariadb-bin.000002", Pos: 500}, row: 3}
	for _, tc := range []struct {
		file  string
		pos   uint32
		row   int
		after bool
	}{
		{"mariadb-bin.000001", 900, 9, false}, {"mariadb-bin.000002", 400, 9, false},
		{"mariadb-bin.000002", 500, 3, false}, {"mariadb-bin.000002", 500, 4, true},
		{"mariadb-bin.000002", 600, 0, true}, {"mariadb-bin.000003", 4, 0, true},
	} {
		q := rowPoint{loc: binlog.Location{Name: tc.file, Pos: tc.pos}, row: tc.row}
		if got := q.after(p); got != tc.after {
			t.Errorf("%s:%d row %d after %v = %v, want %v", tc.file, tc.pos, tc.row, p, got, tc.after)
		}
	}
}
