package stream

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// testColumn builds a column the way SchemaCache does.
func encColumn(t testing.TB, dataType, columnType, charset string) sqlschema.Column {
	t.Helper()
	c, err := sqlschema.NewColumn("c", dataType, columnType, charset, true)
	if err != nil {
		t.Fatalf("NewColumn(%q): %v", columnType, err)
	}
	return c
}

// TestEncodeValue checks the debezium JSON and the canal-json text of
// every column type, in the binlog form (go-mysql's decoder) and the
// snapshot form (database/sql text).
func TestEncodeValue(t *testing.T) {
	const canalNull = "<null>"
	type tc struct {
		name       string
		dataType   string
		columnType string
		charset    string
		in         any
		snapshot   bool
		want       string // debezium JSON
		canal      string // canal-json text; "" = same as want unquoted
	}
	long := strings.Repeat("é", 300)
	cases := []tc{
		{"null int", "int", "int(11)", "", nil, false, "null", canalNull},
		{"null text snapshot", "varchar", "varchar(10)", "utf8mb4", nil, true, "null", canalNull},
		{"null []byte snapshot", "int", "int(11)", "", []byte(nil), true, "null", canalNull},
		{"null RawBytes snapshot", "varchar", "varchar(10)", "utf8mb4", sql.RawBytes(nil), true, "null", canalNull},
		{"empty RawBytes snapshot", "varchar", "varchar(10)", "utf8mb4", sql.RawBytes{}, true, `""`, ""},
		{"int RawBytes snapshot", "int", "int(11)", "", sql.RawBytes("-5"), true, "-5", ""},
		{"tinyint min", "tinyint", "tinyint(4)", "", int8(-128), false, "-128", ""},
		{"tinyint unsigned max", "tinyint", "tinyint(3) unsigned", "", int8(-1), false, "255", ""},
		{"tinyint unsigned snapshot", "tinyint", "tinyint(3) unsigned", "", []byte("255"), true, "255", ""},
		{"smallint unsigned max", "smallint", "smallint(5) unsigned", "", int16(-1), false, "65535", ""},
		{"mediumint min", "mediumint", "mediumint(9)", "", int32(-8388608), false, "-8388608", ""},
		{"mediumint unsigned max", "mediumint", "mediumint(8) unsigned", "", int32(-1), false, "16777215", ""},
		{"mediumint unsigned snapshot", "mediumint", "mediumint(8) unsigned", "", []byte("16777215"), true, "16777215", ""},
		{"int unsigned max", "int", "int(10) unsigned", "", int32(-1), false, "4294967295", ""},
		{"bigint min", "bigint", "bigint(20)", "", int64(math.MinInt64), false, "-9223372036854775808", ""},
		{"bigint min snapshot", "bigint", "bigint(20)", "", []byte("-9223372036854775808"), true, "-9223372036854775808", ""},
		{"bigint max", "bigint", "bigint(20)", "", int64(math.MaxInt64), false, "9223372036854775807", ""},
		{"bigint unsigned max", "bigint", "bigint(20) unsigned", "", int64(-1), false, "18446744073709551615", ""},
		{"bigint unsigned max uint64", "bigint", "bigint(20) unsigned", "", uint64(math.MaxUint64), false, "18446744073709551615", ""},
		{"bigint unsigned max snapshot", "bigint", "bigint(20) unsigned", "", []byte("18446744073709551615"), true, "18446744073709551615", ""},
		{"bigint unsigned 2^63", "bigint", "bigint(20) unsigned", "", int64(math.MinInt64), false, "9223372036854775808", ""},
		{"year", "year", "year(4)", "", 2155, false, "2155", ""},
		{"year zero", "year", "year(4)", "", 0, false, "0", ""},
		{"year zero snapshot", "year", "year(4)", "", []byte("0000"), true, "0", ""},
		{"year snapshot", "year", "year(4)", "", []byte("1901"), true, "1901", ""},
		{"decimal keeps scale", "decimal", "decimal(40,10)", "", decimal.RequireFromString("1.5000000000"), false, `"1.5000000000"`, ""},
		{"decimal max", "decimal", "decimal(40,10)", "", decimal.RequireFromString("-999999999999999999999999999999.9999999999"), false,
			`"-999999999999999999999999999999.9999999999"`, ""},
		{"decimal snapshot", "decimal", "decimal(40,10)", "", []byte("0.0000000001"), true, `"0.0000000001"`, ""},
		{"decimal zerofill snapshot", "decimal", "decimal(6,2) unsigned zerofill", "", []byte("0001.50"), true, `"1.50"`, ""},
		{"decimal zero snapshot", "decimal", "decimal(6,2) unsigned zerofill", "", []byte("0000.00"), true, `"0.00"`, ""},
		{"int zerofill snapshot", "int", "int(5) unsigned zerofill", "", []byte("00042"), true, "42", ""},
		{"decimal scale 0", "decimal", "decimal(5,0) unsigned", "", decimal.RequireFromString("99999"), false, `"99999"`, ""},
		{"decimal float64 form", "decimal", "decimal(6,2)", "", 1.5, false, `"1.50"`, ""},
		// FLOAT: every bit of the float32 (the binlog's), and the snapshot's
		// text of the double holding it (CAST AS DOUBLE) encodes alike.
		{"float 3.402823e38", "float", "float", "", float32(3.402823e38), false, "3.402823e+38", "340282300000000000000000000000000000000"},
		{"float 3.402823e38 snapshot", "float", "float", "", []byte("3.4028230607370965e38"), true, "3.402823e+38", "340282300000000000000000000000000000000"},
		{"float max", "float", "float", "", float32(math.MaxFloat32), false, "3.4028235e+38", "340282350000000000000000000000000000000"},
		{"float max snapshot", "float", "float", "", []byte("3.4028234663852886e38"), true, "3.4028235e+38", "340282350000000000000000000000000000000"},
		{"float min", "float", "float", "", float32(-math.MaxFloat32), false, "-3.4028235e+38", "-340282350000000000000000000000000000000"},
		{"float 1.1", "float", "float", "", float32(1.1), false, "1.1", ""},
		{"float 1.1 snapshot", "float", "float", "", []byte("1.100000023841858"), true, "1.1", ""},
		{"float 7 digits", "float", "float", "", float32(7.16350793838501), false, "7.163508", ""},
		{"float 7 digits snapshot", "float", "float", "", []byte("7.16350793838501"), true, "7.163508", ""},
		{"float 2^24+1", "float", "float", "", float32(16777217), false, "16777216", ""},
		{"float 2^24+1 snapshot", "float", "float", "", []byte("16777216"), true, "16777216", ""},
		{"float smallest normal snapshot", "float", "float", "", []byte("1.1754943508222875e-38"), true, "1.1754944e-38", "0." + strings.Repeat("0", 37) + "11754944"},
		{"float as float64", "float", "float", "", 1.100000023841858, false, "1.1", ""},
		{"float tiny", "float", "float", "", float32(1.5e-7), false, "1.5e-7", "0.00000015"},
		{"float negative zero", "float", "float", "", float32(math.Copysign(0, -1)), false, "-0", ""},
		{"double max", "double", "double", "", math.MaxFloat64, false, "1.7976931348623157e+308", "179769313486231570" + strings.Repeat("0", 291)},
		{"double max snapshot", "double", "double", "", []byte("1.7976931348623157e308"), true, "1.7976931348623157e+308", "179769313486231570" + strings.Repeat("0", 291)},
		{"double 0.1", "double", "double", "", 0.1, false, "0.1", ""},
		{"double min normal", "double", "double", "", []byte("2.2250738585072014e-308"), true, "2.2250738585072014e-308", "0." + strings.Repeat("0", 307) + "22250738585072014"},
		{"date zero", "date", "date", "", "0000-00-00", false, `"0000-00-00"`, ""},
		{"date zero snapshot", "date", "date", "", []byte("0000-00-00"), true, `"0000-00-00"`, ""},
		{"datetime(6)", "datetime", "datetime(6)", "", "9999-12-31 23:59:59.999999", false, `"9999-12-31 23:59:59.999999"`, ""},
		{"datetime(6) snapshot", "datetime", "datetime(6)", "", []byte("9999-12-31 23:59:59.999999"), true, `"9999-12-31 23:59:59.999999"`, ""},
		{"datetime(6) zero", "datetime", "datetime(6)", "", "0000-00-00 00:00:00.000000", false, `"0000-00-00 00:00:00.000000"`, ""},
		{"datetime", "datetime", "datetime", "", "2024-02-29 12:34:56", false, `"2024-02-29 12:34:56"`, ""},
		{"datetime(3) time.Time", "datetime", "datetime(3)", "", time.Date(2026, 1, 2, 15, 4, 5, 123456789, time.UTC), false, `"2026-01-02 15:04:05.123"`, ""},
		{"timestamp(6)", "timestamp", "timestamp(6)", "", "2038-01-19 03:14:07.999999", false, `"2038-01-19 03:14:07.999999"`, ""},
		{"time(3) negative whole", "time", "time(3)", "", "-838:59:59", false, `"-838:59:59.000"`, ""},
		{"time(3) negative snapshot", "time", "time(3)", "", []byte("-838:59:59.000"), true, `"-838:59:59.000"`, ""},
		{"time(3) zero", "time", "time(3)", "", "00:00:00", false, `"00:00:00.000"`, ""},
		{"time(3) negative fraction", "time", "time(3)", "", "-00:00:01.001", false, `"-00:00:01.001"`, ""},
		{"time", "time", "time", "", "12:00:00", false, `"12:00:00"`, ""},
		{"enum index", "enum", "enum('a','b''c','d,e')", "utf8mb4", int64(2), false, `"b'c"`, "2"},
		{"enum empty", "enum", "enum('a','b''c','d,e')", "utf8mb4", int64(0), false, `""`, "0"},
		{"enum snapshot", "enum", "enum('a','b''c','d,e')", "utf8mb4", []byte("d,e"), true, `"d,e"`, "3"},
		{"set bitmask", "set", "set('x','y','z')", "utf8mb4", int64(5), false, `"x,z"`, "5"},
		{"set all", "set", "set('x','y','z')", "utf8mb4", int64(7), false, `"x,y,z"`, "7"},
		{"set empty", "set", "set('x','y','z')", "utf8mb4", int64(0), false, `""`, "0"},
		{"set snapshot", "set", "set('x','y','z')", "utf8mb4", []byte("x,z"), true, `"x,z"`, "5"},
		{"bit(1)", "bit", "bit(1)", "", int64(1), false, "1", ""},
		{"bit(1) snapshot", "bit", "bit(1)", "", []byte{1}, true, "1", ""},
		{"bit(64) max", "bit", "bit(64)", "", int64(-1), false, "18446744073709551615", ""},
		{"bit(64) max snapshot", "bit", "bit(64)", "", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, true, "18446744073709551615", ""},
		{"bit(64) 2^63 snapshot", "bit", "bit(64)", "", []byte{0x80, 0, 0, 0, 0, 0, 0, 0}, true, "9223372036854775808", ""},
		{"blob invalid utf8", "blob", "blob", "", []byte{0xff, 0xfe, 0x00}, false, `"//4A"`, "ÿþ\x00"},
		{"blob snapshot", "blob", "blob", "", []byte{0xff, 0xfe, 0x00}, true, `"//4A"`, "ÿþ\x00"},
		{"blob empty", "blob", "blob", "", []byte{}, false, `""`, ""},
		{"binary padded", "binary", "binary(4)", "", "a", false, `"YQAAAA=="`, "a\x00\x00\x00"},
		{"binary snapshot", "binary", "binary(4)", "", []byte("a\x00\x00\x00"), true, `"YQAAAA=="`, "a\x00\x00\x00"},
		{"varbinary invalid utf8", "varbinary", "varbinary(10)", "", "\xc3\x28", false, `"wyg="`, "Ã("},
		{"utf8mb4 text", "varchar", "varchar(100)", "utf8mb4", "日本語テキスト😀", false, `"日本語テキスト😀"`, ""},
		{"utf8mb4 text snapshot", "varchar", "varchar(100)", "utf8mb4", []byte("日本語テキスト😀"), true, `"日本語テキスト😀"`, ""},
		{"text escapes", "text", "text", "utf8mb4", []byte("a\"b\\c\n\t\x01<&>\u2028"), false, `"a\"b\\c\n\t\u0001<&>\u2028"`, "a\"b\\c\n\t\x01<&>\u2028"},
		{"text invalid utf8", "text", "text", "utf8mb4", []byte{'a', 0xff}, false, `"a\ufffd"`, "a\xff"},
		{"long text", "mediumtext", "mediumtext", "utf8mb4", []byte(long), false, `"` + long + `"`, ""},
		{"char trailing space", "char", "char(10)", "utf8mb4", "a", false, `"a"`, ""},
		{"latin1 binlog", "varchar", "varchar(20)", "latin1", "caf\xe9 \x80\x81", false, "\"café €\u0081\"", ""},
		{"latin1 snapshot", "varchar", "varchar(20)", "latin1", []byte("café €\u0081"), true, "\"café €\u0081\"", ""},
		{"ascii-only latin2", "varchar", "varchar(20)", "latin2", "abc", false, `"abc"`, ""},
		{"json text", "longtext", "longtext", "utf8mb4", []byte(`{"a": [1, 2.5, "x"], "b": {"c": null}}`), false,
			`"{\"a\": [1, 2.5, \"x\"], \"b\": {\"c\": null}}"`, `{"a": [1, 2.5, "x"], "b": {"c": null}}`},
		{"mysql json", "json", "json", "", `{"a":1}`, false, `"{\"a\":1}"`, `{"a":1}`},
		{"inet4 trimmed", "inet4", "inet4", "", "\x01\x02\x03", false, `"1.2.3.0"`, ""},
		{"inet4 snapshot", "inet4", "inet4", "", []byte("1.2.3.0"), true, `"1.2.3.0"`, ""},
		{"inet6 trimmed", "inet6", "inet6", "", "\x20\x01\x0d\xb8", false, `"2001:db8::"`, ""},
		{"inet6 zero", "inet6", "inet6", "", "", false, `"::"`, ""},
		{"inet6 single zero group", "inet6", "inet6", "", "\x20\x01\x0d\xb8\x00\x00\x00\x01\x00\x01\x00\x01\x00\x01\x00\x01", false, `"2001:db8::1:1:1:1:1"`, ""},
		{"inet6 first longest gap", "inet6", "inet6", "", "\x00\x01\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x01\x00\x01", false, `"1::1:0:0:1:1"`, ""},
		{"inet6 mapped", "inet6", "inet6", "", "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\x01\x02\x03\x04", false, `"::ffff:1.2.3.4"`, ""},
		{"inet6 compatible", "inet6", "inet6", "", "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x02\x03\x04", false, `"::1.2.3.4"`, ""},
		{"inet6 loopback", "inet6", "inet6", "", "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01", false, `"::1"`, ""},
		{"uuid trimmed", "uuid", "uuid", "", "\x12\x3e\x45\x67\xe8\x9b\x12\xd3\xa4\x56\x42\x66\x55\x44", false, `"123e4567-e89b-12d3-a456-426655440000"`, ""},
		{"uuid snapshot", "uuid", "uuid", "", []byte("123e4567-e89b-12d3-a456-426655440000"), true, `"123e4567-e89b-12d3-a456-426655440000"`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			col := encColumn(t, c.dataType, c.columnType, c.charset)
			v, err := encodeValue(&col, c.in, c.snapshot)
			if err != nil {
				t.Fatalf("encodeValue(%#v): %v", c.in, err)
			}
			if got := string(v.debezium(nil)); got != c.want {
				t.Errorf("debezium JSON of %#v = %s, want %s", c.in, got, c.want)
			}
			wantCanal := c.canal
			if wantCanal == "" {
				wantCanal = strings.Trim(c.want, `"`)
			}
			got, ok := v.canal()
			if !ok {
				got = canalNull
			}
			if got != wantCanal {
				t.Errorf("canal text of %#v = %q, want %q", c.in, got, wantCanal)
			}
		})
	}
}

// TestEncodeValueErrors checks that values the column cannot hold fail
// with an error naming the column.
func TestEncodeValueErrors(t *testing.T) {
	cases := []struct {
		name       string
		dataType   string
		columnType string
		charset    string
		in         any
		want       string
	}{
		{"int from float", "int", "int(11)", "", 1.5, "unexpected value of Go type float64"},
		{"int bad text", "int", "int(11)", "", []byte("12a"), `integer text "12a"`},
		{"enum beyond members", "enum", "enum('a','b')", "utf8mb4", int64(3), "ENUM index 3 beyond the 2 members"},
		{"set beyond members", "set", "set('a','b')", "utf8mb4", int64(4), "SET bitmask 0x4 beyond the 2 members"},
		{"bit too long", "bit", "bit(64)", "", make([]byte, 9), "BIT value of 9 bytes"},
		{"decimal bad text", "decimal", "decimal(5,2)", "", []byte("x"), `decimal text "x"`},
		{"float bad text", "float", "float", "", []byte("x"), `float text "x"`},
		{"latin2 non-ASCII", "varchar", "varchar(10)", "latin2", "\xb1", "charset latin2"},
		{"blob from int", "blob", "blob", "", int64(1), "unexpected value of Go type int64"},
		{"inet4 too long", "inet4", "inet4", "", "\x01\x02\x03\x04\x05", "inet4 value of 5 bytes, at most 4 expected"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			col := encColumn(t, c.dataType, c.columnType, c.charset)
			_, err := encodeValue(&col, c.in, false)
			if err == nil {
				t.Fatalf("encodeValue(%#v) succeeded, want an error with %q", c.in, c.want)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "column c ("+c.columnType+")") {
				t.Errorf("error = %q, want it to name the column and say %q", err, c.want)
			}
		})
	}
}

// appendJSONString's eight-bytes-at-a-time scan gives what encoding/json
// gives for every byte value at every offset of a word.
func TestAppendJSONStringWords(t *testing.T) {
	for c := range 256 {
		for at := range 17 {
			b := []byte(strings.Repeat("abcdefgh", 3))
			b[at] = byte(c)
			s := string(b)
			want, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			want = bytes.ReplaceAll(want, []byte(`\u003c`), []byte("<"))
			want = bytes.ReplaceAll(want, []byte(`\u003e`), []byte(">"))
			want = bytes.ReplaceAll(want, []byte(`\u0026`), []byte("&"))
			switch c { // encoding/json's short forms of these two
			case '\b':
				want = bytes.ReplaceAll(want, []byte(`\b`), []byte(`\u0008`))
			case '\f':
				want = bytes.ReplaceAll(want, []byte(`\f`), []byte(`\u000c`))
			}
			if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
				t.Fatalf("byte %#x at %d: %s, want %s", c, at, got, want)
			}
		}
	}
}
