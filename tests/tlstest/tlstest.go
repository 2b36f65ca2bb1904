// Package tlstest generates throwaway certificates for tests with crypto/x509:
// a CA, a server certificate it signs for 127.0.0.1 and localhost, a client
// certificate, and a second, unrelated CA for the wrong-CA case. Files are
// PEM, written under t.TempDir() with mode 0600; nothing is checked in.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ServerCN and ClientCN are the common names of the generated certificates.
const (
	ServerCN = "dm-test-mariadb"
	ClientCN = "dm-test-client"
)

// Files are the paths of one generated set.
type Files struct {
	Dir string
	// CA signs the server and client certificates.
	CA string
	// ServerCert and ServerKey: CN ServerCN, SAN IP 127.0.0.1 and DNS localhost.
	ServerCert, ServerKey string
	// ClientCert and ClientKey: CN ClientCN, for client authentication.
	ClientCert, ClientKey string
	// OtherCA is a CA that signed nothing here.
	OtherCA string
}

// Options change what Generate makes.
type Options struct {
	// ServerExpired makes the server certificate's validity end an hour ago.
	ServerExpired bool
	// ServerNoSAN leaves the IP and DNS names out of the server certificate,
	// so only its CN identifies it.
	ServerNoSAN bool
}

// Generate writes a new set of files under a fresh t.TempDir().
func Generate(tb testing.TB, opts Options) Files {
	tb.Helper()
	dir := tb.TempDir()
	f := Files{
		Dir:        dir,
		CA:         filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server-cert.pem"),
		ServerKey:  filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client-cert.pem"),
		ClientKey:  filepath.Join(dir, "client-key.pem"),
		OtherCA:    filepath.Join(dir, "other-ca.pem"),
	}
	now := time.Now()
	ca, caKey := newCA(tb, "dm-test-ca", now)
	writePEM(tb, f.CA, "CERTIFICATE", ca.Raw)
	other, _ := newCA(tb, "dm-test-other-ca", now)
	writePEM(tb, f.OtherCA, "CERTIFICATE", other.Raw)

	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: ServerCN},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if opts.ServerExpired {
		server.NotBefore, server.NotAfter = now.Add(-48*time.Hour), now.Add(-time.Hour)
	}
	if !opts.ServerNoSAN {
		server.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		server.DNSNames = []string{"localhost"}
	}
	issue(tb, server, ca, caKey, f.ServerCert, f.ServerKey)

	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: ClientCN},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	issue(tb, client, ca, caKey, f.ClientCert, f.ClientKey)
	return f
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("tlstest: generate key: %v", err)
	}
	return k
}

func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatalf("tlstest: serial number: %v", err)
	}
	return n
}

func newCA(tb testing.TB, cn string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey) {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(tb),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("tlstest: create CA %s: %v", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("tlstest: parse CA %s: %v", cn, err)
	}
	return cert, key
}

func issue(tb testing.TB, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certPath, keyPath string) {
	tb.Helper()
	key := newKey(tb)
	tmpl.SerialNumber = serial(tb)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		tb.Fatalf("tlstest: create certificate %s: %v", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatalf("tlstest: marshal key of %s: %v", tmpl.Subject.CommonName, err)
	}
	writePEM(tb, certPath, "CERTIFICATE", der)
	writePEM(tb, keyPath, "PRIVATE KEY", keyDER)
}

func writePEM(tb testing.TB, path, typ string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatalf("tlstest: write %s: %v", path, err)
	}
}
