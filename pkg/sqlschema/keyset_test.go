package sqlschema

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

func TestKeysetLiteral(t *testing.T) {
	text := Column{Name: "s", DataType: "varchar", Charset: "latin1"}
	cases := []struct {
		col     Column
		results string
		in      []byte
		want    string
		wantErr bool
	}{
		{col: Column{Name: "i", DataType: "bigint"}, in: []byte("-42"), want: "-42"},
		{col: Column{Name: "d", DataType: "decimal"}, in: []byte("12.50"), want: "12.50"},
		{col: Column{Name: "i", DataType: "int"}, in: []byte("1 OR 1=1"), wantErr: true},
		{col: text, results: "binary", in: []byte("a'b"), want: "_latin1 X'612762'"},
		{col: text, results: "utf8mb4", in: []byte("é"), want: "_utf8mb4 X'c3a9'"},
		{col: Column{Name: "b", DataType: "varbinary"}, in: []byte{0, 0xff}, want: "X'00ff'"},
		{col: Column{Name: "t", DataType: "datetime"}, in: []byte("2024-01-02 03:04:05.123456"), want: "'2024-01-02 03:04:05.123456'"},
		{col: Column{Name: "t", DataType: "time"}, in: []byte("-838:59:59"), want: "'-838:59:59'"},
		{col: Column{Name: "t", DataType: "date"}, in: []byte("x'"), wantErr: true},
		{col: Column{Name: "b", DataType: "bit"}, in: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}, want: "18446744073709551614"},
		{col: Column{Name: "b", DataType: "bit"}, in: []byte{0}, want: "0"},
		{col: Column{Name: "i", DataType: "int"}, in: nil, wantErr: true},
	}
	for _, c := range cases {
		tbl := &Table{Schema: "s", Name: "t", Columns: []Column{c.col}}
		k, err := NewKeyset(tbl, "", []string{c.col.Name}, c.results)
		if err != nil {
			t.Fatal(err)
		}
		got, err := k.Literal(0, c.in)
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("%s %s: Literal(%q) = %q, %v; want %q, error %v", c.col.DataType, c.results, c.in, got, err, c.want, c.wantErr)
		}
	}
	for _, typ := range []string{"float", "double", "enum", "set", "json", "geometry", "point"} {
		tbl := &Table{Schema: "s", Name: "t", Columns: []Column{{Name: "c", DataType: typ, ColumnType: typ}}}
		if _, err := NewKeyset(tbl, "", []string{"c"}, ""); !errors.Is(err, ErrCannotPage) {
			t.Errorf("NewKeyset over a %s column: %v, want ErrCannotPage", typ, err)
		}
	}
}

// page reads every row of table on c in chunks of chunk rows by k, as the
// stream does (key > cursor ORDER BY key LIMIT chunk), each row's columns
// joined by "|" (key columns first); it fails after limit chunks.
func page(t *testing.T, c *sql.Conn, k *Keyset, table string, chunk, limit int) []string {
	t.Helper()
	out, err := tryPage(t, c, k, table, chunk, limit)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tryPage is page returning the error of a cursor that does not advance.
func tryPage(t *testing.T, c *sql.Conn, k *Keyset, table string, chunk, limit int) ([]string, error) {
	t.Helper()
	var out []string
	var cursor []string
	for range limit {
		q := "SELECT " + k.OrderBy() + " FROM " + table + k.Where(cursor, nil) + " ORDER BY " + k.OrderBy() + fmt.Sprintf(" LIMIT %d", chunk)
		var last [][]byte
		n := 0
		err := ScanAll(t.Context(), c, q, nil, func(rows *sql.Rows) error {
			vals := make([]sql.RawBytes, len(k.Columns))
			ptrs := make([]any, len(vals))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return err
			}
			last = make([][]byte, len(vals))
			parts := make([]string, len(vals))
			for i, v := range vals {
				last[i] = slices.Clone(v)
				parts[i] = fmt.Sprintf("%x", []byte(v))
			}
			out = append(out, strings.Join(parts, "|"))
			n++
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n < chunk {
			return out, nil
		}
		if cursor, err = k.Literals(last); err != nil {
			t.Fatal(err)
		}
	}
	return out, fmt.Errorf("paging %s by (%s) did not end after %d chunks: the cursor does not advance (read %d rows)", table, k.OrderBy(), limit, len(out))
}

// all reads every row of table's key in key order, as page formats them.
func all(t *testing.T, c *sql.Conn, k *Keyset, table string) []string {
	t.Helper()
	return page(t, c, k, table, 1<<30, 1)
}

// TestKeysetBit pages BIT(1), BIT(8) and BIT(64) keys, values at the edges
// of the signed and of the double range included, and shows why a BIT
// cursor is written as a decimal number: compared with a hex literal, a
// BIT(64) column compares as a double.
func TestKeysetBit(t *testing.T) {
	inst := mariadbtest.Start(t, mariadbtest.Options{Name: "keyset-bit", FastCommit: true})
	inst.Exec(t, "CREATE DATABASE k")
	inst.Exec(t, "CREATE TABLE k.b1 (b BIT(1) PRIMARY KEY)")
	inst.Exec(t, "INSERT INTO k.b1 VALUES (0), (1)")
	inst.Exec(t, "CREATE TABLE k.b8 (b BIT(8) PRIMARY KEY)")
	inst.Exec(t, "INSERT INTO k.b8 VALUES (0), (1), (127), (128), (254), (255)")
	inst.Exec(t, "CREATE TABLE k.b64 (b BIT(64) PRIMARY KEY)")
	inst.Exec(t, "INSERT INTO k.b64 VALUES (0), (1), (0x1FFFFFFFFFFFFF), (0x20000000000001), (0x7FFFFFFFFFFFFFFF), "+
		"(0x8000000000000000), (0xFFFFFFFFFFFFFFFD), (0xFFFFFFFFFFFFFFFE), (0xFFFFFFFFFFFFFFFF)")
	if n := inst.QueryString(t, "SELECT COUNT(*) FROM k.b64 WHERE b > 18446744073709551614"); n != "1" {
		t.Errorf("%s rows of k.b64 are greater than 0xFFFFFFFFFFFFFFFE written as a decimal, want 1", n)
	}
	for _, names := range []string{"binary", "utf8mb4"} {
		c := session(t, inst, names)
		for _, table := range []string{"b1", "b8", "b64"} {
			tbl, err := ReadTable(t.Context(), c, "k", table)
			if err != nil {
				t.Fatal(err)
			}
			k, _, err := ChooseKeyset(tbl, names)
			if err != nil || k == nil || k.Columns[0].Kind != PageBit {
				t.Fatalf("%s: ChooseKeyset = %+v, %v; want the BIT primary key", table, k, err)
			}
			want := all(t, c, k, "k."+table)
			for _, chunk := range []int{1, 2} {
				if got := page(t, c, k, "k."+table, chunk, 20); !slices.Equal(got, want) {
					t.Errorf("SET NAMES %s: %s in chunks of %d read %v, want %v", names, table, chunk, got, want)
				}
			}
			if table != "b64" {
				continue
			}
			// The hex form, X'..' of the raw bytes, compares as a double:
			// past 2^53 neighbouring values compare equal, and paging
			// stops early.
			hex := &Keyset{Index: k.Index, Columns: []KeyColumn{{Name: "b", Kind: PageBinary}}}
			got, err := tryPage(t, c, hex, "k.b64", 1, 20)
			if err == nil && slices.Equal(got, want) {
				t.Logf("this server compares BIT(64) with a hex literal exactly; the decimal form is right all the same")
			} else {
				t.Logf("as expected, paging BIT(64) by X'..' cursors goes wrong: %d rows, %v", len(got), err)
			}
		}
	}
}

// TestKeysetRange pages 2- and 3-column keys of mixed kinds (text in a
// charset other than the session's, temporal, binary, numbers with
// duplicates in the leading columns) in chunks, both as "key > cursor" and
// as lower < key <= upper ranges, and checks that MariaDB reads the
// expanded condition as a range of the key's index.
func TestKeysetRange(t *testing.T) {
	inst := mariadbtest.Start(t, mariadbtest.Options{Name: "keyset-range", FastCommit: true})
	inst.Exec(t, "CREATE DATABASE k")
	inst.Exec(t, "CREATE TABLE k.two (a INT NOT NULL, s VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_swedish_ci NOT NULL, v INT, PRIMARY KEY (a, s))")
	inst.Exec(t, "INSERT INTO k.two SELECT seq % 7, CONCAT(CHAR(0xE9 USING latin1), 'x', seq % 11, IF(seq % 3 = 0, ' ', '')), seq FROM k.seq_1_to_77")
	inst.Exec(t, "CREATE TABLE k.three (d DATETIME(6) NOT NULL, b VARBINARY(8) NOT NULL, n DECIMAL(10,2) NOT NULL, v INT, UNIQUE KEY u (d, b, n))")
	inst.Exec(t, "INSERT INTO k.three SELECT '2024-01-01' + INTERVAL (seq % 4) SECOND + INTERVAL (seq % 2) MICROSECOND, "+
		"UNHEX(LPAD(HEX(seq % 5), 2, '0')), seq / 4, seq FROM k.seq_1_to_80")
	inst.Exec(t, "CREATE TABLE k.big (a INT NOT NULL, b VARCHAR(10) NOT NULL, c INT NOT NULL, PRIMARY KEY (a, b, c))")
	inst.Exec(t, "INSERT INTO k.big SELECT seq % 50, CONCAT('x', seq % 7), seq FROM k.seq_1_to_5000")
	inst.Exec(t, "ANALYZE TABLE k.big")
	for _, names := range []string{"binary", "utf8mb4"} {
		c := session(t, inst, names)
		for _, table := range []string{"two", "three", "big"} {
			tbl, err := ReadTable(t.Context(), c, "k", table)
			if err != nil {
				t.Fatal(err)
			}
			k, _, err := ChooseKeyset(tbl, names)
			if err != nil || k == nil {
				t.Fatalf("%s: ChooseKeyset = %v, %v", table, k, err)
			}
			want := all(t, c, k, "k."+table)
			if n := inst.QueryString(t, "SELECT COUNT(*) FROM k."+table); fmt.Sprint(len(want)) != n {
				t.Fatalf("%s: %d rows in key order, the table has %s", table, len(want), n)
			}
			for _, chunk := range []int{1, 3, 10} {
				if table == "big" && chunk < 10 {
					continue
				}
				if got := page(t, c, k, "k."+table, chunk, 6000); !slices.Equal(got, want) {
					t.Errorf("SET NAMES %s: %s in chunks of %d read %d rows, want the %d in key order", names, table, chunk, len(got), len(want))
				}
			}
			if table != "big" {
				rangesCover(t, c, k, "k."+table, want)
			}
		}
	}

	c := session(t, inst, "binary")
	tbl, err := ReadTable(t.Context(), c, "k", "big")
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKeyset(tbl, "PRIMARY", []string{"a", "b", "c"}, "binary")
	if err != nil {
		t.Fatal(err)
	}
	lower, err := k.Literals([][]byte{[]byte("25"), []byte("x3"), []byte("2000")})
	if err != nil {
		t.Fatal(err)
	}
	upper, err := k.Literals([][]byte{[]byte("40"), []byte("x1"), []byte("4000")})
	if err != nil {
		t.Fatal(err)
	}
	for _, where := range []string{k.Where(lower, nil), k.Where(lower, upper)} {
		q := "EXPLAIN SELECT * FROM k.big" + where + " ORDER BY a, b, c LIMIT 100"
		row, err := mariadbtest.QueryRows(t.Context(), inst.DB(t), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(row) != 1 || !strings.Contains(row[0], `|"range"|`) || !strings.Contains(row[0], `"PRIMARY"|"PRIMARY"`) {
			t.Errorf("%s: %v, want a range of PRIMARY", q, row)
		}
	}
}

// rangesCover reads table in ranges lower < key <= upper whose bounds are
// every third row's key and checks that together they hold want, in order.
func rangesCover(t *testing.T, c *sql.Conn, k *Keyset, table string, want []string) {
	t.Helper()
	var bounds [][]string
	err := ScanAll(t.Context(), c, "SELECT "+k.OrderBy()+" FROM "+table+" ORDER BY "+k.OrderBy(), nil, func(rows *sql.Rows) error {
		vals := make([]sql.RawBytes, len(k.Columns))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		raw := make([][]byte, len(vals))
		for i, v := range vals {
			raw[i] = slices.Clone(v)
		}
		lits, err := k.Literals(raw)
		if err != nil {
			return err
		}
		bounds = append(bounds, lits)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var lower []string
	for i := 2; ; i += 3 {
		var upper []string
		if i < len(bounds) {
			upper = bounds[i]
		}
		q := "SELECT " + k.OrderBy() + " FROM " + table + k.Where(lower, upper) + " ORDER BY " + k.OrderBy()
		rows, err := queryRaw(t, c, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		got = append(got, rows...)
		if upper == nil {
			break
		}
		lower = upper
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s in ranges of 3 rows: %d rows, want the %d in key order", table, len(got), len(want))
	}
}

// queryRaw reads q's rows formatted as page formats them.
func queryRaw(t *testing.T, c *sql.Conn, q string) ([]string, error) {
	t.Helper()
	var out []string
	err := ScanAll(t.Context(), c, q, nil, func(rows *sql.Rows) error {
		cols, err := rows.Columns()
		if err != nil {
			return err
		}
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = fmt.Sprintf("%x", []byte(v))
		}
		out = append(out, strings.Join(parts, "|"))
		return nil
	})
	return out, err
}
