package mariadbtest

import (
	"io"
	"log/slog"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/binlog"
)

// BinlogSyncer is a binlog client of the instance as SourceUser with
// replica id serverID, decoding rows as the worker's readers do
// (binlog.Decoding). The caller closes it.
func (i *Instance) BinlogSyncer(serverID uint32) *replication.BinlogSyncer {
	cfg := replication.BinlogSyncerConfig{
		ServerID: serverID, Flavor: gomysql.MariaDBFlavor,
		Host: i.Host(), Port: uint16(i.Port()), User: SourceUser, Password: SourcePassword,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	binlog.Decoding(&cfg)
	return replication.NewBinlogSyncer(cfg)
}
