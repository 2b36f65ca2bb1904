package stream

import (
	"fmt"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
)

// TestReadErrorResumability: a source that has not reached the stream's
// GTID set yet (a lagging replica after a failover) is retried; purged
// binlog is not.
func TestReadErrorResumability(t *testing.T) {
	task := &Task{name: "s1"}
	at := binlog.Location{Name: "mariadb-bin.000002", Pos: 4, GTID: "0-101-158"}
	for _, tt := range []struct {
		msg       string
		resumable bool
	}{
		{"Error: connecting slave requested to start from GTID 0-101-158, which is not in the master's binlog", true},
		{"Could not find GTID state requested by slave in any binlog files. Probably the slave state is too old and required binlog files have been purged.", false},
	} {
		err := task.readError(fmt.Errorf("read: %w", &mysql.MyError{Code: 1236, Message: tt.msg}), at)
		if errs.Code(err) != CodeReadBinlog || errs.IsResumable(err) != tt.resumable {
			t.Errorf("%q: code %s resumable %v; want %s, %v", tt.msg, errs.Code(err), errs.IsResumable(err), CodeReadBinlog, tt.resumable)
		}
	}
}
