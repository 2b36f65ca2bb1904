package mariadbtest

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dmworker/dm-worker/tests/tlstest"
)

// TestTLSRequired starts a server that requires TLS: the harness's own
// connections use TLS, a plain TCP connection is refused, and a restart keeps
// the certificate.
func TestTLSRequired(t *testing.T) {
	t.Parallel()
	files := tlstest.Generate(t, tlstest.Options{})
	inst := Start(t, Options{Name: "tls", TLS: &TLS{CA: files.CA, Cert: files.ServerCert, Key: files.ServerKey, Require: true}})

	if got := inst.QueryString(t, "SELECT @@require_secure_transport"); got != "1" {
		t.Fatalf("@@require_secure_transport = %q, want 1", got)
	}
	cipher := func() string {
		t.Helper()
		var name, value string
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := inst.admin.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &value); err != nil {
			t.Fatalf("SHOW SESSION STATUS LIKE 'Ssl_cipher': %v", err)
		}
		return value
	}
	if c := cipher(); c == "" {
		t.Fatal("the harness's connection does not use TLS: Ssl_cipher is empty")
	}

	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.Timeout = RootUser, "tcp", net.JoinHostPort(inst.Host(), strconv.Itoa(inst.Port())), 10*time.Second
	plain, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	err = plain.PingContext(t.Context())
	// MariaDB refuses it as "access denied" (1045), unlike MySQL's 3159.
	var myErr *mysql.MySQLError
	if !errors.As(err, &myErr) || myErr.Number != 1045 {
		t.Fatalf("plain TCP connection to a server requiring TLS: got %v, want server error 1045 (access denied)", err)
	}

	inst.Stop(t)
	inst.Restart(t)
	if c := cipher(); c == "" {
		t.Fatal("after a restart the harness's connection does not use TLS")
	}
}

func TestTLSOptionsRendered(t *testing.T) {
	cfg := serverConfig{opts: Options{Name: "x", TLS: &TLS{CA: "/c/ca.pem", Cert: "/c/s.pem", Key: "/c/k.pem", Require: true}}, serverID: 3, dir: "/d", port: 4000}
	text := cfg.render()
	for _, want := range []string{"ssl-ca=/c/ca.pem\n", "ssl-cert=/c/s.pem\n", "ssl-key=/c/k.pem\n", "require_secure_transport=ON\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("my.cnf lacks %q:\n%s", want, text)
		}
	}
	if err := (Options{Name: "x", TLS: &TLS{CA: "/c/ca.pem"}}).validate(); err == nil {
		t.Error("TLS without Cert and Key was accepted")
	}
}
