//go:build bench

package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// nativeTimeout bounds one native catch-up.
const nativeTimeout = 30 * time.Minute

// nativeCatchUp replicates src's binlog from start into tgt with MariaDB's own replication and
// returns the time from START SLAVE until the SQL thread has executed up to end.
func nativeCatchUp(t *testing.T, ctx context.Context, src *mariadbtest.Instance, tgt *target, start, end binlog.Location) time.Duration {
	t.Helper()
	db := tgt.db
	execAll(t, ctx, db, fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='%s', "+
		"MASTER_PASSWORD='%s', MASTER_LOG_FILE='%s', MASTER_LOG_POS=%d, MASTER_USE_GTID=no",
		src.Host(), src.Port(), mariadbtest.SourceUser, mariadbtest.SourcePassword, start.Name, start.Pos))
	began := time.Now()
	execAll(t, ctx, db, "START SLAVE")
	var elapsed time.Duration
	testutil.Eventually(t, nativeTimeout, fmt.Sprintf("native replication into %s executes up to %s", tgt.inst.Name(), end), func() error {
		st := slaveStatus(t, ctx, db)
		pos, err := strconv.ParseUint(st["Exec_Master_Log_Pos"], 10, 32)
		if err != nil {
			t.Fatalf("SHOW SLAVE STATUS: Exec_Master_Log_Pos %q: %v", st["Exec_Master_Log_Pos"], err)
		}
		if (binlog.Location{Name: st["Relay_Master_Log_File"], Pos: uint32(pos)}).Compare(end) >= 0 {
			elapsed = time.Since(began)
			return nil
		}
		if st["Last_SQL_Errno"] != "0" || st["Last_IO_Errno"] != "0" {
			t.Fatalf("native replication into %s failed: SQL error %s %q, IO error %s %q", tgt.inst.Name(),
				st["Last_SQL_Errno"], st["Last_SQL_Error"], st["Last_IO_Errno"], st["Last_IO_Error"])
		}
		return fmt.Errorf("executed only up to %s:%s", st["Relay_Master_Log_File"], st["Exec_Master_Log_Pos"])
	})
	execAll(t, ctx, db, "STOP SLAVE")
	return elapsed
}

// slaveStatus returns SHOW SLAVE STATUS as column name -> text.
func slaveStatus(t *testing.T, ctx context.Context, db *sql.DB) map[string]string {
	t.Helper()
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		t.Fatalf("SHOW SLAVE STATUS: %v", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatalf("SHOW SLAVE STATUS: %v", err)
	}
	if !rows.Next() {
		t.Fatalf("SHOW SLAVE STATUS returned no row (err %v)", rows.Err())
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatalf("SHOW SLAVE STATUS: %v", err)
	}
	out := make(map[string]string, len(cols))
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out
}
