package errs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-sql-driver/mysql"
)

// resumableMySQLCodes are MySQL/MariaDB error numbers after which retrying
// may succeed: lock contention, connection limits, server shutdown and lost
// or refused client connections.
var resumableMySQLCodes = map[uint16]bool{
	1205: true, // ER_LOCK_WAIT_TIMEOUT
	1213: true, // ER_LOCK_DEADLOCK
	1040: true, // ER_CON_COUNT_ERROR (too many connections)
	1053: true, // ER_SERVER_SHUTDOWN
	1077: true, // ER_NORMAL_SHUTDOWN
	1078: true, // ER_GOT_SIGNAL
	1079: true, // ER_SHUTDOWN_COMPLETE
	1080: true, // ER_FORCING_CLOSE
	2002: true, // CR_CONNECTION_ERROR
	2003: true, // CR_CONN_HOST_ERROR
	2006: true, // CR_SERVER_GONE_ERROR
	2013: true, // CR_SERVER_LOST
}

// IsResumable reports whether the work that failed with err may succeed when
// retried. The resumable flag of the outermost Coded error decides when there
// is one; otherwise the cause is classified: MySQL lock, connection and
// shutdown errors, lost or refused connections, network errors, unexpected
// EOF and deadline expiry are resumable; cancellation, TLS failures (see
// isTLSFailure) and everything else are not.
func IsResumable(err error) bool {
	if err == nil {
		return false
	}
	var c *Coded
	if errors.As(err, &c) {
		return c.resumable
	}
	if errors.Is(err, context.Canceled) || isTLSFailure(err) {
		return false
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		return resumableMySQLCodes[myErr.Number]
	}
	var goMyErr *gomysql.MyError
	if errors.As(err, &goMyErr) {
		return resumableMySQLCodes[goMyErr.Code]
	}
	for _, target := range []error{
		context.DeadlineExceeded,
		driver.ErrBadConn,
		mysql.ErrInvalidConn,
		syscall.ECONNREFUSED,
		syscall.ECONNRESET,
		syscall.EPIPE,
		io.EOF,
		io.ErrUnexpectedEOF,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

// isTLSFailure reports whether err is a TLS setup or handshake failure that
// retrying cannot fix: a certificate that does not verify, a TLS alert from
// the peer (it rejected our handshake), a peer that does not speak TLS, or
// a server that does not offer TLS when asked for it.
func isTLSFailure(err error) bool {
	var (
		cve      *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		opErr    *net.OpError
	)
	return errors.As(err, &cve) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &record) || errors.Is(err, mysql.ErrNoTLS) ||
		errors.As(err, &opErr) && opErr.Op == "remote error"
}
