package sqlschema

import (
	"database/sql"
	"testing"

	"go.uber.org/goleak"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// database/sql pools the harness closes in Cleanup may still be
		// winding down their connection openers when the process ends.
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}

// session is one root connection to inst that reads as the units do: the
// text protocol without parsed times, results in charset names ("binary"
// for raw bytes), UTC.
func session(t *testing.T, inst *mariadbtest.Instance, names string) *sql.Conn {
	t.Helper()
	return inst.Session(t, "SET NAMES "+names, "SET time_zone = '+00:00'", "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
}
