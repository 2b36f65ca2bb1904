package dbconn

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-sql-driver/mysql"

	"github.com/dmworker/dm-worker/pkg/errs"
)

// secureTransportRequired are the server errors a connection without TLS
// gets from a server with require_secure_transport=ON.
var secureTransportRequired = map[uint16]bool{
	3159: true, // ER_SECURE_TRANSPORT_REQUIRED (MySQL 5.7+, MariaDB 10.5+)
}

// accessDenied is ER_ACCESS_DENIED_ERROR.
const accessDenied = 1045

// ConnectError turns err, a failed connection to e (from go-sql-driver or
// go-mysql), into a non-resumable CodeTLS error naming the setting to fix
// when TLS caused it; other errors are returned unchanged.
func (e *Endpoint) ConnectError(err error) error {
	if err == nil {
		return nil
	}
	var coded *errs.Coded
	if errors.As(err, &coded) {
		return err // our own verification's error already says what to fix
	}
	sec := e.Ref.Field + ".security"
	var (
		my    *mysql.MySQLError
		goMy  *gomysql.MyError
		opErr *net.OpError
		rec   tls.RecordHeaderError
		cve   *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &my) && secureTransportRequired[my.Number],
		errors.As(err, &goMy) && secureTransportRequired[goMy.Code]:
		if e.TLS == nil {
			return errs.New(CodeTLS, false, "%s: the server at %s requires TLS (require_secure_transport): %w; "+
				"set %s (ssl-ca: the CA that signed the server's certificate)", e.Ref.Object, e.Addr(), err, sec)
		}
		return errs.New(CodeTLS, false, "%s: the server at %s refused the connection as insecure: %w", e.Ref.Object, e.Addr(), err)
	case e.TLS == nil && (errors.As(err, &my) && my.Number == accessDenied || errors.As(err, &goMy) && goMy.Code == accessDenied):
		// MariaDB refuses a connection without TLS under
		// require_secure_transport as "access denied", like a bad password.
		return fmt.Errorf("%w; if the server at %s requires TLS (require_secure_transport), set %s", err, e.Addr(), sec)
	case e.TLS == nil:
		return err
	case errors.Is(err, mysql.ErrNoTLS):
		return errs.New(CodeTLS, false, "%s: %s asks for TLS but the server at %s does not offer it: %w; "+
			"enable TLS on the server or remove %s", e.Ref.Object, sec, e.Addr(), err, sec)
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		// A TLS alert from the server: it rejected our handshake.
		return errs.New(CodeTLS, false, "%s: the server at %s rejected the TLS handshake: %w; "+
			"check %s.ssl-cert and ssl-key (the server may require a client certificate signed by a CA it trusts)",
			e.Ref.Object, e.Addr(), err, sec)
	case errors.As(err, &rec), errors.As(err, &cve):
		return errs.New(CodeTLS, false, "%s: TLS handshake with the server at %s failed: %w; check %s",
			e.Ref.Object, e.Addr(), err, sec)
	}
	return err
}
