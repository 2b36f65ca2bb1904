package syncer

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// maxJoinedSQL bounds the estimated size of one multi-statement query, far
// below the target's max_allowed_packet (16 MiB by default) and the
// driver's (64 MiB), past which the driver would refuse to interpolate.
const maxJoinedSQL = 4 << 20

// execTx runs stmts in one target transaction. The statements travel as
// one multi-statement query opened by BEGIN and closed by COMMIT (more
// queries only when the text would pass maxJoinedSQL), so a batch costs one
// round trip. The values are written into the text (literal.go) when mode
// is known, else the driver interpolates every argument client-side
// (interpolateParams), exactly as it does for a single statement. The
// server stops at the first failing statement; the transaction is then
// rolled back, and a connection that cannot roll back is discarded so an
// open transaction never returns to the pool.
func execTx(ctx context.Context, db *sql.DB, stmts []stmt, mode escapeMode) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("get a target connection: %w", err)
	}
	defer func() { err = errors.Join(err, ignoreDone(conn.Close())) }()
	queries := joinStatements(stmts, mode)
	for _, q := range queries {
		if _, err := conn.ExecContext(ctx, q.sql, q.args...); err != nil {
			return errors.Join(fmt.Errorf("%s: %w", clipSQL(q.sql), err), rollbackConn(ctx, conn))
		}
	}
	return nil
}

// joinStatements joins stmts into as few queries as maxJoinedSQL allows,
// the first starting with BEGIN and the last ending with COMMIT: with the
// values written in when mode is known and every statement can be
// written so, else with the arguments for the driver.
func joinStatements(stmts []stmt, mode escapeMode) []stmt {
	if mode != escapeUnknown {
		if out, ok := writeStatements(stmts, mode); ok {
			return out
		}
	}
	var (
		out  []stmt
		b    strings.Builder
		args []any
		size int
	)
	n := 0
	for _, s := range stmts {
		n += len(s.args)
	}
	args = make([]any, 0, n) // one query, the usual case
	b.WriteString("BEGIN")
	for _, s := range stmts {
		n := estimateSQLSize(s)
		if size > 0 && size+n > maxJoinedSQL {
			out = append(out, stmt{sql: b.String(), args: args})
			b.Reset()
			args, size = nil, 0
		} else {
			b.WriteByte(';')
		}
		b.WriteString(s.sql)
		args = append(args, s.args...)
		size += n
	}
	b.WriteString(";COMMIT")
	return append(out, stmt{sql: b.String(), args: args})
}

// estimateSQLSize is an upper bound of a statement's size once its
// arguments are interpolated (escaping at most doubles a string).
func estimateSQLSize(s stmt) int {
	n := len(s.sql) + 1
	for _, a := range s.args {
		switch v := a.(type) {
		case []byte:
			n += 2*len(v) + 12
		case string:
			n += 2*len(v) + 4
		default:
			n += 32
		}
	}
	return n
}

// rollbackConn ends a failed transaction on conn and restores the
// foreign_key_checks the batch may have changed (fkSession). When ROLLBACK fails (a
// lost connection, a cancelled ctx) the connection is marked bad so the pool
// closes it instead of reusing it, and its server session rolls back.
func rollbackConn(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, "ROLLBACK;"+fkRestoreAfterRollback); err == nil {
		return nil
	}
	err := conn.Raw(func(any) error { return driver.ErrBadConn })
	if err != nil && !errors.Is(err, driver.ErrBadConn) && !errors.Is(err, sql.ErrConnDone) {
		return fmt.Errorf("discard the target connection after a failed rollback: %w", err)
	}
	return nil
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrConnDone) {
		return nil
	}
	return err
}

// writeStatements is joinStatements with every value written into the
// text (appendStatement); the queries are cut where joinStatements cuts
// them. ok is false when a statement cannot be written so.
func writeStatements(stmts []stmt, mode escapeMode) (_ []stmt, ok bool) {
	var out []stmt
	newBuf := func(from int) []byte {
		n := 16
		for _, s := range stmts[from:] {
			if n += literalSize(s) + 1; n > maxJoinedSQL {
				break
			}
		}
		return make([]byte, 0, n)
	}
	// Each query's text is its own buffer, never written again once it
	// is a string.
	text := func(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
	buf := append(newBuf(0), "BEGIN"...)
	size := 0
	for i, s := range stmts {
		n := estimateSQLSize(s)
		if size > 0 && size+n > maxJoinedSQL {
			out = append(out, stmt{sql: text(buf)})
			buf, size = newBuf(i), 0
		} else {
			buf = append(buf, ';')
		}
		if buf, ok = appendStatement(buf, s, mode); !ok {
			return nil, false
		}
		size += n
	}
	buf = append(buf, ";COMMIT"...)
	return append(out, stmt{sql: text(buf)}), true
}
