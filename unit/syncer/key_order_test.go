package syncer

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// TestRowKeyInServerKeyOrder: a table without a primary key and with two
// NOT NULL unique keys whose names sort opposite to their definition order
// is matched on the first key in the server's key order (z_a, on a: the key
// InnoDB clusters the table on and the one sqlschema picks), not on the
// first by name (a_b, on b), which the sync unit's own reader used to pick.
//
// The source writes binlog_row_metadata=MINIMAL, so the table map carries
// no primary key and the key comes from the target's model. (With FULL the
// table map names z_a as the primary key: the server promotes the first
// NOT NULL unique key in its key order, which agrees.) The target row is
// changed behind the unit's back in the column of a_b, then the source
// updates that column: matched on a the UPDATE finds the row and the
// target ends equal to the source; matched on b it would find nothing and
// the target would keep the changed row.
func TestRowKeyInServerKeyOrder(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true, ExtraConfig: []string{"binlog_row_metadata=MINIMAL"}})
	cfg, src := e.configs(t, "keyorder")
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app",
		"CREATE TABLE app.uk (a INT NOT NULL, b INT NOT NULL, v INT, UNIQUE KEY z_a (a), UNIQUE KEY a_b (b))")
	u := newUnit(t, cfg, src)
	defer u.Close()
	r := unittest.Start(u, false, 0)
	mariadbtest.MustExec(t, e.srcDB, "INSERT INTO app.uk VALUES (1, 10, 1), (2, 20, 2)")
	e.waitEqual(t, same("app.uk"), r)

	// The row model the sync unit builds for the table from the target's.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tm := &replication.TableMapEvent{Schema: []byte("app"), Table: []byte("uk"), ColumnCount: 3,
		ColumnType: []byte{mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONG},
		ColumnMeta: []uint16{0, 0, 0}, ColumnName: [][]byte{[]byte("a"), []byte("b"), []byte("v")}}
	ti, err := newTableCache(e.dstDB, filter.NewRouter(nil, "", false)).get(ctx, tm)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ti.Key, []int{0}) || ti.Model.RowKeyIndex != "z_a" {
		t.Fatalf("row key = %v (target row key %q), want [0] (column a, key z_a)", ti.Key, ti.Model.RowKeyIndex)
	}
	if want := [][]int{{0}, {1}}; !slices.EqualFunc(ti.Uniques, want, slices.Equal) {
		t.Errorf("unique keys = %v, want %v", ti.Uniques, want)
	}
	stmts := statements([]*change{{kind: kindUpdate, table: ti,
		before: []any{int64(1), int64(10), int64(1)}, after: []any{int64(1), int64(11), int64(1)}}})
	if len(stmts) != 1 || !strings.Contains(stmts[0].sql, " WHERE `a`=? ") {
		t.Fatalf("statements of an update = %+v, want one UPDATE ... WHERE `a`=?", stmts)
	}

	mariadbtest.MustExec(t, e.dstDB, "UPDATE app.uk SET b = 100 WHERE a = 1")
	mariadbtest.MustExec(t, e.srcDB, "UPDATE app.uk SET b = 11 WHERE a = 1")
	e.waitEqual(t, same("app.uk"), r)
	if res := r.Stop(t); res.Failed() {
		t.Fatalf("sync unit: %+v", res)
	}
}
