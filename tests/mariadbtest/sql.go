package mariadbtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// queryTimeout bounds each statement run by Exec, QueryString and MasterStatus.
const queryTimeout = time.Minute

// DSN is a go-sql-driver DSN for root over TCP to database db ("" for none), with parseTime,
// interpolateParams and without multiStatements.
func (i *Instance) DSN(db string) string {
	return i.UserDSN(RootUser, "", db)
}

// UserDSN is like DSN for another user, e.g. SourceUser with SourcePassword.
func (i *Instance) UserDSN(user, password, db string) string {
	cfg := mysql.NewConfig()
	cfg.User = user
	cfg.Passwd = password
	cfg.Net = "tcp"
	cfg.Addr = net.JoinHostPort(i.Host(), strconv.Itoa(i.port))
	cfg.DBName = db
	cfg.ParseTime = true
	cfg.InterpolateParams = true
	cfg.MultiStatements = false
	cfg.Timeout = 10 * time.Second
	cfg.TLSConfig = i.tlsName
	return cfg.FormatDSN()
}

// DB opens a pool for root without a default database; it is closed in tb's Cleanup.
func (i *Instance) DB(tb testing.TB) *sql.DB {
	tb.Helper()
	db, err := sql.Open("mysql", i.DSN(""))
	if err != nil {
		tb.Fatalf("mariadbtest: open pool for %q: %v", i.opts.Name, err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("mariadbtest: close pool for %q: %v", i.opts.Name, err)
		}
	})
	return db
}

// Exec runs one statement as root and fails the test on error. It uses tb.Context(), so it
// must not be called from a Cleanup function.
func (i *Instance) Exec(tb testing.TB, query string, args ...any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), queryTimeout)
	defer cancel()
	if _, err := i.admin.ExecContext(ctx, query, args...); err != nil {
		tb.Fatalf("mariadbtest: %s: %s: %v%s", i.opts.Name, query, err, i.notRunningNote())
	}
}

// QueryString runs a query as root and returns the first column of its only row as text
// ("" for NULL). The test fails when the query fails or returns no row. Not for Cleanup functions.
func (i *Instance) QueryString(tb testing.TB, query string, args ...any) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), queryTimeout)
	defer cancel()
	rows, err := i.admin.QueryContext(ctx, query, args...)
	if err != nil {
		tb.Fatalf("mariadbtest: %s: %s: %v%s", i.opts.Name, query, err, i.notRunningNote())
	}
	first, err := firstRow(rows)
	if err != nil {
		tb.Fatalf("mariadbtest: %s: %s: %v", i.opts.Name, query, err)
	}
	return first[0].String
}

// MasterStatus returns SHOW MASTER STATUS's file and position and @@gtid_binlog_pos. The two
// statements are not atomic: with concurrent writes the GTID may be newer than the position.
// The test fails when the binary log is off.
func (i *Instance) MasterStatus(tb testing.TB) (file string, pos uint32, gtid string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), queryTimeout)
	defer cancel()
	rows, err := i.admin.QueryContext(ctx, "SHOW MASTER STATUS")
	if err != nil {
		tb.Fatalf("mariadbtest: %s: SHOW MASTER STATUS: %v%s", i.opts.Name, err, i.notRunningNote())
	}
	status, err := firstRow(rows)
	if errors.Is(err, sql.ErrNoRows) {
		tb.Fatalf("mariadbtest: %s: SHOW MASTER STATUS returned nothing: the binary log is off (Options.Binlog)", i.opts.Name)
	}
	if err != nil {
		tb.Fatalf("mariadbtest: %s: SHOW MASTER STATUS: %v", i.opts.Name, err)
	}
	if len(status) < 2 {
		tb.Fatalf("mariadbtest: %s: SHOW MASTER STATUS returned %d columns, want at least 2", i.opts.Name, len(status))
	}
	p, err := strconv.ParseUint(status[1].String, 10, 32)
	if err != nil {
		tb.Fatalf("mariadbtest: %s: SHOW MASTER STATUS position %q: %v", i.opts.Name, status[1].String, err)
	}
	return status[0].String, uint32(p), i.QueryString(tb, "SELECT @@gtid_binlog_pos")
}

// ClientArgs are the connection arguments for mariadb, mariadb-admin or mariadb-binlog
// (--read-from-remote-server) as root over TCP; --no-defaults comes first, as it must.
func (i *Instance) ClientArgs() []string {
	args := []string{"--no-defaults", "--protocol=TCP", "-h" + i.Host(), "-P" + strconv.Itoa(i.port), "-u" + RootUser}
	if t := i.opts.TLS; t != nil {
		args = append(args, "--ssl-ca="+t.CA, "--ssl-verify-server-cert")
	}
	return args
}

// tlsConfigs numbers the TLS configs registered with go-sql-driver by this process.
var tlsConfigs atomic.Uint64

// registerTLS registers, with go-sql-driver, a client TLS config that verifies the server
// against opts.TLS.CA, and returns its name for DSNs ("" when the instance has no TLS).
func registerTLS(opts Options) (string, error) {
	if opts.TLS == nil {
		return "", nil
	}
	pem, err := os.ReadFile(opts.TLS.CA)
	if err != nil {
		return "", fmt.Errorf("mariadbtest: read CA of instance %q: %w", opts.Name, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return "", fmt.Errorf("mariadbtest: CA file %s of instance %q holds no PEM certificate", opts.TLS.CA, opts.Name)
	}
	name := fmt.Sprintf("mariadbtest-%d", tlsConfigs.Add(1))
	if err := mysql.RegisterTLSConfig(name, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}); err != nil {
		return "", fmt.Errorf("mariadbtest: register TLS config of instance %q: %w", opts.Name, err)
	}
	return name, nil
}

// notRunningNote explains a failed statement when the server is down.
func (i *Instance) notRunningNote() string {
	if i.Running() {
		return ""
	}
	return " (the server is not running: it was stopped, killed or crashed)"
}

// firstRow reads every column of the first row as text, then closes rows.
func firstRow(rows *sql.Rows) (_ []sql.NullString, err error) {
	defer func() { err = errors.Join(err, rows.Close()) }()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("no row: %w", sql.ErrNoRows)
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for k := range vals {
		ptrs[k] = &vals[k]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	return vals, rows.Err()
}

// PlainDB opens a root pool that reads every value as text (parseTime off)
// in UTC, with sql_mode NO_ENGINE_SUBSTITUTION, for comparing rows byte
// for byte; it is closed in tb's Cleanup.
func (i *Instance) PlainDB(tb testing.TB) *sql.DB {
	tb.Helper()
	return i.textDB(tb, "plain pool", map[string]string{"time_zone": "'+00:00'", "sql_mode": "'NO_ENGINE_SUBSTITUTION'"})
}

// textDB opens a root pool over the text protocol with parseTime off and
// the session variables params; it is closed in tb's Cleanup. what names
// it in a failure.
func (i *Instance) textDB(tb testing.TB, what string, params map[string]string) *sql.DB {
	tb.Helper()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net = RootUser, "tcp"
	cfg.Addr = net.JoinHostPort(i.Host(), strconv.Itoa(i.port))
	cfg.Params = params
	cfg.Timeout = 10 * time.Second
	cfg.TLSConfig = i.tlsName
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		tb.Fatalf("mariadbtest: %s for %q: %v", what, i.opts.Name, err)
	}
	db := sql.OpenDB(connector)
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// MustExec runs queries on db in order and fails the test at the first
// error.
func MustExec(tb testing.TB, db *sql.DB, queries ...string) {
	tb.Helper()
	for _, q := range queries {
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
}

// QueryRows runs q on db and returns each row as one string, in the order
// the server returns them: every value quoted (%q) and followed by "|",
// NULL as "NULL|". Tests compare tables with it.
func QueryRows(ctx context.Context, db *sql.DB, q string) ([]string, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var out []string
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		var b strings.Builder
		for _, v := range vals {
			if v == nil {
				b.WriteString("NULL|")
			} else {
				fmt.Fprintf(&b, "%q|", v)
			}
		}
		out = append(out, b.String())
	}
	return out, rows.Err()
}

// Session is one root connection over the text protocol without parsed
// times (values as the server prints them), on which setup ran in order
// ("SET NAMES binary", "SET time_zone = '+00:00'", ...): a session that
// reads as a unit does. Connection and pool are closed in tb's Cleanup.
func (i *Instance) Session(tb testing.TB, setup ...string) *sql.Conn {
	tb.Helper()
	db := i.textDB(tb, "session", nil)
	c, err := db.Conn(tb.Context())
	if err != nil {
		tb.Fatalf("mariadbtest: session on %q: %v%s", i.opts.Name, err, i.notRunningNote())
	}
	tb.Cleanup(func() { _ = c.Close() })
	for _, q := range setup {
		if _, err := c.ExecContext(tb.Context(), q); err != nil {
			tb.Fatalf("mariadbtest: session on %q: %s: %v", i.opts.Name, q, err)
		}
	}
	return c
}
