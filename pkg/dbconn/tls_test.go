package dbconn

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/tlstest"
)

// connect opens a pool for db as source "s1" and runs one query on it; it
// returns the session's Ssl_cipher.
func connect(t *testing.T, db config.DBConfig) (string, error) {
	t.Helper()
	ep, err := NewEndpoint(db, SourceRef("s1"))
	if err != nil {
		return "", err
	}
	pool, err := ep.Open(ep.DriverConfig())
	if err != nil {
		return "", err
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var name, cipher string
	err = pool.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher)
	return cipher, err
}

// wantTLSError checks that err is a non-resumable CodeTLS error holding
// every one of parts and not the password.
func wantTLSError(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("connected; want an error naming %q", parts)
	}
	if errs.IsResumable(err) {
		t.Errorf("error is resumable: %v", err)
	}
	if code := errs.Code(err); code != CodeTLS {
		t.Errorf("code %q, want %q: %v", code, CodeTLS, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error does not name %q: %v", p, err)
		}
	}
	if strings.Contains(err.Error(), mariadbtest.SourcePassword) {
		t.Errorf("error holds the password: %v", err)
	}
}

func TestTLSToMariaDB(t *testing.T) {
	files := tlstest.Generate(t, tlstest.Options{})
	inst := mariadbtest.Start(t, mariadbtest.Options{Name: "tls",
		TLS: &mariadbtest.TLS{CA: files.CA, Cert: files.ServerCert, Key: files.ServerKey, Require: true}})
	inst.Exec(t, "CREATE USER 'x509user'@'%' REQUIRE X509")
	base := config.DBConfig{Host: inst.Host(), Port: inst.Port(), User: mariadbtest.SourceUser, Password: mariadbtest.SourcePassword}
	with := func(sec *config.Security) config.DBConfig {
		db := base
		db.Security = sec
		return db
	}

	t.Run("right CA", func(t *testing.T) {
		cipher, err := connect(t, with(&config.Security{SSLCA: files.CA}))
		if err != nil {
			t.Fatal(err)
		}
		if cipher == "" {
			t.Fatal("Ssl_cipher is empty: the connection does not use TLS")
		}
	})
	t.Run("wrong CA", func(t *testing.T) {
		_, err := connect(t, with(&config.Security{SSLCA: files.OtherCA}))
		wantTLSError(t, err, `source "s1"`, "from.security.ssl-ca", files.OtherCA, "not signed")
	})
	t.Run("no security block", func(t *testing.T) {
		_, err := connect(t, base)
		if err == nil {
			t.Fatal("a plain connection to a server requiring TLS succeeded")
		}
		if errs.IsResumable(err) || !strings.Contains(err.Error(), "require_secure_transport") || !strings.Contains(err.Error(), "from.security") {
			t.Fatalf("want a non-resumable error pointing at from.security, got (resumable %v) %v", errs.IsResumable(err), err)
		}
	})
	t.Run("allowed CN matches", func(t *testing.T) {
		if _, err := connect(t, with(&config.Security{SSLCA: files.CA, CertAllowedCN: []string{"other", tlstest.ServerCN}})); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("allowed CN does not match", func(t *testing.T) {
		_, err := connect(t, with(&config.Security{SSLCA: files.CA, CertAllowedCN: []string{"not-the-server"}}))
		wantTLSError(t, err, "from.security.cert-allowed-cn", tlstest.ServerCN)
	})
	t.Run("allowed CN with the wrong CA", func(t *testing.T) {
		_, err := connect(t, with(&config.Security{SSLCA: files.OtherCA, CertAllowedCN: []string{tlstest.ServerCN}}))
		wantTLSError(t, err, files.OtherCA)
	})
	t.Run("host name in the certificate", func(t *testing.T) {
		// The certificate names 127.0.0.1 and localhost; a host it does
		// not name is TestVerifierErrors's case.
		db := with(&config.Security{SSLCA: files.CA})
		db.Host = "localhost"
		if _, err := connect(t, db); err != nil {
			t.Fatalf("localhost is in the certificate: %v", err)
		}
	})
	t.Run("client certificate", func(t *testing.T) {
		db := with(&config.Security{SSLCA: files.CA, SSLCert: files.ClientCert, SSLKey: files.ClientKey})
		db.User, db.Password = "x509user", ""
		if _, err := connect(t, db); err != nil {
			t.Fatalf("user REQUIRE X509 with a client certificate: %v", err)
		}
		db.Security = &config.Security{SSLCA: files.CA}
		if _, err := connect(t, db); err == nil {
			t.Fatal("user REQUIRE X509 connected without a client certificate")
		}
	})
	t.Run("missing CA file", func(t *testing.T) {
		_, err := connect(t, with(&config.Security{SSLCA: files.Dir + "/nope.pem"}))
		wantTLSError(t, err, "from.security.ssl-ca", files.Dir+"/nope.pem", "check the path")
	})
	t.Run("binlog client (go-mysql) with the wrong CA", func(t *testing.T) {
		ep, err := NewEndpoint(with(&config.Security{SSLCA: files.OtherCA}), SourceRef("s1"))
		if err != nil {
			t.Fatal(err)
		}
		conn, err := client.ConnectWithContext(t.Context(), ep.Addr(), base.User, base.Password, "", 10*time.Second,
			func(c *client.Conn) error { c.SetTLSConfig(ep.TLS); return nil })
		if err == nil {
			_ = conn.Close()
			t.Fatal("go-mysql connected with the wrong CA")
		}
		wantTLSError(t, ep.ConnectError(err), files.OtherCA)
	})
	t.Run("binlog client (go-mysql) with the right CA", func(t *testing.T) {
		ep, err := NewEndpoint(with(&config.Security{SSLCA: files.CA}), SourceRef("s1"))
		if err != nil {
			t.Fatal(err)
		}
		conn, err := client.ConnectWithContext(t.Context(), ep.Addr(), base.User, base.Password, "", 10*time.Second,
			func(c *client.Conn) error { c.SetTLSConfig(ep.TLS); return nil })
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		r, err := conn.Execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
		if err != nil {
			t.Fatal(err)
		}
		if c, _ := r.GetString(0, 1); c == "" {
			t.Fatal("go-mysql connection does not use TLS")
		}
	})
}

// TestTLSWithoutServerTLS: a security block against a server without TLS
// is a clear non-resumable error, never a plain-text login.
func TestTLSWithoutServerTLS(t *testing.T) {
	files := tlstest.Generate(t, tlstest.Options{})
	inst := mariadbtest.StartTarget(t)
	db := config.DBConfig{Host: inst.Host(), Port: inst.Port(), User: mariadbtest.SourceUser, Password: mariadbtest.SourcePassword,
		Security: &config.Security{SSLCA: files.CA}}
	_, err := connect(t, db)
	wantTLSError(t, err, "does not offer it", "from.security")
}

func TestSessionAndMaxAllowedPacket(t *testing.T) {
	inst := mariadbtest.StartTarget(t)
	db := config.DBConfig{Host: inst.Host(), Port: inst.Port(), User: mariadbtest.RootUser,
		MaxAllowedPacket: 8 << 20,
		Session:          map[string]string{"SQL_MODE": "ANSI_QUOTES,NO_ENGINE_SUBSTITUTION", "wait_timeout": "1234", "time_zone": "+03:00"}}
	ep, err := NewEndpoint(db, TargetRef("t1"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := ep.DriverConfig()
	if cfg.MaxAllowedPacket != 8<<20 {
		t.Errorf("MaxAllowedPacket = %d, want %d", cfg.MaxAllowedPacket, 8<<20)
	}
	SetDefaultParam(cfg, "sql_mode", "''")          // the session block wins
	SetDefaultParam(cfg, "foreign_key_checks", "0") // not in the block: set
	pool, err := ep.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var mode, tz string
	var wait, fk int
	if err := pool.QueryRowContext(t.Context(), "SELECT @@session.sql_mode, @@session.wait_timeout, @@session.time_zone, @@session.foreign_key_checks").
		Scan(&mode, &wait, &tz, &fk); err != nil {
		t.Fatal(err)
	}
	if mode != "ANSI_QUOTES,NO_ENGINE_SUBSTITUTION" || wait != 1234 || tz != "+03:00" || fk != 0 {
		t.Fatalf("session: sql_mode %q wait_timeout %d time_zone %q foreign_key_checks %d", mode, wait, tz, fk)
	}

	if _, err := NewEndpoint(config.DBConfig{Session: map[string]string{"x = 1; DROP": "1"}}, TargetRef("t1")); err == nil ||
		!strings.Contains(err.Error(), "target-database.session") {
		t.Fatalf("a bad session variable name: got %v", err)
	}
}

func TestVerifierErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  tlstest.Options
		sec   func(tlstest.Files) *config.Security
		parts []string
	}{
		{"expired", tlstest.Options{ServerExpired: true}, func(f tlstest.Files) *config.Security { return &config.Security{SSLCA: f.CA} }, []string{"renew"}},
		{"host not in the certificate", tlstest.Options{ServerNoSAN: true}, func(f tlstest.Files) *config.Security { return &config.Security{SSLCA: f.CA} },
			[]string{"not valid for host", "from.security.cert-allowed-cn"}},
		{"no SAN but allowed CN", tlstest.Options{ServerNoSAN: true}, func(f tlstest.Files) *config.Security {
			return &config.Security{SSLCA: f.CA, CertAllowedCN: []string{tlstest.ServerCN}}
		}, nil},
		{"no CA: system pool", tlstest.Options{}, func(f tlstest.Files) *config.Security {
			return &config.Security{SSLCert: f.ClientCert, SSLKey: f.ClientKey}
		}, []string{"system's CA pool"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := tlstest.Generate(t, c.opts)
			cfg, err := buildTLS(config.DBConfig{Host: "127.0.0.1", Port: 1, Security: c.sec(f)}, SourceRef("s1"))
			if err != nil {
				t.Fatal(err)
			}
			err = handshake(t, f, cfg)
			if c.parts == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantTLSError(t, err, c.parts...)
		})
	}
}

// handshake runs one TLS handshake between cfg and an in-process server
// presenting f's server certificate.
func handshake(t *testing.T, f tlstest.Files, cfg *tls.Config) error {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_ = c.(*tls.Conn).HandshakeContext(t.Context()) // the client's verdict is what the test checks
		_ = c.Close()
	}()
	defer func() { <-done }()
	c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
	if err != nil {
		return err
	}
	return errors.Join(c.Close())
}
