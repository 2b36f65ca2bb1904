package sqlschema

import (
	"database/sql"
	"net"
	"strconv"
	"testing"

	"github.com/go-sql-driver/mysql"
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
// for raw bytes), UTC. Pool and connection are closed in Cleanup.
func session(t *testing.T, inst *mariadbtest.Instance, names string) *sql.Conn {
	t.Helper()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net = mariadbtest.RootUser, "tcp"
	cfg.Addr = net.JoinHostPort(inst.Host(), strconv.Itoa(inst.Port()))
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(connector)
	t.Cleanup(func() { _ = db.Close() })
	c, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	for _, q := range []string{"SET NAMES " + names, "SET time_zone = '+00:00'", "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"} {
		if _, err := c.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	return c
}
