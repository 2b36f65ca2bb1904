package exprfilter

import (
	"testing"

	"github.com/shopspring/decimal"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// oneColumnTable is a table of one column for semantics tests.
func oneColumnTable(t *testing.T, dataType, colType, charset, coll string) *sqlschema.Table {
	t.Helper()
	col, err := sqlschema.NewColumn("c", dataType, colType, charset, true)
	if err != nil {
		t.Fatal(err)
	}
	col.Ordinal, col.Collation = 1, coll
	return &sqlschema.Table{Schema: "db", Name: "one", Columns: []sqlschema.Column{col}}
}

func evalOne(t *testing.T, tb *sqlschema.Table, expr string, v any) bool {
	t.Helper()
	e, err := Compile(expr, tb)
	if err != nil {
		t.Fatalf("Compile(%q): %v", expr, err)
	}
	got, err := e.Eval([]any{v})
	if err != nil {
		t.Fatalf("Eval(%q, %#v): %v", expr, v, err)
	}
	return got
}

func TestCollations(t *testing.T) {
	for _, c := range []struct {
		coll, expr string
		v          any
		want       bool
	}{
		{"utf8mb4_general_ci", "c = 'ABC'", "abc", true},
		{"utf8mb4_general_ci", "c = 'àbç'", "ABC", true},
		{"utf8mb4_general_ci", "c = 'abc   '", "abc", true}, // PAD SPACE
		{"utf8mb4_general_ci", "c > x'00'", "", true},       // '' is padded with spaces
		{"utf8mb4_unicode_ci", "c = x'00'", "", true},       // UCA: control characters weigh nothing
		{"utf8mb4_unicode_ci", "c = 'A\tB'", "ab", false},   // TAB is no control to ignore
		{"utf8mb4_bin", "c = 'ABC'", "abc", false},
		{"utf8mb4_bin", "c = 'abc '", "abc", true},
		{"utf8mb4_bin", "c < 'b'", "a", true},
		{"utf8mb4_nopad_bin", "c = 'abc '", "abc", false},
		{"utf8mb4_general_nopad_ci", "c = 'ABC '", "abc", false},
		{"utf8mb4_general_ci", "c LIKE 'ABC '", "abc", false},       // LIKE does not pad
		{"utf8mb4_general_ci", "LOCATE('ÀBC', c) = 0", "abc", true}, // windows of the needle's byte length
		{"utf8mb4_general_ci", "LOCATE('BC', c) = 2", "abc", true},
		{"utf8mb4_general_ci", "REPLACE(c, 'A', 'x') = 'abc'", "abc", true}, // case-sensitive
		{"utf8mb4_general_ci", "c REGEXP '^A'", "abc", true},
		{"utf8mb4_bin", "c REGEXP '^A'", "abc", false},
	} {
		tb := oneColumnTable(t, "varchar", "varchar(20)", "utf8mb4", c.coll)
		if got := evalOne(t, tb, c.expr, c.v); got != c.want {
			t.Errorf("%s: %s on %q = %v, want %v", c.coll, c.expr, c.v, got, c.want)
		}
	}
	bin := oneColumnTable(t, "varbinary", "varbinary(20)", "", "")
	for expr, want := range map[string]bool{"c = 'abc '": false, "c = 'ABC'": false, "c = 'abc'": true, "c REGEXP '^.{3}$'": true, "c LIKE 'a_c'": true} {
		if got := evalOne(t, bin, expr, []byte("abc")); got != want {
			t.Errorf("varbinary: %s = %v, want %v", expr, got, want)
		}
	}
	if got := evalOne(t, bin, "c REGEXP '^.{3}$'", []byte("ÀBC")); got {
		t.Error("a byte string REGEXP matched characters, not bytes")
	}
}

func TestDecimalSemantics(t *testing.T) {
	tb := oneColumnTable(t, "int", "int(11)", "", "")
	for expr, want := range map[string]bool{
		"c / 3 = 0.3333":                  true,  // compared at the static scale
		"c / 3 = 0.333333333":             false, // ... of 4 digits
		"c / 3 * 3 = 1":                   true,  // the quotient carries 9 digits
		"c / 3 / 3 > 0.1111":              true,
		"(c / 3 - 0.3333) IS TRUE":        true,
		"c / 3 BETWEEN 0.3333 AND 0.3333": false, // BETWEEN compares exactly
		"c / 3 IN (0.3333, 5)":            false, // so does a list of two
		"c / 3 IN (0.3333)":               true,  // x IN (y) is x = y
		"2 * c / 3 = 0.6667":              true,  // half away from zero
		"c DIV 0 IS NULL":                 true,
		"-7 % c = 0":                      true,
		"c = '1.00000000000000000001'":    false, // a string constant compares as DECIMAL
	} {
		if got := evalOne(t, tb, expr, int32(1)); got != want {
			t.Errorf("%s = %v, want %v", expr, got, want)
		}
	}
	d := oneColumnTable(t, "decimal", "decimal(18,0)", "", "")
	for expr, want := range map[string]bool{
		"(c % 0.0001) < 0":     true, // MariaDB's "-0" of a DECIMAL remainder
		"(c % 0.0001) + 0 < 0": false,
		"(c % 0.0001) IS TRUE": false,
		"c = -7":               true,
		"c > -7.5":             true,
	} {
		if got := evalOne(t, d, expr, decimal.New(-7, 0)); got != want {
			t.Errorf("%s on -7 = %v, want %v", expr, got, want)
		}
	}
}

func TestYearSemantics(t *testing.T) {
	tb := oneColumnTable(t, "year", "year(4)", "", "")
	for expr, want := range map[string]bool{
		"c = 20": true, "c = '20'": true, "c = 2020.4": true, "c = 2020": true, "c < 100": false,
		"c > '2019-06-01'": true, "c = '20abc'": true, "'23:59:59' < c": false, "c = 'abc'": false,
	} {
		if got := evalOne(t, tb, expr, 2020); got != want {
			t.Errorf("%s on YEAR 2020 = %v, want %v", expr, got, want)
		}
	}
	e, err := Compile("c - 2021 < 0", tb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Eval([]any{2020}); err == nil {
		t.Error("YEAR - 2021 is no BIGINT UNSIGNED out-of-range error")
	}
}

func TestTemporalSemantics(t *testing.T) {
	dt := oneColumnTable(t, "datetime", "datetime(3)", "", "")
	for expr, want := range map[string]bool{
		"c = '2021-01-01 12:34:56.789'": true, "c = '2021/01/01 12.34.56.789'": true,
		"c > 20210101": true, "c < 20210102": true, "c > 0": true, "c > 'garbage'": true,
		"DATE(c) = '2021-01-01'": true, "YEAR(c) = 2021 AND HOUR(c) = 12 AND MINUTE(c) = 34": true,
		"DATEDIFF('2021-01-03', c) = 2": true, "TIMESTAMPDIFF(MONTH, c, '2021-02-01 12:34:56.788') = 0": true,
		"TIMESTAMPDIFF(MONTH, c, '2021-02-01 12:34:56.789') = 1": true, "UNIX_TIMESTAMP(c) = 1609504496.789": true,
		"c = '2021-01-01 20:34:56.789+08:00'": true, "c = '2021-01-01 04:34:56.789-08:00'": true, "c = '2021-01-01 12:34:56.789+08:00'": false,
		"c = '2021-01-01 14:34:56.789+02:00'": true,
	} {
		if got := evalOne(t, dt, expr, "2021-01-01 12:34:56.789"); got != want {
			t.Errorf("%s = %v, want %v", expr, got, want)
		}
	}
	tm := oneColumnTable(t, "time", "time(5)", "", "")
	for expr, want := range map[string]bool{
		"c = '-838:58:50.12345'": true, "HOUR(c) = 838": true, "c < '00:00:00'": true, "c = '-838:58:50.1234'": false,
	} {
		if got := evalOne(t, tm, expr, "-838:58:50.12345"); got != want {
			t.Errorf("%s = %v, want %v", expr, got, want)
		}
	}
	if _, err := Compile("c = 10", tm); err == nil {
		t.Error("a TIME compared with a number compiles")
	}
	for s, want := range map[string]int64{"2020-01-02": 20*60 + 20, "12abc": 12, "10:20": 10*3600 + 20*60} {
		us, ok := strToTimeOfDay(s)
		if !ok || us != want*1e6 {
			t.Errorf("strToTimeOfDay(%q) = %d, %v; want %d s", s, us, ok, want)
		}
	}
	if _, ok := strToTimeOfDay("1e2"); ok {
		t.Error("'1e2' reads as a TIME")
	}
}

func TestJSONSemantics(t *testing.T) {
	tb := oneColumnTable(t, "longtext", "longtext", "utf8mb4", "utf8mb4_bin")
	doc := []byte(`{"a": {"b": [10, "x\"y", true, null]}, "k y": 2}`)
	for expr, want := range map[string]bool{
		"c->'$.a.b[0]' = 10": true, "c->'$.a.b[1]' = 'x\"y'": true, "c->>'$.a.b[1]' = 'x\"y'": true,
		"c->'$.a.b[2]' = 1": true, "c->'$.a.b[3]' = 0": true, "c->'$.a.b[3]' IS NULL": false,
		"c->'$.\"k y\"' = 2": true, "c->'$.a.b[9]' IS NULL": true, "JSON_EXTRACT(c, '$.a.b[0]', '$.\"k y\"') = '[10, 2]'": true,
		"c->'$.a.b[0][0]' = 10": true, "JSON_EXTRACT('not json', '$') IS NULL": true,
	} {
		if got := evalOne(t, tb, expr, doc); got != want {
			t.Errorf("%s = %v, want %v", expr, got, want)
		}
	}
	for _, bad := range []string{"c->'$.*' = 1", "c->'$[*]' = 1", "c->'a' = 1", "JSON_EXTRACT(c, c) = 1"} {
		if _, err := Compile(bad, tb); err == nil {
			t.Errorf("Compile(%q) accepted a path it does not support", bad)
		}
	}
}

func TestBitAndEnum(t *testing.T) {
	bit := oneColumnTable(t, "bit", "bit(8)", "", "")
	for expr, want := range map[string]bool{"c = b'1111'": true, "c = 15": true, "c = 0x0f": true, "c = x'0f'": false, "c LIKE '%1%'": false, "LENGTH(c) = 1": true} {
		if got := evalOne(t, bit, expr, int64(15)); got != want {
			t.Errorf("BIT: %s = %v, want %v", expr, got, want)
		}
	}
	set := oneColumnTable(t, "set", "set('a','b','c')", "utf8mb4", "utf8mb4_general_ci")
	for expr, want := range map[string]bool{"c = 'b,c'": true, "c = 6": true, "c + 0 = 6": true, "NULLIF(c, 'x') = 'b,c'": true, "NULLIF(c, 'x') = 6": false, "c LIKE 'B%'": true} {
		if got := evalOne(t, set, expr, int64(6)); got != want {
			t.Errorf("SET: %s = %v, want %v", expr, got, want)
		}
	}
}
