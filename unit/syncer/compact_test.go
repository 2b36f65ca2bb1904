package syncer

import (
	"reflect"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/dmworker/dm-worker/pkg/rowimage"
)

func TestCompactable(t *testing.T) {
	long, varchar := mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_VARCHAR
	info := func(key []int, types []byte, binary []bool) *tableInfo {
		return &tableInfo{Table: &rowimage.Table{Key: key, Types: types, Binary: binary}}
	}
	tests := []struct {
		name    string
		ti      *tableInfo
		uniques [][]int
		want    bool
	}{
		{"integer primary key only", info([]int{0}, []byte{long, varchar}, []bool{false, false}), [][]int{{0}}, true},
		{"composite key in index order", info([]int{0, 1}, []byte{long, long}, []bool{false, false}), [][]int{{0, 1}}, true},
		{"composite key in another order", info([]int{0, 1}, []byte{long, long}, []bool{false, false}), [][]int{{1, 0}}, false},
		{"binary string key", info([]int{0}, []byte{varchar}, []bool{true}), [][]int{{0}}, true},
		{"text key under a collation", info([]int{0}, []byte{varchar}, []bool{false}), [][]int{{0}}, false},
		{"float key", info([]int{0}, []byte{mysql.MYSQL_TYPE_DOUBLE}, []bool{false}), [][]int{{0}}, false},
		{"another unique key", info([]int{0}, []byte{long, long}, []bool{false, false}), [][]int{{0}, {1}}, false},
		{"target without the key", info([]int{0}, []byte{long}, []bool{false}), nil, false},
		{"target key on columns the binlog lacks", info([]int{0}, []byte{long}, []bool{false}), [][]int{nil}, false},
		{"no key", info(nil, []byte{long}, []bool{false}), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := compactable(tt.ti.Table, tt.uniques); got != tt.want {
				t.Fatalf("compactable = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCompactedStatements(t *testing.T) {
	pk := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "p"}, Columns: []string{"id", "v"}, Binary: []bool{false, false}, Key: []int{0}, Uniques: [][]int{{0}}}, compact: true}
	// A second source table routed into the same target, still compactable.
	pk2 := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "p"}, Columns: []string{"id", "v"}, Binary: []bool{false, false}, Key: []int{0}, Uniques: [][]int{{0}}}, compact: true}
	// A source table routed into the same target that is not.
	uk := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "p"}, Columns: []string{"id", "v"}, Binary: []bool{false, false}, Key: []int{0}, Uniques: [][]int{{0}, {1}}}}
	allKey := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "k"}, Columns: []string{"a", "b"}, Binary: []bool{false, false}, Key: []int{0, 1}, Uniques: [][]int{{0, 1}}}, compact: true}
	row := func(v ...any) []any { return v }
	upsert := "INSERT INTO `db`.`p` (`id`,`v`) VALUES "
	onDup := " ON DUPLICATE KEY UPDATE `v`=VALUES(`v`)"
	tests := []struct {
		name    string
		changes []*change
		want    []sqlArgs
	}{
		{"sysbench write-only transaction", []*change{
			{kind: kindUpdate, table: pk, before: row(int64(1), []byte("a")), after: row(int64(1), []byte("b"))},
			{kind: kindUpdate, table: pk, before: row(int64(1), []byte("b")), after: row(int64(1), []byte("c"))},
			{kind: kindDelete, table: pk, before: row(int64(1), []byte("c"))},
			{kind: kindInsert, table: pk, after: row(int64(1), []byte("d"))},
		}, []sqlArgs{{upsert + "(?,?)" + onDup, row(int64(1), []byte("d"))}}},
		{"fresh rows stay plain inserts with their last image", []*change{
			{kind: kindInsert, table: pk, after: row(int64(1), []byte("a"))},
			{kind: kindInsert, table: pk, after: row(int64(2), []byte("b"))},
			{kind: kindUpdate, table: pk, before: row(int64(1), []byte("a")), after: row(int64(1), []byte("z"))},
		}, []sqlArgs{{upsert + "(?,?),(?,?)", row(int64(1), []byte("z"), int64(2), []byte("b"))}}},
		{"safe inserts become upserts", []*change{
			{kind: kindInsert, table: pk, after: row(int64(1), []byte("a")), safe: true},
		}, []sqlArgs{{upsert + "(?,?)" + onDup, row(int64(1), []byte("a"))}}},
		{"inserted then deleted is deleted", []*change{
			{kind: kindInsert, table: pk, after: row(int64(1), []byte("a"))},
			{kind: kindDelete, table: pk, before: row(int64(1), []byte("a"))},
			{kind: kindDelete, table: pk, before: row(int64(2), []byte("b"))},
		}, []sqlArgs{{"DELETE FROM `db`.`p` WHERE `id` IN (?,?)", row(int64(1), int64(2))}}},
		{"a key change deletes the old key", []*change{
			{kind: kindUpdate, table: pk, before: row(int64(1), []byte("a")), after: row(int64(2), []byte("a"))},
			{kind: kindUpdate, table: pk, before: row(int64(2), []byte("a")), after: row(int64(3), []byte("a"))},
		}, []sqlArgs{{"DELETE FROM `db`.`p` WHERE `id` IN (?,?)", row(int64(1), int64(2))},
			{upsert + "(?,?)" + onDup, row(int64(3), []byte("a"))}}},
		{"a key deleted and inserted again is present", []*change{
			{kind: kindUpdate, table: pk, before: row(int64(1), []byte("a")), after: row(int64(2), []byte("a"))},
			{kind: kindInsert, table: pk, after: row(int64(1), []byte("n"))},
		}, []sqlArgs{{upsert + "(?,?),(?,?)" + onDup, row(int64(1), []byte("n"), int64(2), []byte("a"))}}},
		{"sources routed together compact together", []*change{
			{kind: kindInsert, table: pk, after: row(int64(1), []byte("a"))},
			{kind: kindDelete, table: pk2, before: row(int64(1), []byte("a"))},
			{kind: kindInsert, table: pk2, after: row(int64(1), []byte("b"))},
		}, []sqlArgs{{upsert + "(?,?)", row(int64(1), []byte("b"))}}},
		{"a target also written by a table that is not compactable keeps order", []*change{
			{kind: kindInsert, table: pk, after: row(int64(1), []byte("a"))},
			{kind: kindUpdate, table: uk, before: row(int64(1), []byte("a")), after: row(int64(1), []byte("b"))},
		}, []sqlArgs{{upsert + "(?,?)", row(int64(1), []byte("a"))},
			{"UPDATE `db`.`p` SET `id`=?,`v`=? WHERE `id`=? LIMIT 1", row(int64(1), []byte("b"), int64(1))}}},
		{"a batch of plain inserts is one INSERT in binlog order (bulk load)", []*change{
			{kind: kindInsert, table: pk, after: row(int64(3), []byte("a"))},
			{kind: kindInsert, table: pk, after: row(int64(1), nil)},
			{kind: kindInsert, table: pk2, after: row(int64(2), []byte("c"))},
		}, []sqlArgs{{upsert + "(?,?),(?,?)", row(int64(3), []byte("a"), int64(1), nil)},
			{upsert + "(?,?)", row(int64(2), []byte("c"))}}},
		{"plain inserts of one table beside compacted changes of another", []*change{
			{kind: kindInsert, table: pk, after: row(int64(1), []byte("a"))},
			{kind: kindUpdate, table: allKey, before: row(int64(1), int64(2)), after: row(int64(1), int64(3))},
			{kind: kindInsert, table: pk, after: row(int64(2), []byte("b"))},
		}, []sqlArgs{{"DELETE FROM `db`.`k` WHERE (`a`=? AND `b`=?)", row(int64(1), int64(2))},
			{"INSERT INTO `db`.`k` (`a`,`b`) VALUES (?,?) ON DUPLICATE KEY UPDATE `a`=`a`", row(int64(1), int64(3))},
			{upsert + "(?,?),(?,?)", row(int64(1), []byte("a"), int64(2), []byte("b"))}}},
		{"every column in the key", []*change{
			{kind: kindUpdate, table: allKey, before: row(int64(1), int64(2)), after: row(int64(1), int64(3))},
		}, []sqlArgs{{"DELETE FROM `db`.`k` WHERE (`a`=? AND `b`=?)", row(int64(1), int64(2))},
			{"INSERT INTO `db`.`k` (`a`,`b`) VALUES (?,?) ON DUPLICATE KEY UPDATE `a`=`a`", row(int64(1), int64(3))}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := textAndArgs(statements(tt.changes)); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("statements =\n%#v\nwant\n%#v", got, tt.want)
			}
		})
	}
}
