package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dmworker/dm-worker/pkg/secret"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/tlstest"
	"github.com/dmworker/dm-worker/worker"
)

func TestEncryptAndGenKey(t *testing.T) {
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "secret.key")

	r := runDmctl(t, "gen-key", keyPath)
	if r.code != 0 || !strings.Contains(r.stdout, keyPath) {
		t.Fatalf("gen-key: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	st, err := os.Stat(keyPath)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v", err, st.Mode())
	}
	if r := runDmctl(t, "gen-key", keyPath); r.code != 1 || !strings.Contains(r.stderr, "never overwritten") {
		t.Fatalf("gen-key over an existing file: %d %s", r.code, r.stderr)
	}

	const pw = `p@ss w0rd "quoted" ü`
	r = runDmctl(t, "--secret-key-path", keyPath, "encrypt", pw)
	if r.code != 0 {
		t.Fatalf("encrypt: %d %s", r.code, r.stderr)
	}
	ct := strings.TrimSpace(r.stdout)
	key, err := secret.LoadKeyFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := secret.ResolvePassword(ct, key); err != nil || got != pw {
		t.Fatalf("the worker's resolution of dmctl's ciphertext = %q, %v", got, err)
	}
	// A plaintext starting with "-" goes after "--".
	r = runDmctl(t, "--secret-key-path", keyPath, "--output", "json", "encrypt", "--", "-dash")
	var doc encryptJSON
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil {
		t.Fatalf("encrypt --output json: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if got, err := secret.Decrypt(key, doc.Ciphertext); err != nil || got != "-dash" {
		t.Fatalf("decrypt = %q, %v", got, err)
	}

	if r := runDmctl(t, "encrypt", pw); r.code != 1 || !strings.Contains(r.stderr, "--secret-key-path") || strings.Contains(r.stderr, pw) {
		t.Fatalf("encrypt without key: %d %s", r.code, r.stderr)
	}
	if err := os.Chmod(keyPath, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runDmctl(t, "--secret-key-path", keyPath, "encrypt", pw); r.code != 1 || !strings.Contains(r.stderr, "chmod 600 "+keyPath) {
		t.Fatalf("encrypt with a world-readable key: %d %s", r.code, r.stderr)
	}

	if got, err := readSecretLine(strings.NewReader("line one\r\nline two\n")); err != nil || got != "line one" {
		t.Fatalf("readSecretLine = %q, %v", got, err)
	}
}

// TestDmctlEtcdAuth: with etcd auth on, dmctl works as the prefix user and
// fails clearly without credentials or with a wrong password.
func TestDmctlEtcdAuth(t *testing.T) {
	c := etcdtest.Start(t)
	etcdtest.EnableAuth(t, c.Client(t), testPrefix, "dmctl", "dmctl-Pw-31")
	h := &harness{t: t, etcd: c, cli: c.AuthClient(t, "root", etcdtest.RootPassword), dir: t.TempDir()}
	h.worker("w1", true)
	auth := []string{"--etcd-username", "dmctl", "--etcd-password", "dmctl-Pw-31"}

	h.ok(append(auth, "source", "create", h.sourceFile("mysql-01", ""), "--worker", "w1")...)
	if _, ok := h.get("/source/config/mysql-01"); !ok {
		t.Fatal("source config not written")
	}
	out := h.ok(append(auth, "worker", "list")...).stdout
	if !strings.Contains(out, "w1") || !strings.Contains(out, "mysql-01") {
		t.Fatalf("worker list:\n%s", out)
	}

	r := h.fail([]string{"worker", "list"}, "etcd auth", "--etcd-username")
	r2 := h.fail([]string{"--etcd-username", "dmctl", "--etcd-password", "wrong-Pw-5", "worker", "list"}, "etcd auth", `user "dmctl"`)
	r3 := h.fail([]string{"--etcd-username", "dmctl", "worker", "list"}, "--etcd-password")
	for _, res := range []result{r, r2, r3} {
		for _, pw := range []string{"dmctl-Pw-31", "wrong-Pw-5", etcdtest.RootPassword} {
			if strings.Contains(res.stderr+res.stdout, pw) {
				t.Errorf("dmctl output shows a password:\n%s%s", res.stdout, res.stderr)
			}
		}
	}
}

// TestDmctlWorkerHTTPS: with the --status-tls-* flags dmctl talks HTTPS to
// a worker API that requires client certificates.
func TestDmctlWorkerHTTPS(t *testing.T) {
	h := newHarness(t)
	files := tlstest.Generate(t, tlstest.Options{})
	tlsCfg, err := worker.StatusTLSConfig(files.ServerCert, files.ServerKey, files.CA)
	if err != nil {
		t.Fatal(err)
	}
	var sawCert atomic.Bool
	srv := httptest.NewUnstartedServer(worker.Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawCert.Store(r.TLS != nil && len(r.TLS.VerifiedChains) > 0)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"purged":["mariadb-bin.000001"]}`))
	}), nil))
	srv.TLS = tlsCfg
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "https://")
	h.put("/worker/info/w1", `{"name":"w1","addr":"`+addr+`"}`)
	h.put("/worker/keepalive/w1", `{"name":"w1","join-time":"2026-01-02T15:04:05Z"}`)
	h.ok("source", "create", h.sourceFile("mysql-01", ""), "--worker", "w1")

	tlsFlags := []string{"--status-tls-ca", files.CA, "--status-tls-cert", files.ClientCert, "--status-tls-key", files.ClientKey}
	out := h.ok(append(tlsFlags, "relay", "purge", "mysql-01", "--inactive")...).stdout
	if !strings.Contains(out, "mariadb-bin.000001") || !sawCert.Load() {
		t.Fatalf("relay purge over HTTPS: cert seen %v, output:\n%s", sawCert.Load(), out)
	}
	h.fail([]string{"relay", "purge", "mysql-01", "--inactive"}, "worker w1")
	h.fail([]string{"--status-tls-ca", files.CA, "relay", "purge", "mysql-01", "--inactive"}, "worker w1")
	h.fail([]string{"--status-tls-ca", files.OtherCA, "--status-tls-cert", files.ClientCert, "--status-tls-key", files.ClientKey,
		"relay", "purge", "mysql-01", "--inactive"}, "certificate")
	h.fail([]string{"--status-tls-cert", files.ClientCert, "relay", "purge", "mysql-01", "--inactive"}, "--status-tls-key")
	h.fail([]string{"--status-tls-ca", filepath.Join(h.dir, "none.pem"), "worker", "list"}, "--status-tls-ca")
}
