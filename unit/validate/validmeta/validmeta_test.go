package validmeta_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/validate/validmeta"
)

// TestRemoveTask creates the tables (twice: the statements are idempotent),
// writes a checkpoint and an error for several tasks and sources, with the
// longest names the columns take, and checks that RemoveTask deletes
// exactly one task's rows, on every source.
func TestRemoveTask(t *testing.T) {
	db := mariadbtest.StartTarget(t).DB(t)
	ctx := context.Background()
	const schema = "dm_meta_v"

	// No tables yet: nothing to remove, no error.
	if got, err := validmeta.RemoveTask(ctx, db, schema, "t1"); err != nil || len(got) != 0 {
		t.Fatalf("RemoveTask before any table: %v, %v", got, err)
	}
	for range 2 {
		mariadbtest.MustExec(t, db, validmeta.CreateStatements(schema)...)
	}
	long := "z" + strings.Repeat("x", 127) // the longest task and source name (DESIGN.md §2)
	longTable := strings.Repeat("😀", 256)  // 4 bytes each: the unique key holds only its hash
	for _, k := range []struct{ task, source string }{{"t1", "s1"}, {"t1", "s2"}, {"t2", "s1"}, {"t10", "s1"}, {long, long}} {
		if _, err := db.ExecContext(ctx, "INSERT INTO `dm_meta_v`.`validator_checkpoint` (task, source, binlog_name, binlog_pos, binlog_gtid, rows_checked) VALUES (?,?,?,?,?,?)",
			k.task, k.source, "mariadb-bin.000001", 4, "0-1-1", 10); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO `dm_meta_v`.`validator_error` (task, source, src_table, target_table, table_hash, row_key, key_hash, kind, state, binlog_name, binlog_pos) "+
			"VALUES (?,?,?,?,UNHEX(SHA1(?)),?,UNHEX(SHA1(?)),'missing','new',?,?)",
			k.task, k.source, longTable, longTable, longTable, `{"id":"1"}`, `{"id":"1"}`, strings.Repeat("b", 255), 4294967295); err != nil {
			t.Fatal(err)
		}
	}

	got, err := validmeta.RemoveTask(ctx, db, schema, "t1")
	if err != nil {
		t.Fatal(err)
	}
	want := []validmeta.Removed{
		{Table: "`dm_meta_v`.`validator_checkpoint`", Rows: 2, Sources: []string{"s1", "s2"}},
		{Table: "`dm_meta_v`.`validator_error`", Rows: 2, Sources: []string{"s1", "s2"}},
	}
	if !slices.EqualFunc(got, want, func(a, b validmeta.Removed) bool {
		return a.Table == b.Table && a.Rows == b.Rows && slices.Equal(a.Sources, b.Sources)
	}) {
		t.Errorf("RemoveTask(t1) = %+v, want %+v", got, want)
	}
	for _, table := range validmeta.Tables {
		rows, err := mariadbtest.QueryRows(ctx, db, "SELECT task, source FROM `dm_meta_v`.`"+table+"` ORDER BY task")
		if err != nil {
			t.Fatal(err)
		}
		wantRows := []string{`"t10"|"s1"|`, `"t2"|"s1"|`, `"` + long + `"|"` + long + `"|`}
		if !slices.Equal(rows, wantRows) {
			t.Errorf("%s after RemoveTask(t1) = %q, want %q", table, rows, wantRows)
		}
	}
	// Again: nothing left of t1.
	if got, err := validmeta.RemoveTask(ctx, db, schema, "t1"); err != nil || len(got) != 0 {
		t.Errorf("second RemoveTask(t1) = %+v, %v", got, err)
	}
}
