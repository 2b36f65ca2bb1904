package errs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
)

func TestTLSFailuresAreNotResumable(t *testing.T) {
	for _, c := range []struct {
		name      string
		err       error
		resumable bool
	}{
		{"unknown authority", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false},
		{"bare x509 host name error", fmt.Errorf("connect: %w", x509.HostnameError{Host: "db"}), false},
		{"expired", x509.CertificateInvalidError{Reason: x509.Expired}, false},
		{"alert from the server", &net.OpError{Op: "remote error", Net: "tcp", Err: errors.New("tls: bad certificate")}, false},
		{"peer does not speak TLS", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, false},
		{"server offers no TLS", fmt.Errorf("ping: %w", mysql.ErrNoTLS), false},
		{"refused dial stays resumable", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"lost read stays resumable", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
	} {
		if got := IsResumable(c.err); got != c.resumable {
			t.Errorf("%s: IsResumable(%v) = %v, want %v", c.name, c.err, got, c.resumable)
		}
	}
}
