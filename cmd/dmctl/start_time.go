package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/google/uuid"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/dbconn"
)

// Why a start time cannot be resolved.
var (
	errBeforeOldest = errors.New("the start time is before the oldest binlog file of the source")
	errAfterNewest  = errors.New("the start time is after the newest binlog event of the source")
)

// binlogFile is one row of SHOW BINARY LOGS.
type binlogFile struct {
	name string
	size int64
}

// timeFinder finds, in one source's binlog, where the first event group
// (transaction or DDL) at or after a time starts. It reads the binlog over a
// replication connection of its own (the header timestamps are only there;
// SHOW BINLOG EVENTS has none): a binary search over the files by the
// timestamp of their first event (the format description, written when
// the file was opened), then a scan from the last file opened before the
// time.
type timeFinder struct {
	db      *sql.DB // for SHOW BINARY LOGS and SHOW MASTER STATUS
	syncCfg replication.BinlogSyncerConfig
	flavor  string
	// gtid asks for the GTID set executed before the location.
	gtid bool
}

// find returns the location of the first event group whose timestamp is at
// or after at (second precision, as binlog timestamps), with its GTID set
// when f.gtid is set.
func (f *timeFinder) find(ctx context.Context, at time.Time) (binlog.Location, error) {
	target := at.Unix()
	files, err := showBinaryLogs(ctx, f.db)
	if err != nil {
		return binlog.Location{}, err
	}
	end, err := masterEnd(ctx, f.db)
	if err != nil {
		return binlog.Location{}, err
	}
	// The last file opened strictly before target: events of target's
	// second may end the file before the first one opened at target.
	lo, hi := 0, len(files)-1
	start := -1
	var firstStart int64
	for lo <= hi {
		mid := (lo + hi) / 2
		ts, err := f.fileStart(ctx, files[mid].name)
		if err != nil {
			return binlog.Location{}, err
		}
		if mid == 0 {
			firstStart = ts
		}
		if ts < target {
			start, lo = mid, mid+1
		} else {
			hi = mid - 1
		}
	}
	if start < 0 {
		if firstStart == 0 {
			if firstStart, err = f.fileStart(ctx, files[0].name); err != nil {
				return binlog.Location{}, err
			}
		}
		if firstStart > target {
			return binlog.Location{}, fmt.Errorf("%w: its oldest binlog file %s was opened at %s (older files purged, or binlog off before); choose a later time",
				errBeforeOldest, files[0].name, time.Unix(firstStart, 0).UTC().Format(time.RFC3339))
		}
		start = 0
	}
	return f.scan(ctx, files[start].name, end, target)
}

// fileStart returns the timestamp of the first real event of file (its
// format description event).
func (f *timeFinder) fileStart(ctx context.Context, file string) (int64, error) {
	s := replication.NewBinlogSyncer(f.syncCfg)
	defer s.Close()
	st, err := s.StartSync(mysql.Position{Name: file, Pos: 4})
	if err != nil {
		return 0, fmt.Errorf("read binlog file %s: %w", file, err)
	}
	for {
		ev, err := st.GetEvent(ctx)
		if err != nil {
			return 0, fmt.Errorf("read binlog file %s: %w", file, err)
		}
		if ev.Header.Timestamp != 0 && ev.Header.LogPos != 0 {
			return int64(ev.Header.Timestamp), nil
		}
	}
}

// scan reads from the start of file up to end and returns the start of the
// first event group at or after target.
func (f *timeFinder) scan(ctx context.Context, file string, end mysql.Position, target int64) (binlog.Location, error) {
	s := replication.NewBinlogSyncer(f.syncCfg)
	defer s.Close()
	st, err := s.StartSync(mysql.Position{Name: file, Pos: 4})
	if err != nil {
		return binlog.Location{}, fmt.Errorf("read binlog from %s: %w", file, err)
	}
	g := newGTIDTracker(f.flavor)
	cur := file
	sawGTIDEvents, inTxn := false, false
	var last int64
	for {
		ev, err := st.GetEvent(ctx)
		if err != nil {
			return binlog.Location{}, fmt.Errorf("read binlog of %s: %w", cur, err)
		}
		h := ev.Header
		// A real rotate ends the file it is in; the next event is in the
		// file it names. A fake one (no position) names the file to come.
		next := ""
		if re, ok := ev.Event.(*replication.RotateEvent); ok {
			if h.Timestamp == 0 || h.LogPos == 0 {
				cur = string(re.NextLogName)
				continue
			}
			next = string(re.NextLogName)
		}
		begins := false
		switch e := ev.Event.(type) {
		case *replication.MariadbGTIDEvent, *replication.GTIDEvent:
			sawGTIDEvents, begins = true, true
		case *replication.QueryEvent:
			// Servers without GTID events: BEGIN opens a transaction, a
			// statement outside one is a DDL on its own.
			if !sawGTIDEvents {
				switch q := string(e.Query); {
				case q == "BEGIN":
					begins, inTxn = true, true
				case q == "COMMIT":
					inTxn = false
				default:
					begins = !inTxn
				}
			}
		case *replication.XIDEvent:
			inTxn = false
		}
		if h.EventType == replication.ANONYMOUS_GTID_EVENT {
			sawGTIDEvents, begins = true, true
		}
		if begins && int64(h.Timestamp) >= target {
			return binlog.Location{Name: cur, Pos: h.LogPos - h.EventSize, GTID: g.String(f.gtid)}, nil
		}
		if int64(h.Timestamp) > last {
			last = int64(h.Timestamp)
		}
		if err := g.add(ev); err != nil {
			return binlog.Location{}, fmt.Errorf("binlog %s:%d: %w", cur, h.LogPos-h.EventSize, err)
		}
		if cur == end.Name && h.LogPos >= end.Pos {
			return binlog.Location{}, fmt.Errorf("%w: its newest event (%s:%d) is from %s; choose an earlier time",
				errAfterNewest, cur, h.LogPos, time.Unix(last, 0).UTC().Format(time.RFC3339))
		}
		if next != "" {
			cur = next
		}
	}
}

// showBinaryLogs lists the source's binlog files, oldest first.
func showBinaryLogs(ctx context.Context, db *sql.DB) ([]binlogFile, error) {
	rows, err := db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		return nil, fmt.Errorf("SHOW BINARY LOGS: %w (the source needs log_bin on and the REPLICATION CLIENT privilege)", err)
	}
	cols, err := rows.Columns()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("SHOW BINARY LOGS: %w", err), rows.Close())
	}
	var out []binlogFile
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, errors.Join(fmt.Errorf("SHOW BINARY LOGS: %w", err), rows.Close())
		}
		f := binlogFile{name: string(vals[0])}
		if len(vals) > 1 {
			f.size, _ = strconv.ParseInt(string(vals[1]), 10, 64)
		}
		out = append(out, f)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("SHOW BINARY LOGS: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("SHOW BINARY LOGS lists no file: the source has no binlog (log_bin off?)")
	}
	return out, nil
}

// masterEnd returns the source's current binlog end (SHOW MASTER STATUS).
func masterEnd(ctx context.Context, db *sql.DB) (mysql.Position, error) {
	rows, err := db.QueryContext(ctx, "SHOW MASTER STATUS")
	if err != nil {
		// MySQL 8.4 renamed it.
		var err2 error
		if rows, err2 = db.QueryContext(ctx, "SHOW BINARY LOG STATUS"); err2 != nil {
			return mysql.Position{}, fmt.Errorf("SHOW MASTER STATUS: %w (the source user needs REPLICATION CLIENT)", err)
		}
	}
	cols, err := rows.Columns()
	if err != nil {
		return mysql.Position{}, errors.Join(fmt.Errorf("SHOW MASTER STATUS: %w", err), rows.Close())
	}
	var pos mysql.Position
	found := false
	if rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return mysql.Position{}, errors.Join(fmt.Errorf("SHOW MASTER STATUS: %w", err), rows.Close())
		}
		p, err := strconv.ParseUint(string(vals[1]), 10, 32)
		if err != nil {
			return mysql.Position{}, errors.Join(fmt.Errorf("SHOW MASTER STATUS: position %q: %w", vals[1], err), rows.Close())
		}
		pos, found = mysql.Position{Name: string(vals[0]), Pos: uint32(p)}, true
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return mysql.Position{}, fmt.Errorf("SHOW MASTER STATUS: %w", err)
	}
	if !found {
		return mysql.Position{}, errors.New("SHOW MASTER STATUS returned no row: the source has no binlog (log_bin off?)")
	}
	return pos, nil
}

// gtidTracker follows the GTID set executed before the current event: the
// set a file starts with (MariaDB's GTID list, MySQL's previous GTIDs)
// plus every GTID event since.
type gtidTracker struct {
	flavor string
	// mariadb holds the last GTID per domain (the form of gtid_slave_pos).
	mariadb map[uint32]mysql.MariadbGTID
	mysql   *mysql.MysqlGTIDSet
}

func newGTIDTracker(flavor string) *gtidTracker {
	return &gtidTracker{flavor: flavor, mariadb: make(map[uint32]mysql.MariadbGTID)}
}

func (g *gtidTracker) add(ev *replication.BinlogEvent) error {
	switch e := ev.Event.(type) {
	case *replication.MariadbGTIDListEvent:
		clear(g.mariadb)
		for _, id := range e.GTIDs {
			if o, ok := g.mariadb[id.DomainID]; !ok || id.SequenceNumber > o.SequenceNumber {
				g.mariadb[id.DomainID] = id
			}
		}
	case *replication.MariadbGTIDEvent:
		g.mariadb[e.GTID.DomainID] = e.GTID
	case *replication.PreviousGTIDsEvent:
		set, err := mysql.ParseMysqlGTIDSet(e.GTIDSets)
		if err != nil {
			return fmt.Errorf("previous GTIDs %q: %w", e.GTIDSets, err)
		}
		g.mysql = set.(*mysql.MysqlGTIDSet)
	case *replication.GTIDEvent:
		if ev.Header.EventType != replication.GTID_EVENT {
			return nil // anonymous: no GTID
		}
		u, err := uuid.FromBytes(e.SID)
		if err != nil {
			return fmt.Errorf("GTID event: %w", err)
		}
		if g.mysql == nil {
			set, _ := mysql.ParseMysqlGTIDSet("")
			g.mysql = set.(*mysql.MysqlGTIDSet)
		}
		g.mysql.AddGTID(u, e.GNO)
	}
	return nil
}

// String returns the set in the flavor's text form, or "" when want is
// false.
func (g *gtidTracker) String(want bool) string {
	if !want {
		return ""
	}
	if g.flavor == config.FlavorMariaDB {
		parts := make([]string, 0, len(g.mariadb))
		for _, d := range slices.Sorted(maps.Keys(g.mariadb)) {
			id := g.mariadb[d]
			parts = append(parts, id.String())
		}
		return strings.Join(parts, ",")
	}
	if g.mysql == nil {
		return ""
	}
	return g.mysql.String()
}

// finderSyncerConfig is the replication connection of a timeFinder to the
// source ep (password resolved, TLS as for every connection to it), under
// a server id no replica of that source uses.
func finderSyncerConfig(ep *dbconn.Endpoint, flavor string) replication.BinlogSyncerConfig {
	return replication.BinlogSyncerConfig{
		ServerID:        finderServerID(),
		Flavor:          flavor,
		Host:            ep.DB.Host,
		Port:            uint16(ep.DB.Port),
		User:            ep.DB.User,
		Password:        ep.DB.Password,
		TLSConfig:       ep.TLS,
		HeartbeatPeriod: time.Second,
		ReadTimeout:     30 * time.Second,
		// One attempt: dmctl reports a lost connection instead of retrying.
		DisableRetrySync:     true,
		MaxReconnectAttempts: 1,
		Logger:               slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// finderServerID is a replica server id for dmctl's short binlog reads:
// in [2^31, 2^32), apart from the ids the worker generates ([2^30, 2^31))
// and from hand-assigned ones, varying per run.
func finderServerID() uint32 {
	return 1<<31 + uint32(time.Now().UnixNano()%(1<<31))
}
