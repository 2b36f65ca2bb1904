package binlog

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
)

// RowsKind is the kind of row change a rows event carries.
type RowsKind int

// The row change kinds.
const (
	RowsInsert RowsKind = iota + 1
	RowsUpdate
	RowsDelete
)

// RowsEventKind maps a rows event type (every version, MariaDB's compressed
// ones included) to its change kind; false for other event types.
func RowsEventKind(t replication.EventType) (RowsKind, bool) {
	switch t {
	case replication.WRITE_ROWS_EVENTv0, replication.WRITE_ROWS_EVENTv1, replication.WRITE_ROWS_EVENTv2,
		replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1:
		return RowsInsert, true
	case replication.UPDATE_ROWS_EVENTv0, replication.UPDATE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv2,
		replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1, replication.PARTIAL_UPDATE_ROWS_EVENT:
		return RowsUpdate, true
	case replication.DELETE_ROWS_EVENTv0, replication.DELETE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv2,
		replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1:
		return RowsDelete, true
	}
	return 0, false
}

// MariadbGTID reads a MariaDB GTID event's GTID ("domain-server-seq") and
// whether the event group is standalone (no BEGIN/COMMIT or XID follows)
// from the event's raw bytes: go-mysql's decoded fields can be wrong for
// the first event after StartSyncGTID (DESIGN.md §8).
func MariadbGTID(ev *replication.BinlogEvent) (gtid string, standalone bool, err error) {
	const headerSize = replication.EventHeaderSize
	raw := ev.RawData
	if len(raw) < headerSize+13 {
		return "", false, fmt.Errorf("binlog: MariaDB GTID event of %d bytes is too short", len(raw))
	}
	body := raw[headerSize:]
	seq := binary.LittleEndian.Uint64(body[0:8])
	domain := binary.LittleEndian.Uint32(body[8:12])
	flags := body[12]
	return fmt.Sprintf("%d-%d-%d", domain, ev.Header.ServerID, seq), flags&replication.BINLOG_MARIADB_FL_STANDALONE != 0, nil
}

// MySQLGTID formats a MySQL GTID event as "uuid:gno" ("" for an event
// without a 16-byte source id).
func MySQLGTID(e *replication.GTIDEvent) string {
	u := e.SID
	if len(u) != 16 {
		return ""
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x:%d", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16], e.GNO)
}

// Decoding sets in cfg how this worker decodes row images: temporal
// values as text (TIMESTAMP in UTC), DECIMAL as decimal.Decimal. Every
// binlog reader of the worker decodes so (upstream.NewOpener), and tests
// that reproduce its row images too (mariadbtest.Instance.BinlogSyncer).
func Decoding(cfg *replication.BinlogSyncerConfig) {
	cfg.ParseTime = false
	cfg.TimestampStringLocation = time.UTC
	cfg.UseDecimal = true
}
