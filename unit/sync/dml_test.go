package syncer

import (
	"reflect"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/shopspring/decimal"
)

func TestConvertValue(t *testing.T) {
	tests := []struct {
		name     string
		in       any
		typ      byte
		unsigned bool
		want     any
	}{
		{"nil", nil, mysql.MYSQL_TYPE_LONG, false, nil},
		{"tinyint unsigned", int8(-1), mysql.MYSQL_TYPE_TINY, true, uint64(255)},
		{"smallint unsigned", int16(-1), mysql.MYSQL_TYPE_SHORT, true, uint64(65535)},
		{"mediumint unsigned", int32(-1), mysql.MYSQL_TYPE_INT24, true, uint64(16777215)},
		{"int unsigned", int32(-1), mysql.MYSQL_TYPE_LONG, true, uint64(4294967295)},
		{"bigint unsigned", int64(-1), mysql.MYSQL_TYPE_LONGLONG, true, uint64(18446744073709551615)},
		{"signed stays", int32(-5), mysql.MYSQL_TYPE_LONG, false, int64(-5)},
		{"bit", int64(-1), mysql.MYSQL_TYPE_BIT, false, uint64(18446744073709551615)},
		{"decimal", decimal.RequireFromString("-12.3400"), mysql.MYSQL_TYPE_NEWDECIMAL, false, "-12.34"},
		{"string to bytes", "é", mysql.MYSQL_TYPE_VARCHAR, false, []byte("é")},
		{"float32 widened", float32(1.5), mysql.MYSQL_TYPE_FLOAT, false, float64(1.5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := convertValue(tt.in, tt.typ, tt.unsigned); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("convertValue(%#v) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestStatements(t *testing.T) {
	keyed := &tableInfo{target: tableName{"db", "t"}, columns: []string{"id", "v"}, binary: []bool{false, false},
		key: []int{0}, uniques: [][]int{{0}}}
	nokey := &tableInfo{target: tableName{"db", "n"}, columns: []string{"a"}, binary: []bool{true}}
	row := func(v ...any) []any { return v }
	tests := []struct {
		name    string
		changes []*change
		want    []stmt
	}{
		{"inserts merge", []*change{
			{kind: kindInsert, table: keyed, after: row(int64(1), []byte("a"))},
			{kind: kindInsert, table: keyed, after: row(int64(2), []byte("b"))},
		}, []stmt{{"INSERT INTO `db`.`t` (`id`,`v`) VALUES (?,?),(?,?)", row(int64(1), []byte("a"), int64(2), []byte("b"))}}},
		{"safe insert replaces", []*change{{kind: kindInsert, table: keyed, after: row(int64(1), nil), safe: true}},
			[]stmt{{"REPLACE INTO `db`.`t` (`id`,`v`) VALUES (?,?)", row(int64(1), nil)}}},
		{"update by key", []*change{{kind: kindUpdate, table: keyed, before: row(int64(1), []byte("a")), after: row(int64(2), []byte("b"))}},
			[]stmt{{"UPDATE `db`.`t` SET `id`=?,`v`=? WHERE `id`=? LIMIT 1", row(int64(2), []byte("b"), int64(1))}}},
		{"safe update", []*change{{kind: kindUpdate, table: keyed, before: row(int64(1), []byte("a")), after: row(int64(2), []byte("b")), safe: true}},
			[]stmt{{"DELETE FROM `db`.`t` WHERE `id`=? LIMIT 1", row(int64(1))},
				{"REPLACE INTO `db`.`t` (`id`,`v`) VALUES (?,?)", row(int64(2), []byte("b"))}}},
		{"delete without key", []*change{{kind: kindDelete, table: nokey, before: row([]byte{0})}},
			[]stmt{{"DELETE FROM `db`.`n` WHERE `a`<=>? LIMIT 1", row([]byte{0})}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := statements(tt.changes); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("statements = %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestCausalityKeys(t *testing.T) {
	ti := &tableInfo{target: tableName{"db", "t"}, columns: []string{"id", "u"}, key: []int{0}, uniques: [][]int{{0}, {1}}}
	c := &change{kind: kindUpdate, table: ti, before: []any{int64(1), []byte("A")}, after: []any{int64(2), nil}}
	got := causalityKeys(c)
	want := []string{"`db`.`t`\x000\x001", "`db`.`t`\x001\x00a", "`db`.`t`\x000\x002"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("causalityKeys = %q, want %q", got, want)
	}
	nokey := &tableInfo{target: tableName{"db", "n"}, columns: []string{"a"}}
	if got := causalityKeys(&change{kind: kindInsert, table: nokey, after: []any{int64(1)}}); len(got) != 1 || got[0] != "t\x00`db`.`n`" {
		t.Fatalf("keys of a table without key = %q", got)
	}
}

func TestGenerateServerID(t *testing.T) {
	a, b := generateServerID("task", "src"), generateServerID("task", "src2")
	if a == b || a < serverIDBase || b < serverIDBase || a >= 2*serverIDBase {
		t.Fatalf("server ids %d, %d", a, b)
	}
	if a != generateServerID("task", "src") {
		t.Fatal("server id is not stable")
	}
}
