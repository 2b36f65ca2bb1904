package worker

import (
	"reflect"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/onlineddl"
	"github.com/dmworker/dm-worker/stream"
)

// TestStreamCheckpointMirror: a checkpoint inside a transaction and one at
// a boundary survive the trip through their etcd mirror, so a stream
// deployed on another worker resumes inside the transaction too, and with
// the records of an online schema change under way.
func TestStreamCheckpointMirror(t *testing.T) {
	at := time.Date(2026, 12, 2, 1, 24, 27, 0, time.UTC)
	loc := binlog.Location{Name: "mariadb-bin.000001", Pos: 222912405, GTID: "0-101-26"}
	for _, cp := range []stream.Checkpoint{
		{Location: loc, SnapshotDone: true, Time: at},
		{Location: loc, SnapshotDone: true, Time: at, Txn: &stream.TxnProgress{
			File: "mariadb-bin.000001", Pos: 458363343, Row: 35, Delete: true, GTID: "0-101-27", Events: 1056096}},
		// The records of an online schema change under way.
		{Location: loc, SnapshotDone: true, Time: at, OnlineDDL: []stream.OnlineDDLRecord{{Schema: "app", Real: "t", Shadow: "_t_gho",
			Stmts: []onlineddl.Stmt{{At: "mariadb-bin.000001:4000", SQL: "ALTER TABLE `app`.`t` ADD COLUMN `c2` INT"}}}}},
	} {
		m := mirrorOf(cp)
		if (m.Txn == nil) != (cp.Txn == nil) {
			t.Errorf("mirror of %+v: txn %+v", cp, m.Txn)
		}
		if got := fromMirror(m); !reflect.DeepEqual(got, cp) {
			t.Errorf("checkpoint %+v came back from its mirror %+v as %+v", cp, m, got)
		}
	}
}
