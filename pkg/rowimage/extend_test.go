package rowimage

import (
	"slices"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// TestExtendColumns: a shard's Table appends the extend columns after the
// binlog's, every converted row gets their values, and the row key and the
// unique keys include them, whether the key comes from the table map or
// from the merged target table.
func TestExtendColumns(t *testing.T) {
	ext := []filter.ExtendColumn{{Name: "c_table", Value: "1"}, {Name: "c_schema", Value: "s1"}}
	target := &sqlschema.Table{Schema: "db", Name: "t",
		Columns: []sqlschema.Column{{Name: "id"}, {Name: "u"}, {Name: "c_table"}, {Name: "c_schema"}},
		Indexes: []sqlschema.Index{
			{Name: "PRIMARY", Primary: true, Unique: true, Columns: []string{"id", "c_table", "c_schema"}},
			{Name: "uu", Unique: true, Columns: []string{"u", "c_table", "c_schema"}},
		}}
	tmap := func(names bool, pk []uint64) *replication.TableMapEvent {
		tm := &replication.TableMapEvent{Schema: []byte("s1"), Table: []byte("t_1"), ColumnCount: 2,
			ColumnType: []byte{mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONG}, ColumnMeta: []uint16{0, 0}, PrimaryKey: pk}
		if names {
			tm.ColumnName = [][]byte{[]byte("id"), []byte("u")}
		}
		return tm
	}
	src, dst := filter.TableName{Schema: "s1", Table: "t_1"}, filter.TableName{Schema: "db", Table: "t"}
	for _, tc := range []struct {
		name string
		tm   *replication.TableMapEvent
	}{{"table map with names and primary key", tmap(true, []uint64{0})}, {"minimal table map: names and key from the target", tmap(false, nil)}} {
		t.Run(tc.name, func(t *testing.T) {
			tb, err := NewExtended(src, dst, tc.tm, target, ext)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tb.Columns, []string{"id", "u", "c_table", "c_schema"}) {
				t.Fatalf("columns %v", tb.Columns)
			}
			if !slices.Equal(tb.Key, []int{0, 2, 3}) || !slices.EqualFunc(tb.Uniques, [][]int{{0, 2, 3}, {1, 2, 3}}, slices.Equal) {
				t.Fatalf("key %v uniques %v", tb.Key, tb.Uniques)
			}
			row := []any{int32(7), nil}
			got, err := tb.ConvertRowInPlace(row)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 4 || got[0] != int64(7) || got[1] != nil || string(got[2].([]byte)) != "1" || string(got[3].([]byte)) != "s1" {
				t.Fatalf("row %v", got)
			}
			if _, err := tb.ConvertRow([]any{int32(1)}); err == nil || !strings.Contains(err.Error(), "1 of 2 columns") {
				t.Fatalf("short image: %v", err)
			}
			// Two shards' rows with the same id have different keys.
			other, err := NewExtended(filter.TableName{Schema: "s2", Table: "t_2"}, dst, tc.tm, target,
				[]filter.ExtendColumn{{Name: "c_table", Value: "2"}, {Name: "c_schema", Value: "s2"}})
			if err != nil {
				t.Fatal(err)
			}
			r2, _ := other.ConvertRow([]any{int32(7), nil})
			if string(tb.AppendKey(nil, got)) == string(other.AppendKey(nil, r2)) {
				t.Fatal("colliding ids of two shards have one key")
			}
		})
	}
	// A source column named like an extend column is refused.
	tm := tmap(true, []uint64{0})
	tm.ColumnName[1] = []byte("C_Schema")
	if _, err := NewExtended(src, dst, tm, target, ext); err == nil || !strings.Contains(err.Error(), "`c_schema`") {
		t.Fatalf("source column named like an extend column: %v", err)
	}
}
