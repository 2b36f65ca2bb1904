package exprfilter

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// testTable has one column of each kind the decoder delivers.
func testTable(t testing.TB) *sqlschema.Table {
	t.Helper()
	cols := []struct{ name, dataType, colType, charset, coll string }{
		{"id", "int", "int(11)", "", ""},
		{"u", "int", "int(10) unsigned", "", ""},
		{"big", "bigint", "bigint(20)", "", ""},
		{"ubig", "bigint", "bigint(20) unsigned", "", ""},
		{"d", "decimal", "decimal(10,2)", "", ""},
		{"f", "double", "double", "", ""},
		{"s", "varchar", "varchar(20)", "utf8mb4", "utf8mb4_general_ci"},
		{"sb", "varchar", "varchar(20)", "utf8mb4", "utf8mb4_bin"},
		{"bl", "blob", "blob", "", ""},
		{"dt", "datetime", "datetime", "", ""},
		{"dd", "date", "date", "", ""},
		{"tm", "time", "time", "", ""},
		{"e", "enum", "enum('x','y','z')", "utf8mb4", "utf8mb4_general_ci"},
		{"st", "set", "set('a','b','c')", "utf8mb4", "utf8mb4_general_ci"},
		{"j", "longtext", "longtext", "utf8mb4", "utf8mb4_bin"},
		{"ti", "tinyint", "tinyint(3) unsigned", "", ""},
		{"ts", "timestamp", "timestamp(3)", "", ""},
	}
	tb := &sqlschema.Table{Schema: "db", Name: "t"}
	for i, c := range cols {
		col, err := sqlschema.NewColumn(c.name, c.dataType, c.colType, c.charset, true)
		if err != nil {
			t.Fatal(err)
		}
		col.Ordinal = i + 1
		col.Collation = c.coll
		tb.Columns = append(tb.Columns, col)
	}
	return tb
}

// testRow is a row image as the binlog decoder delivers it.
func testRow() []any {
	return []any{
		int32(7), int32(-1), int64(-5), int64(-1), decimal.RequireFromString("12.50"), float64(2.5),
		"Hello", "Hello", []byte("ab\x00"), "2020-01-02 03:04:05", "2020-01-02", "10:20:30",
		int64(2), int64(5), []byte(`{"a": {"b": [1, "two", null]}, "n": 3, "s": "x"}`), int8(-2), "2020-01-02 03:04:05.250",
	}
}

func TestEval(t *testing.T) {
	tb := testTable(t)
	row := testRow()
	cases := []struct {
		expr string
		want bool
	}{
		// comparison and coercion
		{"id = 7", true}, {"id <> 7", false}, {"id != 8", true}, {"id < 8 AND id <= 7 AND id > 6 AND id >= 7", true},
		{"u = 4294967295", true}, {"ubig = 18446744073709551615", true}, {"ubig > 0", true}, {"big < 0", true},
		{"ti = 254", true}, {"d = 12.5", true}, {"d = '12.5'", true}, {"d > 12.49", true}, {"f = 2.5", true},
		{"id = '7abc'", true}, {"id = '7.0'", true}, {"s = 'hello'", true}, {"s = 'HELLO   '", true},
		{"sb = 'hello'", false}, {"sb = 'Hello'", true}, {"sb = 'Hello '", true}, {"bl = 'ab'", false}, {"bl = x'616200'", true},
		{"s = 'héllo'", true}, {"s < 'i'", true},
		{"dt = '2020-01-02 03:04:05'", true}, {"dt > '2020-01-01'", true}, {"dt = 20200102030405", true},
		{"dd = '2020-01-02 00:00:00'", true}, {"dd = 20200102", true}, {"tm = '10:20:30'", true}, {"tm > '9:00:00'", true},
		{"e = 'y'", true}, {"e = 2", true}, {"e = 'Y'", true}, {"st = 'a,c'", true}, {"st = 5", true},
		{"id <=> 7", true}, {"NULL <=> NULL", true}, {"id <=> NULL", false},
		// NULL and logic
		{"NULL = NULL", false}, {"NOT (NULL = 1)", false}, {"NULL OR 1", true}, {"NULL AND 0", false},
		{"(NULL AND 1) IS NULL", true}, {"1 XOR 0", true}, {"1 XOR NULL", false}, {"NOT id = 8", true}, {"!(id = 8)", true},
		{"id IS NOT NULL", true}, {"NULL IS NULL", true}, {"(id = 8) IS FALSE", true}, {"NULL IS NOT TRUE", true}, {"NULL IS FALSE", false},
		// IN, BETWEEN
		{"id IN (1, 7)", true}, {"id IN (1, 2)", false}, {"id NOT IN (1, NULL)", false}, {"(id IN (1, NULL)) IS NULL", true},
		{"id IN (7, NULL)", true}, {"s IN ('x', 'HELLO')", true},
		{"id BETWEEN 1 AND 7", true}, {"id NOT BETWEEN 1 AND 7", false}, {"(id BETWEEN NULL AND 1) IS NULL", false},
		{"id BETWEEN NULL AND 6", false}, {"dt BETWEEN '2020-01-01' AND '2020-01-03'", true},
		// arithmetic
		{"id + 1 = 8", true}, {"id - 10 = -3", true}, {"id * 3 = 21", true}, {"id / 2 = 3.5", true}, {"id DIV 2 = 3", true},
		{"id % 4 = 3", true}, {"-id % 4 = -3", true}, {"id / 0 IS NULL", true}, {"id DIV 0 IS NULL", true}, {"MOD(id, 0) IS NULL", true},
		{"id / 3 = 2.3333", true}, {"id / 3 * 3 = 7", true}, {"d * 2 = 25", true}, {"d / 5 = 2.5", true}, {"f * 2 = 5", true},
		{"'3' + 4 = 7", true}, {"7.5 % 2 = 1.5", true}, {"-(-id) = 7", true}, {"u + 1 = 4294967296", true},
		// strings
		{"LENGTH(s) = 5", true}, {"CHAR_LENGTH('héllo') = 5", true}, {"LENGTH('héllo') = 6", true},
		{"CONCAT(s, '!', id) = 'Hello!7'", true}, {"CONCAT(s, NULL) IS NULL", true}, {"CONCAT_WS('-', 'a', NULL, 'b') = 'a-b'", true},
		{"SUBSTRING(s, 2, 3) = 'ell'", true}, {"SUBSTR(s, -3) = 'llo'", true}, {"SUBSTRING(s FROM 2) = 'ello'", true},
		{"LEFT(s, 2) = 'He'", true}, {"RIGHT(sb, 2) = 'lo'", true}, {"LOWER(sb) = 'hello'", true}, {"UPPER(sb) = 'HELLO'", true},
		{"TRIM('  a  ') = 'a'", true}, {"TRIM(LEADING 'x' FROM 'xxaxx') = 'axx'", true}, {"TRIM(TRAILING 'x' FROM 'xxaxx') = 'xxa'", true},
		{"TRIM(BOTH 'x' FROM 'xxaxx') = 'a'", true}, {"LOCATE('l', s) = 3", true}, {"LOCATE('L', s, 4) = 4", true}, {"INSTR(s, 'LO') = 4", true},
		{"REPLACE(sb, 'l', 'L') = 'HeLLo'", true},
		{"s LIKE 'he%'", true}, {"sb LIKE 'he%'", false}, {"s LIKE 'H_llo'", true}, {"CONCAT(s, ' ') LIKE 'Hello'", false}, {"'a%b' LIKE 'a\\%b'", true},
		{"'a%b' LIKE 'a|%b' ESCAPE '|'", true}, {"'axb' LIKE 'a|%b' ESCAPE '|'", false}, {"s NOT LIKE 'x%'", true},
		{"s REGEXP '^hel+o'", true}, {"sb REGEXP '^hel+o'", false}, {"s RLIKE 'z'", false},
		// control flow
		{"CASE WHEN id > 5 THEN 'big' ELSE 'small' END = 'big'", true}, {"CASE id WHEN 1 THEN 0 WHEN 7 THEN 1 END = 1", true},
		{"CASE id WHEN 1 THEN 1 END IS NULL", true}, {"IF(id > 5, 1, 0) = 1", true}, {"IFNULL(NULL, 3) = 3", true},
		{"COALESCE(NULL, NULL, s) = 'hello'", true}, {"NULLIF(id, 7) IS NULL", true}, {"NULLIF(id, 8) = 7", true},
		// numbers
		{"ABS(big) = 5", true}, {"ROUND(d) = 13", true}, {"ROUND(2.5e0) = 2", true}, {"ROUND(d, 1) = 12.5", true}, {"ROUND(1234, -2) = 1200", true},
		{"FLOOR(d) = 12", true}, {"CEIL(d) = 13", true}, {"CEILING(-1.5) = -1", true}, {"SIGN(big) = -1", true}, {"MOD(id, 4) = 3", true},
		// temporal
		{"YEAR(dt) = 2020", true}, {"MONTH(dt) = 1", true}, {"DAY(dt) = 2", true}, {"DAYOFMONTH(dd) = 2", true}, {"HOUR(dt) = 3", true},
		{"MINUTE(tm) = 20", true}, {"HOUR(tm) = 10", true}, {"DATE(dt) = '2020-01-02'", true}, {"DATEDIFF(dt, '2019-12-31') = 2", true},
		{"TIMESTAMPDIFF(SECOND, '2020-01-02 03:04:00', dt) = 5", true}, {"TIMESTAMPDIFF(MONTH, '2019-11-02 03:04:06', dt) = 1", true},
		{"TIMESTAMPDIFF(DAY, dt, '2020-01-01') = -1", true}, {"UNIX_TIMESTAMP(dt) = 1577934245", true}, {"UNIX_TIMESTAMP(ts) = 1577934245.250", true},
		{"dt < NOW()", true}, {"CURRENT_TIMESTAMP > '2000-01-01'", true},
		// JSON
		{"JSON_EXTRACT(j, '$.n') = 3", true}, {"JSON_EXTRACT(j, '$.s') = 'x'", true}, {"j->'$.a.b[1]' = 'two'", true},
		{"j->>'$.s' = 'x'", true}, {"JSON_EXTRACT(j, '$.missing') IS NULL", true}, {"JSON_EXTRACT(j, '$.a.b[0]') = 1", true},
	}
	for _, c := range cases {
		e, err := Compile(c.expr, tb)
		if err != nil {
			t.Errorf("Compile(%q): %v", c.expr, err)
			continue
		}
		got, err := e.Eval(row)
		if err != nil {
			t.Errorf("Eval(%q): %v", c.expr, err)
			continue
		}
		if got != c.want {
			t.Errorf("Eval(%q) = %v, want %v", c.expr, got, c.want)
		}
	}
}

func TestEvalNullRow(t *testing.T) {
	tb := testTable(t)
	row := make([]any, len(tb.Columns))
	for _, expr := range []string{"id = 1", "id <> 1", "NOT id = 1", "s LIKE '%'", "id IN (1, 2)", "id + 1 > 0", "LENGTH(s) >= 0", "YEAR(dt) > 0"} {
		e, err := Compile(expr, tb)
		if err != nil {
			t.Fatalf("Compile(%q): %v", expr, err)
		}
		if got, err := e.Eval(row); err != nil || got {
			t.Errorf("Eval(%q) on NULLs = %v, %v; want false", expr, got, err)
		}
	}
	e, _ := Compile("id IS NULL AND s IS NULL", tb)
	if got, _ := e.Eval(row); !got {
		t.Errorf("IS NULL on a NULL row is false")
	}
}

func TestEvalOverflow(t *testing.T) {
	tb := testTable(t)
	row := testRow()
	for _, expr := range []string{"ubig + 1 > 0", "big - 9223372036854775807 < 0", "u - 4294967296 > 0", "9223372036854775807 * 2 > 0", "-(-9223372036854775807 - 1) > 0"} {
		e, err := Compile(expr, tb)
		if err != nil {
			t.Fatalf("Compile(%q): %v", expr, err)
		}
		if _, err := e.Eval(row); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("Eval(%q) error = %v, want out of range", expr, err)
		}
	}
}

func TestCheckRefuses(t *testing.T) {
	for expr, want := range map[string]string{
		"SLEEP(1) = 0":                  "the function SLEEP",
		"a = (SELECT 1)":                "subquery",
		"CAST(a AS CHAR) = 'x'":         "CAST",
		"@x = 1":                        "variable",
		"a & 1":                         "operator",
		"t.a = 1":                       "qualified column",
		"a IN (SELECT 1)":               "subquery",
		"SUM(a) > 1":                    "aggregate",
		"a = 1;":                        "",
		"":                              "empty",
		"TIMESTAMPDIFF(FOO, a, b) = 1":  "parse",
		"LENGTH(a, b) = 1":              "LENGTH takes 1 argument",
		"a = 1 FROM t":                  "one expression",
		"NOW(7) > a":                    "precision",
		"a ILIKE 'x'":                   "ILIKE",
		"CONVERT(a USING utf8mb4) = ''": "CONVERT",
		"a REGEXP b":                    "constant string pattern",
		"a REGEXP 'x(?=a)'":             "RE2",
		"a->'$.*' = 1":                  "wildcards",
		"JSON_EXTRACT(a, b) = 1":        "constant string paths",
	} {
		err := Check(expr)
		if err == nil {
			if want != "" {
				t.Errorf("Check(%q) passed, want an error with %q", expr, want)
			}
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%q) = %v, want it to contain %q", expr, err, want)
		}
	}
	err := Check("SLEEP(1) = 0")
	if err == nil || !strings.Contains(err.Error(), "supported:") || !strings.Contains(err.Error(), "JSON_EXTRACT") {
		t.Errorf("the refusal does not list the supported set: %v", err)
	}
	for _, ok := range []string{"a > 1 AND b IS NULL", "c->>'$.x' = 'y'", "TRIM(LEADING FROM a) = ''", "CURRENT_TIMESTAMP > a", "NOW(3) > a"} {
		if err := Check(ok); err != nil {
			t.Errorf("Check(%q): %v", ok, err)
		}
	}
}

func TestCompileUnknownColumn(t *testing.T) {
	_, err := Compile("nosuch = 1", testTable(t))
	if err == nil || !strings.Contains(err.Error(), "nosuch") || !strings.Contains(err.Error(), "db.t") {
		t.Fatalf("Compile with an unknown column: %v", err)
	}
}

func TestEvalShortRow(t *testing.T) {
	e, err := Compile("id = 1", testTable(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Eval([]any{int32(1)}); err == nil {
		t.Fatal("a short row image is no error")
	}
}

func TestEvalConvertedRow(t *testing.T) {
	tb := testTable(t)
	row := testRow()
	// pkg/rowimage's converted forms
	row[1], row[3], row[4], row[6], row[15] = uint64(4294967295), uint64(18446744073709551615), "12.50", []byte("Hello"), uint64(254)
	for _, expr := range []string{"u = 4294967295", "ubig = 18446744073709551615", "d = 12.5", "s = 'hello'", "ti = 254"} {
		e, err := Compile(expr, tb)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := e.Eval(row); err != nil || !got {
			t.Errorf("Eval(%q) on a converted row = %v, %v", expr, got, err)
		}
	}
}

func TestNowAndLocation(t *testing.T) {
	tb := testTable(t)
	fixed := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	e, err := CompileWith("dt = NOW()", tb, Options{Now: func() time.Time { return fixed }})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := e.Eval(testRow()); !got {
		t.Error("NOW() is not the clock's time")
	}
	loc := time.FixedZone("+02", 2*3600)
	e, err = CompileWith("HOUR(ts) = 5 AND UNIX_TIMESTAMP(ts) = 1577934245.250", tb, Options{Location: loc})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.Eval(testRow()); !got || err != nil {
		t.Errorf("a TIMESTAMP in a +02 session: %v, %v", got, err)
	}
}

func TestConcurrentEval(t *testing.T) {
	tb := testTable(t)
	e, err := Compile("s LIKE 'he%' AND id / 3 > 2 AND CONCAT(s, id) <> '' AND j->>'$.s' = 'x'", tb)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := testRow()
			for range 200 {
				if got, err := e.Eval(row); err != nil || !got {
					t.Errorf("Eval = %v, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
