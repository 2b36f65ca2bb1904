package rowimage

import (
	"slices"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// TestKeys: the row key is the table map's primary key, else the target's
// first unique key over NOT NULL columns in the model's (the server's) key
// order whose columns the binlog has; Uniques put it first.
func TestKeys(t *testing.T) {
	cols := []sqlschema.Column{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	uk := func(name string, nullable bool, cols ...string) sqlschema.Index {
		return sqlschema.Index{Name: name, Columns: cols, Unique: true, Nullable: nullable, Primary: name == "PRIMARY"}
	}
	tests := []struct {
		name    string
		pk      []uint64 // the table map's
		indexes []sqlschema.Index
		binlog  []string // column names in the binlog
		key     []int
		uniques [][]int
	}{
		{"binlog primary key", []uint64{2}, []sqlschema.Index{uk("z", false, "a")}, nil, []int{2}, [][]int{{2}, {0}}},
		{"target primary key", nil, []sqlschema.Index{uk("PRIMARY", false, "b"), uk("a", false, "a")}, nil, []int{1}, [][]int{{1}, {0}}},
		{"first in key order, not by name", nil, []sqlschema.Index{uk("z_a", false, "a"), uk("a_b", false, "b")}, nil,
			[]int{0}, [][]int{{0}, {1}}},
		{"nullable unique key skipped", nil, []sqlschema.Index{uk("n", true, "a"), uk("m", false, "c")}, nil,
			[]int{2}, [][]int{{2}, {0}}},
		{"key naming a column the binlog lacks skipped", nil, []sqlschema.Index{uk("x", false, "x"), uk("b", false, "b")},
			[]string{"a", "b", "c"}, []int{1}, [][]int{{1}}},
		{"no key", nil, []sqlschema.Index{uk("n", true, "a")}, nil, nil, [][]int{{0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := &sqlschema.Table{Schema: "db", Name: "t", Columns: cols, Indexes: tt.indexes}
			names := tt.binlog
			if names == nil {
				names = []string{"a", "b", "c"}
			}
			tm := &replication.TableMapEvent{Schema: []byte("db"), Table: []byte("t"), ColumnCount: 3,
				ColumnType: []byte{mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONG},
				ColumnMeta: []uint16{0, 0, 0}, PrimaryKey: tt.pk}
			for _, n := range names {
				tm.ColumnName = append(tm.ColumnName, []byte(n))
			}
			name := filter.TableName{Schema: "db", Table: "t"}
			tb, err := New(name, name, tm, model)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tb.Key, tt.key) || !slices.EqualFunc(tb.Uniques, tt.uniques, slices.Equal) {
				t.Fatalf("key %v uniques %v, want %v %v", tb.Key, tb.Uniques, tt.key, tt.uniques)
			}
		})
	}
}
