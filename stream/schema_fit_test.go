package stream

import (
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

func fitTestSchema() *sqlschema.Table {
	return &sqlschema.Table{Schema: "shop", Name: "orders", KeyReason: sqlschema.KeyPrimary, RowKeyIndex: "PRIMARY", RowKey: []int{0},
		Columns: []sqlschema.Column{{Name: "id"}, {Name: "qty"}, {Name: "note"}, {Name: "status"}}}
}

func names(s *sqlschema.Table) string {
	var out []string
	for _, c := range s.Columns {
		out = append(out, c.Name)
	}
	return strings.Join(out, ",")
}

func TestFitSchema(t *testing.T) {
	s := fitTestSchema()
	if got, err := fitSchema(s, &replication.TableMapEvent{ColumnCount: 4}); err != nil || got != s {
		t.Fatalf("same count: %v, %v; want the schema itself", got, err)
	}
	// Rows written before ADD COLUMN status: the first three columns.
	got, err := fitSchema(s, &replication.TableMapEvent{ColumnCount: 3})
	if err != nil || names(got) != "id,qty,note" || len(got.RowKey) != 1 || got.RowKey[0] != 0 || !got.HasPK() {
		t.Fatalf("prefix: %+v, %v", got, err)
	}
	// Named columns (binlog_row_metadata=FULL) are picked by name, and the
	// key follows them.
	got, err = fitSchema(s, &replication.TableMapEvent{ColumnCount: 2, ColumnName: [][]byte{[]byte("note"), []byte("id")}})
	if err != nil || names(got) != "note,id" || len(got.RowKey) != 1 || got.RowKey[0] != 1 {
		t.Fatalf("by name: %+v, %v", got, err)
	}
	// Without the key column, every kept column is the key.
	got, err = fitSchema(s, &replication.TableMapEvent{ColumnCount: 2, ColumnName: [][]byte{[]byte("qty"), []byte("note")}})
	if err != nil || len(got.RowKey) != 2 || got.HasPK() || got.RowKeyIndex != "" {
		t.Fatalf("no key column: %+v, %v", got, err)
	}
	// More columns than the table has now: a column was dropped since.
	if _, err := fitSchema(s, &replication.TableMapEvent{ColumnCount: 5}); err == nil || !strings.Contains(err.Error(), "binlog_row_metadata=FULL") {
		t.Fatalf("dropped column: %v", err)
	}
	if _, err := fitSchema(s, &replication.TableMapEvent{ColumnCount: 1, ColumnName: [][]byte{[]byte("gone")}}); err == nil || !strings.Contains(err.Error(), `"gone"`) {
		t.Fatalf("unknown named column: %v", err)
	}
	if len(s.Columns) != 4 || s.RowKey[0] != 0 {
		t.Fatal("fitSchema changed the cached schema")
	}
}
