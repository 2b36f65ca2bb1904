package stream

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// testSchema is shop.orders (id INT PRIMARY KEY, name VARCHAR, qty BIGINT
// UNSIGNED, tag ENUM('a','b')), or with a two-column key in reverse
// column order.
func encSchema(t *testing.T) *sqlschema.Table {
	t.Helper()
	cols := []sqlschema.Column{
		encColumn(t, "int", "int(11)", ""),
		encColumn(t, "varchar", "varchar(20)", "utf8mb4"),
		encColumn(t, "bigint", "bigint(20) unsigned", ""),
		encColumn(t, "enum", "enum('a','b')", "utf8mb4"),
	}
	for i, name := range []string{"id", "name", "qty", "tag"} {
		cols[i].Name = name
	}
	return &sqlschema.Table{Schema: "shop", Name: "orders", Columns: cols, RowKey: []int{0}, KeyReason: sqlschema.KeyPrimary, RowKeyIndex: "PRIMARY"}
}

func encEncoder(t testing.TB, format string) *Encoder {
	t.Helper()
	e, err := NewEncoder("mysql-01", format, WithNow(func() time.Time { return time.UnixMilli(1764547200123) }))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var encPos = Position{File: "mariadb-bin.000003", Pos: 1234, Row: 1, GTID: "0-1-900", ServerID: 1, TsMs: 1764547200000}

// TestEncodeRowFormats checks whole events of each operation in both
// formats, byte for byte (member order is part of the contract).
func TestEncodeRowFormats(t *testing.T) {
	before := []any{int32(7), "pen", int64(-1), int64(1)}
	after := []any{int32(7), "pencil", int64(-1), int64(2)}
	snap := []any{[]byte("7"), []byte("pen"), []byte("18446744073709551615"), []byte("a")}
	const src = `"source":{"name":"mysql-01","db":"shop","table":"orders","file":"mariadb-bin.000003","pos":1234,"row":1,` +
		`"gtid":"0-1-900","server_id":1,"ts_ms":1764547200000,"snapshot":%s}`
	const rowBefore = `{"id":7,"name":"pen","qty":18446744073709551615,"tag":"a"}`
	const rowAfter = `{"id":7,"name":"pencil","qty":18446744073709551615,"tag":"b"}`
	const canalHead = `{"id":0,"database":"shop","table":"orders","pkNames":["id"],"isDdl":false,"type":%q,"es":1764547200000,"ts":1764547200123,"sql":"",` +
		`"sqlType":{"id":4,"name":12,"qty":3,"tag":4},"mysqlType":{"id":"int(11)","name":"varchar(20)","qty":"bigint(20) unsigned","tag":"enum('a','b')"},`
	const canalBefore = `{"id":"7","name":"pen","qty":"18446744073709551615","tag":"1"}`
	const canalAfter = `{"id":"7","name":"pencil","qty":"18446744073709551615","tag":"2"}`
	sub := func(format, snapshot string) string { return strings.Replace(format, "%s", snapshot, 1) }
	cases := []struct {
		format, op    string
		before, after []any
		want          string
	}{
		{"debezium", "c", nil, after, `{"before":null,"after":` + rowAfter + `,"op":"c","ts_ms":1764547200123,` + sub(src, "false") + `}`},
		{"debezium", "u", before, after, `{"before":` + rowBefore + `,"after":` + rowAfter + `,"op":"u","ts_ms":1764547200123,` + sub(src, "false") + `}`},
		{"debezium", "d", before, nil, `{"before":` + rowBefore + `,"after":null,"op":"d","ts_ms":1764547200123,` + sub(src, "false") + `}`},
		{"debezium", "r", nil, snap, `{"before":null,"after":` + rowBefore + `,"op":"r","ts_ms":1764547200123,` + sub(src, "true") + `}`},
		{"canal-json", "c", nil, after, strings.Replace(canalHead, "%q", `"INSERT"`, 1) + `"data":[` + canalAfter + `],"old":null}`},
		{"canal-json", "u", before, after, strings.Replace(canalHead, "%q", `"UPDATE"`, 1) + `"data":[` + canalAfter + `],"old":[{"name":"pen","tag":"1"}]}`},
		{"canal-json", "d", before, nil, strings.Replace(canalHead, "%q", `"DELETE"`, 1) + `"data":[` + canalBefore + `],"old":null}`},
		{"canal-json", "r", nil, snap, strings.Replace(canalHead, "%q", `"INSERT"`, 1) + `"data":[` + canalBefore + `],"old":null}`},
	}
	for _, c := range cases {
		t.Run(c.format+"/"+c.op, func(t *testing.T) {
			ev, err := encEncoder(t, c.format).Row(encSchema(t), c.op, c.before, c.after, encPos)
			if err != nil {
				t.Fatal(err)
			}
			if string(ev.Value) != c.want {
				t.Errorf("value\n got %s\nwant %s", ev.Value, c.want)
			}
			if !json.Valid(ev.Value) || !json.Valid(ev.Key) {
				t.Errorf("invalid JSON: key %s value %s", ev.Key, ev.Value)
			}
			if string(ev.Key) != `{"id":7}` {
				t.Errorf("key = %s, want {\"id\":7}", ev.Key)
			}
			if ev.ID != "mysql-01:mariadb-bin.000003:1234:1" || ev.DB != "shop" || ev.Table != "orders" || ev.Op != c.op {
				t.Errorf("event = %+v", ev)
			}
		})
	}
}

// TestEncodeRowKey checks that a composite key is written in key order
// with the value encoding, from the before image of a delete, and that a
// table without a key has null pkNames in canal-json.
func TestEncodeRowKey(t *testing.T) {
	s := encSchema(t)
	s.RowKey, s.KeyReason, s.RowKeyIndex = []int{3, 1}, sqlschema.KeyUnique, "uk"
	row := []any{int32(7), "pen", int64(5), int64(2)}
	ev, err := encEncoder(t, "debezium").Row(s, "d", row, nil, encPos)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"tag":"b","name":"pen"}`; string(ev.Key) != want {
		t.Errorf("key = %s, want %s", ev.Key, want)
	}
	s.RowKey, s.KeyReason, s.RowKeyIndex = []int{0, 1, 2, 3}, sqlschema.KeyNone, ""
	ev, err = encEncoder(t, "canal-json").Row(s, "c", nil, row, encPos)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":7,"name":"pen","qty":5,"tag":"b"}`; string(ev.Key) != want {
		t.Errorf("key = %s, want %s", ev.Key, want)
	}
	if !strings.Contains(string(ev.Value), `"pkNames":null,`) || !strings.Contains(string(ev.Value), `"qty":-5`) {
		t.Errorf("canal value %s: want null pkNames and sqlType BIGINT (-5) for a qty within the signed range", ev.Value)
	}
}

// TestEncodeDDL checks DDL events in both formats.
func TestEncodeDDL(t *testing.T) {
	pos := encPos
	pos.Row, pos.GTID = 0, ""
	for _, c := range []struct{ format, want string }{
		{"debezium", `{"ddl":"ALTER TABLE orders ADD c INT","op":"ddl","ts_ms":1764547200123,"source":{"name":"mysql-01","db":"shop",` +
			`"table":"orders","file":"mariadb-bin.000003","pos":1234,"row":0,"gtid":null,"server_id":1,"ts_ms":1764547200000,"snapshot":false}}`},
		{"canal-json", `{"id":0,"database":"shop","table":"orders","pkNames":null,"isDdl":true,"type":"QUERY","es":1764547200000,` +
			`"ts":1764547200123,"sql":"ALTER TABLE orders ADD c INT","sqlType":null,"mysqlType":null,"data":null,"old":null}`},
	} {
		ev, err := encEncoder(t, c.format).DDL("shop", "orders", "ALTER TABLE orders ADD c INT", pos)
		if err != nil {
			t.Fatal(err)
		}
		if string(ev.Value) != c.want {
			t.Errorf("%s value\n got %s\nwant %s", c.format, ev.Value, c.want)
		}
		if string(ev.Key) != `{"db":"shop","table":"orders"}` || ev.Op != "ddl" || ev.ID != "mysql-01:mariadb-bin.000003:1234:0" {
			t.Errorf("%s event = %+v key %s", c.format, ev, ev.Key)
		}
	}
}

// TestEncodeRowErrors checks the refusals: unknown op, missing image,
// short image (no FULL row image), a bad value naming table and column.
func TestEncodeRowErrors(t *testing.T) {
	e := encEncoder(t, "debezium")
	row := []any{int32(7), "pen", int64(5), int64(2)}
	cases := []struct {
		name          string
		op            string
		before, after []any
		want          string
	}{
		{"unknown op", "x", nil, row, `unknown row operation "x"`},
		{"insert without after", "c", row, nil, `operation "c" without its row image`},
		{"update without before", "u", nil, row, `operation "u" without its row image`},
		{"short image", "c", nil, row[:2], "row image has 2 of 4 columns; the source needs binlog_row_image=FULL"},
		{"bad value", "c", nil, []any{int32(7), "pen", 1.5, int64(2)}, "encode a row of shop.orders: column qty (bigint(20) unsigned)"},
	}
	for _, c := range cases {
		_, err := e.Row(encSchema(t), c.op, c.before, c.after, encPos)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "shop.orders") {
			t.Errorf("%s: error = %v, want one naming shop.orders and saying %q", c.name, err, c.want)
		}
	}
}

// TestEncoderFormats checks format names.
func TestEncoderFormats(t *testing.T) {
	for in, want := range map[string]string{"": "debezium", "debezium": "debezium", "canal-json": "canal-json"} {
		e, err := NewEncoder("s", in)
		if err != nil || e.Format() != want {
			t.Errorf("NewEncoder(%q) = %v, %v; want format %q", in, e, err, want)
		}
	}
	if _, err := NewEncoder("s", "avro"); err == nil || !strings.Contains(err.Error(), `"avro"`) {
		t.Errorf("NewEncoder(avro) error = %v, want one naming the format", err)
	}
}

func TestEventID(t *testing.T) {
	got := EventID("mysql-01", Position{File: "mariadb-bin.000001", Pos: 4294967295, Row: 12})
	if want := "mysql-01:mariadb-bin.000001:4294967295:12"; got != want {
		t.Errorf("EventID = %q, want %q", got, want)
	}
}
