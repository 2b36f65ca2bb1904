package validate

import (
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/dmworker/dm-worker/pkg/rowimage"
)

// TestCompareCanonValue covers what MariaDB cannot produce here: MySQL's
// JSON type (245), whose text forms differ by key order, spacing and
// number spelling; and canonical forms of the other types.
func TestCompareCanonValue(t *testing.T) {
	tb := &rowimage.Table{Columns: []string{"c"}, Unsigned: []bool{false}, Binary: []bool{false}}
	tenth, fifth := 0.1, 0.2 // variables: a constant 0.1 + 0.2 is exactly 0.3
	cases := []struct {
		typ    byte
		binary bool
		a, b   any
		equal  bool
	}{
		{mysql.MYSQL_TYPE_JSON, false, []byte(`{"b": 1.50, "a": [1e2, null]}`), []byte(`{"a":[100,null],"b":1.5}`), true},
		{mysql.MYSQL_TYPE_JSON, false, []byte(`{"a": 1}`), []byte(`{"a": "1"}`), false},
		{mysql.MYSQL_TYPE_JSON, false, []byte(`[1, 2]`), []byte(`[2, 1]`), false},
		{mysql.MYSQL_TYPE_NEWDECIMAL, false, "1.5", []byte("1.5000"), true},
		{mysql.MYSQL_TYPE_NEWDECIMAL, false, "-0", []byte("0.00"), true},
		{mysql.MYSQL_TYPE_NEWDECIMAL, false, "1.5", []byte("1.5001"), false},
		{mysql.MYSQL_TYPE_FLOAT, false, float64(float32(1.1)), []byte("1.100000023841858"), true},
		{mysql.MYSQL_TYPE_FLOAT, false, float64(float32(1.1)), []byte("1.1000001"), false},
		{mysql.MYSQL_TYPE_DOUBLE, false, tenth + fifth, []byte("0.30000000000000004"), true},
		{mysql.MYSQL_TYPE_DOUBLE, false, tenth + fifth, []byte("0.3"), false},
		{mysql.MYSQL_TYPE_SET, false, int64(-1), []byte("18446744073709551615"), true},
		{mysql.MYSQL_TYPE_DATETIME2, false, "2000-01-01 00:00:00", []byte("2000-01-01 00:00:00.000000"), true},
		{mysql.MYSQL_TYPE_TIME2, false, "10:00:00.5", []byte("10:00:00.500"), true},
		{mysql.MYSQL_TYPE_TIME2, false, "10:00:00.5", []byte("10:00:00.050"), false},
		{mysql.MYSQL_TYPE_STRING, false, []byte("ab"), []byte("ab  "), true},
		{mysql.MYSQL_TYPE_STRING, true, []byte("ab"), []byte("ab\x00\x00"), true},
		{mysql.MYSQL_TYPE_VARCHAR, false, []byte("ab"), []byte("ab "), false},
		{mysql.MYSQL_TYPE_VARCHAR, false, []byte("ab"), []byte("AB"), false},
		{mysql.MYSQL_TYPE_LONGLONG, false, uint64(18446744073709551615), []byte("18446744073709551615"), true},
		{mysql.MYSQL_TYPE_LONG, false, nil, []byte(""), false},
	}
	for _, c := range cases {
		tb.Types, tb.Binary[0] = []byte{c.typ}, c.binary
		a, aok := canonValue(tb, 0, c.a)
		b, bok := canonValue(tb, 0, c.b)
		if got := aok == bok && a == b; got != c.equal {
			t.Errorf("type %d: %v (%q) vs %q (%q): equal %v, want %v", c.typ, c.a, a, c.b, b, got, c.equal)
		}
	}
}
