package stream

import (
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// benchBulkSchema is TestStreamWorkerBulk's table: (id BIGINT PRIMARY KEY,
// k INT, c VARCHAR(255)).
func benchBulkSchema(b *testing.B) *sqlschema.Table {
	cols := []sqlschema.Column{
		encColumn(b, "bigint", "bigint(20)", ""),
		encColumn(b, "int", "int(11)", ""),
		encColumn(b, "varchar", "varchar(255)", "utf8mb4"),
	}
	for i, name := range []string{"id", "k", "c"} {
		cols[i].Name = name
	}
	return &sqlschema.Table{Schema: "swbench", Name: "bulk", Columns: cols, RowKey: []int{0}, KeyReason: sqlschema.KeyPrimary, RowKeyIndex: "PRIMARY"}
}

// BenchmarkEncodeBulkUpdate encodes updates of the bulk benchmark's rows
// through an arena, as the stream reader does (one rows event of 40 rows
// per 40 iterations).
func BenchmarkEncodeBulkUpdate(b *testing.B) {
	s := benchBulkSchema(b)
	e := encEncoder(b, FormatDebezium)
	c := strings.Repeat("abcdefghij", 20)
	var a arena
	pos := encPos
	rows := make([][]any, 80) // one rows event: before and after images
	for i := range 40 {
		rows[2*i] = []any{int64(100000 + i), int32(i % 1000), c}
		rows[2*i+1] = []any{int64(100000 + i), int32(i%1000 + 1), c}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		pos.Pos, pos.Row = uint32(1000+i/40*8000), i%40
		if _, _, _, err := e.update(&a, s, rows[2*(i%40)], rows[2*(i%40)+1], pos); err != nil {
			b.Fatal(err)
		}
	}
}
