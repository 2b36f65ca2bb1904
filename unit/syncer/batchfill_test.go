package syncer

import (
	"testing"

	"github.com/dmworker/dm-worker/pkg/rowimage"
)

func TestBatchFill(t *testing.T) {
	pk := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "p"}, Columns: []string{"id", "v"}, Key: []int{0}}, compact: true}
	other := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "q"}, Columns: []string{"id", "v"}, Key: []int{0}}, compact: true}
	plain := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "r"}, Columns: []string{"id", "v"}, Key: []int{0}}}
	row := func(v ...any) []any { return v }
	ins := func(ti *tableInfo, id int64) *change {
		return &change{kind: kindInsert, table: ti, after: row(id, "x")}
	}
	upd := func(ti *tableInfo, from, to int64) *change {
		return &change{kind: kindUpdate, table: ti, before: row(from, "x"), after: row(to, "y")}
	}
	del := func(ti *tableInfo, id int64) *change {
		return &change{kind: kindDelete, table: ti, before: row(id, "x")}
	}
	tests := []struct {
		name     string
		changes  []*change
		wantRows int
	}{
		{"sysbench write-only transaction: three keys", []*change{upd(pk, 1, 1), upd(pk, 2, 2), del(pk, 3), ins(pk, 3)}, 3},
		{"one hot key changed again and again", []*change{upd(pk, 1, 1), upd(pk, 1, 1), upd(pk, 1, 1)}, 1},
		{"a key change writes the old and the new key", []*change{upd(pk, 1, 2)}, 2},
		{"the same key in another table is another row", []*change{ins(pk, 1), ins(other, 1)}, 2},
		{"every change of a table without compaction counts", []*change{upd(plain, 1, 1), upd(plain, 1, 1)}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f batchFill
			for round := range 2 { // reset keeps nothing of the batch before
				var rows, n int
				for _, c := range tt.changes {
					rows, n, _ = f.add(c, false)
				}
				if rows != tt.wantRows || n != len(tt.changes) {
					t.Fatalf("round %d: add = %d rows, %d changes; want %d rows, %d changes", round, rows, n, tt.wantRows, len(tt.changes))
				}
				f.reset()
			}
		})
	}
}
