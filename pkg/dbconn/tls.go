package dbconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
)

// CodeTLS is the code of a connection whose TLS could not be set up: a
// security file that cannot be loaded, a server certificate that does not
// verify, a server that refuses our handshake or does not offer TLS, or a
// server that requires TLS from a connection without a security block.
// Never resumable: retrying cannot fix the configuration.
const CodeTLS = "db-tls"

// buildTLS returns the client TLS config for db's security block, nil when
// the block asks for no TLS.
//
// What is verified (the worker's own verification, in VerifyConnection, so
// that every failure names the setting to fix):
//   - the server certificate chains to the CA in ssl-ca, or to the system's
//     CA pool when ssl-ca is empty (DM then skips verification: we do not);
//   - with cert-allowed-cn empty, the certificate is valid for the host
//     the connection dials (a DNS name or IP address in its SAN);
//   - with cert-allowed-cn set, the certificate's Subject CN must be one of
//     the list instead of matching the host.
//
// ssl-cert/ssl-key are presented to servers that ask for a client
// certificate. TLS 1.2 is the minimum.
func buildTLS(db config.DBConfig, ref Ref) (*tls.Config, error) {
	sec := db.Security
	if !sec.Enabled() {
		return nil, nil
	}
	v := &verifier{ref: ref, host: db.Host, caFile: sec.SSLCA, allowedCN: slices.Clone(sec.CertAllowedCN)}
	for i, cn := range v.allowedCN {
		v.allowedCN[i] = strings.TrimSpace(cn)
	}
	if sec.SSLCA != "" {
		pem, err := os.ReadFile(sec.SSLCA)
		if err != nil {
			return nil, ref.tlsErr("%s %s: %w; check the path and that the worker can read the file", ref.field("ssl-ca"), sec.SSLCA, unwrapPathError(err))
		}
		v.roots = x509.NewCertPool()
		if !v.roots.AppendCertsFromPEM(pem) {
			return nil, ref.tlsErr("%s %s: no PEM certificate in the file; give the CA certificate that signed the server's certificate", ref.field("ssl-ca"), sec.SSLCA)
		}
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The standard verification is replaced by VerifyConnection (never
		// skipped): it checks the chain, then the host or the allowed CNs,
		// and its errors name the file and field to fix.
		InsecureSkipVerify: true,
		VerifyConnection:   v.verify,
		ServerName:         db.Host,
	}
	switch {
	case sec.SSLCert != "" && sec.SSLKey != "":
		cert, err := tls.LoadX509KeyPair(sec.SSLCert, sec.SSLKey)
		if err != nil {
			return nil, ref.tlsErr("%s %s / %s %s: %w; give a PEM certificate and its unencrypted PEM private key",
				ref.field("ssl-cert"), sec.SSLCert, ref.field("ssl-key"), sec.SSLKey, unwrapPathError(err))
		}
		cfg.Certificates = []tls.Certificate{cert}
	case sec.SSLCert != "" || sec.SSLKey != "":
		return nil, ref.tlsErr("%s and %s must be given together", ref.field("ssl-cert"), ref.field("ssl-key"))
	}
	return cfg, nil
}

// unwrapPathError drops the *fs.PathError's repetition of the path, which
// the caller already names.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// verifier checks a server's certificate for one DBConfig.
type verifier struct {
	ref       Ref
	host      string
	caFile    string         // "" = system pool
	roots     *x509.CertPool // nil = system pool
	allowedCN []string
}

func (v *verifier) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return v.ref.tlsErr("the server at %s sent no certificate", v.host)
	}
	leaf := cs.PeerCertificates[0]
	opts := x509.VerifyOptions{
		Roots:         v.roots,
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if len(v.allowedCN) == 0 {
		opts.DNSName = v.host
	}
	if _, err := leaf.Verify(opts); err != nil {
		return v.describe(leaf, err)
	}
	if len(v.allowedCN) > 0 && !slices.Contains(v.allowedCN, leaf.Subject.CommonName) {
		return v.ref.tlsErr("the server certificate of %s has common name %q, which is not in %s %q; add it there if this is the right server",
			v.host, leaf.Subject.CommonName, v.ref.field("cert-allowed-cn"), v.allowedCN)
	}
	return nil
}

// describe turns a chain or host verification error into what to fix.
func (v *verifier) describe(leaf *x509.Certificate, err error) error {
	ca := v.ref.field("ssl-ca") + " " + v.caFile
	if v.caFile == "" {
		ca = "the system's CA pool (" + v.ref.field("ssl-ca") + " is empty)"
	}
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &unknown):
		return v.ref.tlsErr("the server certificate of %s (issuer %q) is not signed by a CA in %s: %w; "+
			"set %s to the CA certificate that signed the server's certificate",
			v.host, leaf.Issuer.String(), ca, err, v.ref.field("ssl-ca"))
	case errors.As(err, &hostname):
		return v.ref.tlsErr("the server certificate of %s (common name %q) is not valid for host %q: %w; "+
			"connect by a name the certificate holds, or list its common name in %s",
			v.host, leaf.Subject.CommonName, v.host, err, v.ref.field("cert-allowed-cn"))
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return v.ref.tlsErr("the server certificate of %s (common name %q) is valid only from %s to %s: %w; renew the server's certificate",
			v.host, leaf.Subject.CommonName, leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339), err)
	default:
		return v.ref.tlsErr("the server certificate of %s (common name %q) does not verify against %s: %w",
			v.host, leaf.Subject.CommonName, ca, err)
	}
}

// Ref names the config a connection comes from, for error texts.
type Ref struct {
	// Object is who connects: `source "mysql-01"`, `task "t1"`.
	Object string
	// Field is where the DBConfig sits in that object's file: "from",
	// "target-database".
	Field string
}

// SourceRef is the Ref of a source's `from`.
func SourceRef(sourceID string) Ref {
	return Ref{Object: fmt.Sprintf("source %q", sourceID), Field: "from"}
}

// TargetRef is the Ref of a task's `target-database`.
func TargetRef(task string) Ref {
	return Ref{Object: fmt.Sprintf("task %q", task), Field: "target-database"}
}

// field returns the path of a security field, e.g. "from.security.ssl-ca".
func (r Ref) field(name string) string {
	if r.Field == "" {
		return "security." + name
	}
	return r.Field + ".security." + name
}

// tlsErr is a non-resumable CodeTLS error prefixed with the object.
func (r Ref) tlsErr(format string, args ...any) error {
	return errs.New(CodeTLS, false, "%s: "+format, append([]any{r.Object}, args...)...)
}
