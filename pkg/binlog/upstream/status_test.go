package upstream

import (
	"errors"
	"testing"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestMasterStatus reads the file and position of a source, through a pool
// and through one connection, and says ErrNoBinlog for a server without a
// binary log.
func TestMasterStatus(t *testing.T) {
	src := mariadbtest.StartSource(t)
	src.Exec(t, "CREATE DATABASE d")
	file, pos, _ := src.MasterStatus(t)
	db := src.DB(t)
	loc, err := MasterStatus(t.Context(), db)
	if err != nil || loc.Name != file || loc.Pos != pos || loc.GTID != "" {
		t.Fatalf("MasterStatus = %v %q, %v; want %s:%d", loc, loc.GTID, err, file, pos)
	}
	c, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if loc, err := MasterStatus(t.Context(), c); err != nil || loc.Name != file || loc.Pos != pos {
		t.Fatalf("MasterStatus on a connection = %v, %v", loc, err)
	}
	if _, err := MasterStatus(t.Context(), mariadbtest.StartTarget(t).DB(t)); !errors.Is(err, ErrNoBinlog) {
		t.Fatalf("MasterStatus without a binlog: %v, want ErrNoBinlog", err)
	}
}
