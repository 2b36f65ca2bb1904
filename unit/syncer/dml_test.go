package syncer

import (
	"hash/maphash"
	"reflect"
	"testing"

	"github.com/dmworker/dm-worker/pkg/rowimage"
)

func TestStatements(t *testing.T) {
	keyed := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "t"}, Columns: []string{"id", "v"}, Binary: []bool{false, false}, Key: []int{0}, Uniques: [][]int{{0}}}}
	nokey := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "n"}, Columns: []string{"a"}, Binary: []bool{true}}}
	composite := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "c"}, Columns: []string{"a", "b", "x"}, Binary: []bool{false, false, false}, Key: []int{0, 1}, Uniques: [][]int{{0, 1}}}}
	row := func(v ...any) []any { return v }
	tests := []struct {
		name    string
		changes []*change
		want    []sqlArgs
	}{
		{"inserts merge", []*change{
			{kind: kindInsert, table: keyed, after: row(int64(1), []byte("a"))},
			{kind: kindInsert, table: keyed, after: row(int64(2), []byte("b"))},
		}, []sqlArgs{{"INSERT INTO `db`.`t` (`id`,`v`) VALUES (?,?),(?,?)", row(int64(1), []byte("a"), int64(2), []byte("b"))}}},
		{"safe insert replaces", []*change{{kind: kindInsert, table: keyed, after: row(int64(1), nil), safe: true}},
			[]sqlArgs{{"REPLACE INTO `db`.`t` (`id`,`v`) VALUES (?,?)", row(int64(1), nil)}}},
		{"update by key", []*change{{kind: kindUpdate, table: keyed, before: row(int64(1), []byte("a")), after: row(int64(2), []byte("b"))}},
			[]sqlArgs{{"UPDATE `db`.`t` SET `id`=?,`v`=? WHERE `id`=? LIMIT 1", row(int64(2), []byte("b"), int64(1))}}},
		{"safe update", []*change{{kind: kindUpdate, table: keyed, before: row(int64(1), []byte("a")), after: row(int64(2), []byte("b")), safe: true}},
			[]sqlArgs{{"DELETE FROM `db`.`t` WHERE `id`=? LIMIT 1", row(int64(1))},
				{"REPLACE INTO `db`.`t` (`id`,`v`) VALUES (?,?)", row(int64(2), []byte("b"))}}},
		{"delete without key", []*change{{kind: kindDelete, table: nokey, before: row([]byte{0})}},
			[]sqlArgs{{"DELETE FROM `db`.`n` WHERE `a`<=>? LIMIT 1", row([]byte{0})}}},
		{"deletes without key stay apart", []*change{
			{kind: kindDelete, table: nokey, before: row([]byte{0})},
			{kind: kindDelete, table: nokey, before: row([]byte{0})},
		}, []sqlArgs{{"DELETE FROM `db`.`n` WHERE `a`<=>? LIMIT 1", row([]byte{0})},
			{"DELETE FROM `db`.`n` WHERE `a`<=>? LIMIT 1", row([]byte{0})}}},
		{"deletes by key merge", []*change{
			{kind: kindDelete, table: keyed, before: row(int64(1), []byte("a"))},
			{kind: kindDelete, table: keyed, before: row(int64(2), []byte("b")), safe: true},
			{kind: kindDelete, table: keyed, before: row(int64(3), []byte("c"))},
		}, []sqlArgs{{"DELETE FROM `db`.`t` WHERE `id` IN (?,?,?)", row(int64(1), int64(2), int64(3))}}},
		{"deletes by composite key merge", []*change{
			{kind: kindDelete, table: composite, before: row(int64(1), []byte("a"), int64(9))},
			{kind: kindDelete, table: composite, before: row(int64(2), []byte("b"), int64(9))},
		}, []sqlArgs{{"DELETE FROM `db`.`c` WHERE (`a`=? AND `b`=?) OR (`a`=? AND `b`=?)", row(int64(1), "a", int64(2), "b")}}},
		{"an insert ends a run of deletes", []*change{
			{kind: kindDelete, table: keyed, before: row(int64(1), []byte("a"))},
			{kind: kindInsert, table: keyed, after: row(int64(1), []byte("b"))},
			{kind: kindDelete, table: keyed, before: row(int64(1), []byte("b"))},
			{kind: kindDelete, table: keyed, before: row(int64(2), []byte("c"))},
		}, []sqlArgs{{"DELETE FROM `db`.`t` WHERE `id`=? LIMIT 1", row(int64(1))},
			{"INSERT INTO `db`.`t` (`id`,`v`) VALUES (?,?)", row(int64(1), []byte("b"))},
			{"DELETE FROM `db`.`t` WHERE `id` IN (?,?)", row(int64(1), int64(2))}}},
		{"safe changes merge adjacent replaces only", []*change{
			{kind: kindUpdate, table: keyed, before: row(int64(1), []byte("a")), after: row(int64(1), []byte("b")), safe: true},
			{kind: kindInsert, table: keyed, after: row(int64(2), []byte("c")), safe: true},
			{kind: kindUpdate, table: keyed, before: row(int64(2), []byte("c")), after: row(int64(3), []byte("d")), safe: true},
			{kind: kindInsert, table: composite, after: row(int64(4), []byte("e"), nil), safe: true},
			{kind: kindInsert, table: keyed, after: row(int64(5), []byte("f")), safe: true},
			{kind: kindInsert, table: keyed, after: row(int64(6), []byte("g"))},
		}, []sqlArgs{{"DELETE FROM `db`.`t` WHERE `id`=? LIMIT 1", row(int64(1))},
			{"REPLACE INTO `db`.`t` (`id`,`v`) VALUES (?,?),(?,?)", row(int64(1), []byte("b"), int64(2), []byte("c"))},
			{"DELETE FROM `db`.`t` WHERE `id`=? LIMIT 1", row(int64(2))},
			{"REPLACE INTO `db`.`t` (`id`,`v`) VALUES (?,?)", row(int64(3), []byte("d"))},
			{"REPLACE INTO `db`.`c` (`a`,`b`,`x`) VALUES (?,?,?)", row(int64(4), []byte("e"), nil)},
			{"REPLACE INTO `db`.`t` (`id`,`v`) VALUES (?,?)", row(int64(5), []byte("f"))},
			{"INSERT INTO `db`.`t` (`id`,`v`) VALUES (?,?)", row(int64(6), []byte("g"))}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := textAndArgs(statements(tt.changes)); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("statements = %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestJoinStatements(t *testing.T) {
	small := stmt{sql: "DELETE FROM t WHERE id=?", args: []any{int64(1)}}
	big := stmt{sql: "INSERT INTO t VALUES (?)", args: []any{make([]byte, maxJoinedSQL/3)}}
	tests := []struct {
		name  string
		stmts []stmt
		want  []string // joined texts
		args  []int    // argument counts
	}{
		{"one query", []stmt{small, small}, []string{"BEGIN;DELETE FROM t WHERE id=?;DELETE FROM t WHERE id=?;COMMIT"}, []int{2}},
		{"split past the size bound", []stmt{small, big, big, small},
			[]string{"BEGIN;DELETE FROM t WHERE id=?;INSERT INTO t VALUES (?)", "INSERT INTO t VALUES (?);DELETE FROM t WHERE id=?;COMMIT"},
			[]int{2, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := joinStatements(tt.stmts, escapeUnknown)
			if len(got) != len(tt.want) {
				t.Fatalf("joinStatements gave %d queries, want %d", len(got), len(tt.want))
			}
			for i, q := range got {
				if q.sql != tt.want[i] || len(q.args) != tt.args[i] {
					t.Errorf("query %d = %q with %d args, want %q with %d", i, q.sql, len(q.args), tt.want[i], tt.args[i])
				}
			}
		})
	}
}

func TestCausalityKeys(t *testing.T) {
	seed := maphash.MakeSeed()
	keys := func(c *change) []uint64 {
		k, _ := causalityKeys(nil, c, seed, nil)
		return k
	}
	ti := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "t"}, Columns: []string{"id", "u"}, Key: []int{0}, Uniques: [][]int{{0}, {1}}}}
	other := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "t2"}, Columns: []string{"id", "u"}, Key: []int{0}, Uniques: [][]int{{0}, {1}}}}
	update := keys(&change{kind: kindUpdate, table: ti, before: []any{int64(1), []byte("A")}, after: []any{int64(2), nil}})
	if len(update) != 3 {
		t.Fatalf("an update from (1, A) to (2, NULL) has %d keys, want 3 (NULL is no key)", len(update))
	}
	same := func(a, b []uint64) bool { return reflect.DeepEqual(a, b) }
	if got := keys(&change{kind: kindInsert, table: ti, after: []any{int64(1), []byte("a")}}); !same(got, update[:2]) {
		t.Errorf("keys of (1, a) = %v, want the update's old keys %v (text folded)", got, update[:2])
	}
	if got := keys(&change{kind: kindDelete, table: ti, before: []any{int64(2), []byte("x")}}); got[0] != update[2] {
		t.Errorf("primary key 2 hashes to %d, want the update's new key %d", got[0], update[2])
	}
	if got := keys(&change{kind: kindInsert, table: other, after: []any{int64(1), []byte("a")}}); got[0] == update[0] || got[1] == update[1] {
		t.Error("the same key values in another table share a key")
	}
	if got := keys(&change{kind: kindInsert, table: ti, after: []any{int64(1), []byte("b")}}); got[1] == update[1] {
		t.Error("different unique key values share a key")
	}
	nokey := &tableInfo{Table: &rowimage.Table{Target: tableName{Schema: "db", Table: "n"}, Columns: []string{"a"}}}
	a := keys(&change{kind: kindInsert, table: nokey, after: []any{int64(1)}})
	b := keys(&change{kind: kindDelete, table: nokey, before: []any{int64(2)}})
	if len(a) != 1 || !same(a, b) {
		t.Fatalf("keys of a table without key: %v and %v, want one shared key", a, b)
	}
}

// sqlArgs is a statement's text and arguments, what the statement tests
// compare.
type sqlArgs struct {
	sql  string
	args []any
}

func textAndArgs(stmts []stmt) []sqlArgs {
	out := make([]sqlArgs, len(stmts))
	for i, s := range stmts {
		out[i] = sqlArgs{s.sql, s.args}
	}
	return out
}
