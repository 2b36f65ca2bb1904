package check

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dmworker/dm-worker/config"
)

// serverInfo is what the source's checks read from its global variables.
type serverInfo struct {
	vars    map[string]string // lower-case names; a missing variable is absent
	mariadb bool
	// binlogMonitor: MariaDB 10.5+, where REPLICATION CLIENT is an alias
	// of BINLOG MONITOR and SUPER no longer includes it.
	binlogMonitor bool
}

// sourceVariables are the global variables the checks read.
var sourceVariables = []string{
	"version", "log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "server_id",
	"gtid_mode", "enforce_gtid_consistency", "gtid_binlog_pos",
	"binlog_expire_logs_seconds", "expire_logs_days",
}

// readServerInfo reads sourceVariables; flavor is the source config's
// (detected from the version when empty).
func readServerInfo(ctx context.Context, db *sql.DB, flavor string) (*serverInfo, error) {
	q := "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('" + strings.Join(sourceVariables, "','") + "')"
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	info := &serverInfo{vars: map[string]string{}}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return nil, err
		}
		info.vars[strings.ToLower(name)] = value
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	version := info.vars["version"]
	info.mariadb = strings.EqualFold(flavor, config.FlavorMariaDB) ||
		flavor == "" && strings.Contains(strings.ToLower(version), "mariadb")
	major, minor := versionNumbers(version)
	info.binlogMonitor = info.mariadb && (major > 10 || major == 10 && minor >= 5)
	return info, nil
}

// versionNumbers returns the major and minor number of a version string
// ("10.11.19-MariaDB-...").
func versionNumbers(v string) (major, minor int) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) >= 2 {
		major, _ = strconv.Atoi(parts[0])
		minor, _ = strconv.Atoi(strings.TrimLeftFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	}
	return major, minor
}

// checkPrivileges checks the global privileges of the source user for the
// mode and returns its grants (nil when they could not be read).
func (c *run) checkPrivileges(ctx context.Context, s *server, info *serverInfo, l *items) *grants {
	g, err := query(ctx, func(ctx context.Context) (*grants, error) { return readGrants(ctx, s.db, info.mariadb) })
	if err != nil {
		l.failErr(err, "privileges", s.what, "check that from.user can log in and run SHOW GRANTS",
			"read the privileges of the source user on %s: %v", s.what, err)
		return nil
	}
	roles := ""
	if len(g.roles) > 0 {
		roles = fmt.Sprintf(" (granted roles %s count only when active at login: SET DEFAULT ROLE)", strings.Join(g.roles, ", "))
	}
	need := func(name, priv string, also ...string) {
		if g.global(append([]string{priv}, also...)...) {
			l.pass(name, s.what, "source user %s has %s", g.user, priv)
			return
		}
		alias := ""
		if len(also) > 0 && priv == "REPLICATION CLIENT" && info.binlogMonitor {
			alias = " (BINLOG MONITOR in MariaDB 10.5+)"
		}
		l.fail(name, s.what, fmt.Sprintf("GRANT %s ON *.* TO %s", priv, g.user),
			"source user %s on source %s lacks %s%s on *.*, which reading the binlog needs%s", g.user, c.src.SourceID, priv, alias, roles)
	}
	if c.syncs() {
		need("privilege_replication_slave", "REPLICATION SLAVE", "REPLICATION REPLICA")
		client := []string{"BINLOG MONITOR"}
		if !info.binlogMonitor {
			client = append(client, "SUPER")
		}
		need("privilege_replication_client", "REPLICATION CLIENT", client...)
	}
	if c.dumps() {
		if g.global("RELOAD") {
			l.pass("privilege_reload", s.what, "source user %s has RELOAD", g.user)
		} else {
			l.warn("privilege_reload", s.what, fmt.Sprintf("GRANT RELOAD ON *.* TO %s", g.user),
				"source user %s on source %s lacks RELOAD, so the dump cannot take FLUSH TABLES WITH READ LOCK: it falls back to one reader at MariaDB's binlog_snapshot_file/binlog_snapshot_position instead of mydumper.threads parallel readers (slower)%s",
				g.user, c.src.SourceID, roles)
		}
	}
	return g
}

// checkBinlog checks the binlog settings the sync unit needs.
func (c *run) checkBinlog(s *server, info *serverInfo, l *items) {
	id := c.src.SourceID
	v := func(name string) (string, bool) {
		val, ok := info.vars[name]
		return strings.ToUpper(val), ok
	}
	if val, _ := v("log_bin"); val == "ON" || val == "1" {
		l.pass("log_bin", s.what, "source %s has log_bin=ON", id)
	} else {
		l.fail("log_bin", s.what, "add log_bin (e.g. log_bin=mariadb-bin) under [mariadbd] in my.cnf and restart the server; it cannot be set at run time",
			"source %s has log_bin=%s: there is no binlog to replicate", id, orNone(val))
	}
	settings := []struct{ name, want, why string }{
		{"binlog_format", "ROW", "the sync unit reads row events only"},
		{"binlog_row_image", "FULL", "updates and deletes must carry every column"},
	}
	for _, st := range settings {
		val, _ := v(st.name)
		if val == st.want {
			l.pass(st.name, s.what, "source %s has %s=%s", id, st.name, val)
			continue
		}
		l.fail(st.name, s.what, fmt.Sprintf("SET GLOBAL %s=%s (sessions already open keep the old value: reconnect the applications), and set %s=%s under [mariadbd] in my.cnf so it survives a restart", st.name, st.want, st.name, st.want),
			"source %s has %s=%s; it must be %s: %s", id, st.name, orNone(val), st.want, st.why)
	}
	switch val, ok := v("binlog_row_metadata"); {
	case val == "FULL":
		l.pass("binlog_row_metadata", s.what, "source %s has binlog_row_metadata=FULL", id)
	case c.cfg.ShardMode == config.ShardOptimistic:
		// The merged table has the columns of every shard while a shard
		// lacks some: row events must name their columns.
		l.fail("binlog_row_metadata", s.what, "SET GLOBAL binlog_row_metadata=FULL (MariaDB 10.5+, MySQL 8.0+), and set it under [mariadbd] in my.cnf",
			"source %s has binlog_row_metadata=%s; shard-mode optimistic needs FULL: a shard's rows go to a merged table whose columns differ from the shard's, matched by the column names the binlog carries", id, orNone(val))
	case !ok:
		l.warn("binlog_row_metadata", s.what, "upgrade to MariaDB 10.5+ or MySQL 8.0+ to have column names in the binlog",
			"source %s has no binlog_row_metadata (older server): column names of row events then come from the target tables, which must have the source's columns in the same order", id)
	default:
		l.warn("binlog_row_metadata", s.what, "SET GLOBAL binlog_row_metadata=FULL, and set it under [mariadbd] in my.cnf",
			"source %s has binlog_row_metadata=%s: column names of row events then come from the target tables, which must have the source's columns in the same order", id, val)
	}
	if val, _ := v("server_id"); val != "" && val != "0" {
		l.pass("server_id", s.what, "source %s has server_id=%s", id, val)
	} else {
		l.fail("server_id", s.what, "SET GLOBAL server_id=<a number no other server of the topology uses>, and set server_id in my.cnf",
			"source %s has server_id=%s; a server with server_id 0 refuses replicas", id, orNone(val))
	}
	if c.src.EnableGTID {
		c.checkGTID(s, info, l)
	}
	if c.cfg.TaskMode == config.ModeAll {
		c.checkRetention(s, info, l)
	}
}

// minRetention is the binlog retention below which a task in mode all gets
// a warning: its sync unit starts at the snapshot once the load is done.
const minRetention = 24 * time.Hour

// checkRetention warns when the source purges its binlog early enough to
// remove the snapshot's files before a long dump and load are done.
func (c *run) checkRetention(s *server, info *serverInfo, l *items) {
	id := c.src.SourceID
	retention := time.Duration(0)
	if secs, err := strconv.ParseFloat(info.vars["binlog_expire_logs_seconds"], 64); err == nil && secs > 0 {
		retention = time.Duration(secs * float64(time.Second))
	} else if days, err := strconv.ParseFloat(info.vars["expire_logs_days"], 64); err == nil && days > 0 {
		retention = time.Duration(days * float64(24*time.Hour))
	}
	if retention == 0 || retention >= minRetention {
		l.pass("binlog_retention", s.what, "source %s keeps its binlog %s", id, retentionText(retention))
		return
	}
	l.warn("binlog_retention", s.what, "SET GLOBAL binlog_expire_logs_seconds to more than the dump and load will take (and in my.cnf), or enable-relay: true on the source",
		"source %s purges binary logs older than %s; in mode all the sync unit starts at the dump's snapshot once the load is done, and fails if the source purged that binlog meanwhile", id, retention)
}

func retentionText(d time.Duration) string {
	if d == 0 {
		return "until they are purged by hand (no expiry)"
	}
	return "for " + d.String()
}

// checkGTID checks the GTID settings of a source with enable-gtid.
func (c *run) checkGTID(s *server, info *serverInfo, l *items) {
	id := c.src.SourceID
	off := "or set enable-gtid: false in the source config (`dmctl source update FILE`)"
	if info.mariadb {
		pos, ok := info.vars["gtid_binlog_pos"]
		switch {
		case !ok:
			l.fail("gtid", s.what, "upgrade the source to MariaDB 10.0.2+, "+off,
				"source %s has enable-gtid: true but the server has no gtid_binlog_pos", id)
		case pos == "":
			l.pass("gtid", s.what, "source %s: MariaDB GTIDs, no GTID in the binlog yet", id)
		default:
			l.pass("gtid", s.what, "source %s: MariaDB GTIDs, gtid_binlog_pos=%s", id, pos)
		}
		return
	}
	mode := strings.ToUpper(info.vars["gtid_mode"])
	enforce := strings.ToUpper(info.vars["enforce_gtid_consistency"])
	if mode == "ON" && enforce == "ON" {
		l.pass("gtid", s.what, "source %s has gtid_mode=ON and enforce_gtid_consistency=ON", id)
		return
	}
	l.fail("gtid", s.what, "SET GLOBAL enforce_gtid_consistency=ON, then SET GLOBAL gtid_mode to OFF_PERMISSIVE, ON_PERMISSIVE and ON in turn, and set both in my.cnf; "+off,
		"source %s has enable-gtid: true but gtid_mode=%s and enforce_gtid_consistency=%s; both must be ON", id, orNone(mode), orNone(enforce))
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
