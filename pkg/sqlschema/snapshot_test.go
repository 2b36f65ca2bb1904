package sqlschema

import (
	"errors"
	"testing"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestBeginSnapshot checks that the snapshot's location is the binlog
// position of what it sees, with its GTID position, and the errors of a
// source without binlog and of a position the source does not find.
func TestBeginSnapshot(t *testing.T) {
	inst := mariadbtest.Start(t, mariadbtest.Options{Name: "snap", Binlog: true, FastCommit: true})
	inst.Exec(t, "CREATE DATABASE s")
	inst.Exec(t, "CREATE TABLE s.t (id INT PRIMARY KEY)")
	inst.Exec(t, "INSERT INTO s.t VALUES (1)")
	file, pos, gtid := inst.MasterStatus(t)

	c := session(t, inst, "binary")
	loc, err := BeginSnapshot(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if want := (binlog.Location{Name: file, Pos: pos, GTID: gtid}); loc != want {
		t.Errorf("BeginSnapshot = %+v, want %+v", loc, want)
	}
	inst.Exec(t, "INSERT INTO s.t VALUES (2)")
	if n, err := QueryStrings(t.Context(), c, "SELECT COUNT(*) FROM s.t"); err != nil || len(n) != 1 || n[0] != "1" {
		t.Errorf("the snapshot sees %v rows (%v), want the 1 before its location", n, err)
	}

	if _, err := gtidPos(t.Context(), c, binlog.Location{Name: "mariadb-bin.999999", Pos: 4}); !errors.Is(err, ErrSnapshotGTIDUnknown) {
		t.Errorf("gtidPos of a file the source does not have: %v, want ErrSnapshotGTIDUnknown", err)
	}

	off := mariadbtest.Start(t, mariadbtest.Options{Name: "snap-nobinlog", FastCommit: true})
	if _, err := BeginSnapshot(t.Context(), session(t, off, "binary")); !errors.Is(err, ErrSnapshotBinlogOff) {
		t.Errorf("BeginSnapshot without binlog: %v, want ErrSnapshotBinlogOff", err)
	}
}
