package e2e

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/tests/tlstest"
)

const secTestKeyHex = "8f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"

// secKeyFile writes a key file with mode.
func secKeyFile(t *testing.T, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWorkerSecurityStartupErrors: a key file others may read, a key file
// that is no key, a missing TLS certificate and etcd auth without or with
// wrong credentials each stop dm-worker at start with exit 1 and a message
// naming the problem, never the key or a password.
func TestWorkerSecurityStartupErrors(t *testing.T) {
	etcd := etcdtest.Start(t)
	etcdtest.EnableAuth(t, etcd.DirectClient(t), testPrefix, "dmw", "Etcd-Pw-4417")
	endpoints := strings.Join(etcd.Endpoints(), ",")
	open := secKeyFile(t, "open.key", secTestKeyHex+"\n", 0o644)
	bad := secKeyFile(t, "bad.key", "not a key\n", 0o600)
	good := secKeyFile(t, "good.key", secTestKeyHex+"\n", 0o600)
	base := func(extra ...string) []string {
		return append([]string{"--name", "w1", "--etcd-endpoints", endpoints, "--etcd-prefix", testPrefix,
			"--status-addr", testutil.FreeAddr(t), "--data-dir", t.TempDir()}, extra...)
	}
	auth := []string{"--etcd-username", "dmw", "--etcd-password", "Etcd-Pw-4417"}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"key readable by others", base(append(auth, "--secret-key-path", open)...), []string{open, "chmod 600 " + open}},
		{"key not hex", base(append(auth, "--secret-key-path", bad)...), []string{bad, "64 hex characters"}},
		{"TLS certificate missing", base(append(auth, "--secret-key-path", good, "--status-tls-cert", "/nonexistent/api.pem", "--status-tls-key", "/nonexistent/api-key.pem")...),
			[]string{"/nonexistent/api.pem"}},
		{"no etcd credentials", base(), []string{"etcd auth", "--etcd-username"}},
		{"wrong etcd password", base("--etcd-username", "dmw", "--etcd-password", "Wrong-Pw-0"), []string{"etcd auth", `user "dmw"`}},
		{"etcd prefix outside the role", append(base(auth...), "--etcd-prefix", "/elsewhere"), []string{"etcd auth", "readwrite", "/elsewhere/"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runWorkerOnce(t, tc.args...)
			if code != 1 {
				t.Fatalf("exit %d, want 1; output:\n%s", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, s := range []string{secTestKeyHex, secTestKeyHex[:16], "Etcd-Pw-4417", "Wrong-Pw-0", etcdtest.RootPassword} {
				if strings.Contains(out, s) {
					t.Errorf("output shows a secret (%q...):\n%s", s[:4], out)
				}
			}
		})
	}

	// The right user: the worker registers and keeps its lease; dmctl sees
	// it with the same credentials and fails clearly without them.
	t.Run("right user", func(t *testing.T) {
		c := &cluster{t: t, endpoints: endpoints, prefix: testPrefix}
		startWorker(t, workerOptions{name: "w1", endpoints: endpoints, prefix: testPrefix,
			args: append([]string{"--secret-key-path", good}, auth...)})
		c.waitWorkerAlive("w1", auth...)
		r := c.run("worker", "list")
		if r.code != 1 || !strings.Contains(r.stderr, "etcd auth") {
			t.Errorf("dmctl without credentials: exit %d:\n%s", r.code, r.stderr)
		}
		r = c.run("--etcd-username", "dmw", "--etcd-password", "Wrong-Pw-0", "worker", "list")
		if r.code != 1 || !strings.Contains(r.stderr, "etcd auth") || strings.Contains(r.stderr, "Wrong-Pw-0") {
			t.Errorf("dmctl with a wrong password: exit %d:\n%s", r.code, r.stderr)
		}
	})
}

// TestWorkerHTTPSAndDirModes: a worker with --status-tls-* serves only
// HTTPS to clients with a certificate; dmctl reaches it with its
// --status-tls-* flags; the worker made data-dir and relay-dir 0750.
func TestWorkerHTTPSAndDirModes(t *testing.T) {
	c := newEtcdCluster(t)
	certs := tlstest.Generate(t, tlstest.Options{})
	dataDir := filepath.Join(t.TempDir(), "new", "data")
	addr := testutil.FreeAddr(t)
	outFile := filepath.Join(t.TempDir(), "dm-worker.out")
	p, err := startProcess("dm-worker w1", bin.worker, []string{
		"--name", "w1", "--etcd-endpoints", c.endpoints, "--etcd-prefix", c.prefix,
		"--status-addr", addr, "--data-dir", dataDir, "--keepalive-ttl", "2s",
		"--status-tls-cert", certs.ServerCert, "--status-tls-key", certs.ServerKey, "--status-tls-client-ca", certs.CA,
	}, outFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("dm-worker output:\n%s", tail(outFile, 30))
		}
	})

	caPEM, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	clientCert, err := tls.LoadX509KeyPair(certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	client := func(withCert bool) *http.Client {
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if withCert {
			cfg.Certificates = []tls.Certificate{clientCert}
		}
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	}
	testutil.Eventually(t, 20*time.Second, "HTTPS /healthz with a client certificate", func() error {
		if p.exited() {
			t.Fatalf("dm-worker exited:\n%s", tail(outFile, 20))
		}
		resp, err := client(true).Get("https://" + addr + "/healthz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /healthz: %s", resp.Status)
		}
		return nil
	})
	if _, err := client(false).Get("https://" + addr + "/healthz"); err == nil {
		t.Error("served a client without a certificate")
	}
	if r, err := httpDo(http.MethodGet, "http://"+addr+"/healthz", ""); err == nil && r.code == http.StatusOK {
		t.Error("served plain HTTP")
	}

	for _, d := range []string{dataDir, filepath.Join(dataDir, "relay")} {
		st, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if perm := st.Mode().Perm(); perm&^0o750 != 0 {
			t.Errorf("%s has mode %04o, want at most 0750", d, perm)
		}
	}

	// dmctl talks to the worker's HTTPS API with a client certificate: the
	// worker's own answer (relay not running) comes back.
	c.ok("source", "create", writeFile(t, "source.yaml", fmt.Sprintf(
		"source-id: %s\nflavor: mariadb\nfrom: {host: 127.0.0.1, port: %d, user: root, password: \"\"}\n", replSource, testutil.MustFreePort(t))), "--worker", "w1")
	c.waitWorkerAlive("w1")
	// The purge below must reach a worker that took the binding, or it
	// answers not-bound instead of the relay-not-enabled looked for.
	testutil.Eventually(t, 10*time.Second, "w1 reports source "+replSource+" over HTTPS", func() error {
		resp, err := client(true).Get("https://" + addr + "/api/v1/status")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var st workerStatus
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return fmt.Errorf("GET /api/v1/status: %s: %w", resp.Status, err)
		}
		if st.Source != replSource {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	tlsFlags := []string{"--status-tls-ca", certs.CA, "--status-tls-cert", certs.ClientCert, "--status-tls-key", certs.ClientKey}
	r := c.run(append(tlsFlags, "relay", "purge", replSource, "--inactive")...)
	if r.code != 1 || !strings.Contains(r.stderr, "relay-not-enabled") {
		t.Errorf("dmctl relay purge over HTTPS: exit %d, want the worker's relay-not-enabled:\n%s", r.code, r.stderr)
	}
	r = c.run("relay", "purge", replSource, "--inactive")
	if r.code != 1 || strings.Contains(r.stderr, "relay-not-enabled") {
		t.Errorf("dmctl relay purge over plain HTTP reached the handler: exit %d:\n%s", r.code, r.stderr)
	}
}

// dmEncrypt is DM's `dmctl encrypt` (before v8: its published default key):
// base64(iv || '@' || AES-256-CFB(plaintext)).
func dmEncrypt(t *testing.T, plaintext string) string {
	t.Helper()
	key, _ := hex.DecodeString("a529b7665997f043a30ac8fadcb51d6aa032c226ab5b7750530b12b8c1a16a48")
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	iv := []byte("0123456789abcdef")
	out := append(append([]byte{}, iv...), '@')
	ct := make([]byte, len(plaintext))
	cipher.NewCFBEncrypter(block, iv).XORKeyStream(ct, []byte(plaintext)) // DM's scheme is CFB
	return base64.StdEncoding.EncodeToString(append(out, ct...))
}

// secUser creates user@127.0.0.1 with password and every privilege.
func secUser(t *testing.T, in *mariadbtest.Instance, user, password string) {
	t.Helper()
	in.Exec(t, fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'", user, password))
	in.Exec(t, fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO '%s'@'127.0.0.1'", user))
}

// TestEncryptedPasswordsEndToEnd: a source whose password DM's dmctl
// encrypted and a target whose password our dmctl encrypted replicate with
// a worker given --secret-key-path; a task whose password was encrypted
// with another key shows a clear non-resumable error and writes nothing.
func TestEncryptedPasswordsEndToEnd(t *testing.T) {
	const srcPw, tgtPw = "Src-Pw-dm-8841", "Tgt-Pw-ours-2290"
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true})
	tgt := mariadbtest.StartTarget(t)
	secUser(t, src, "dm_enc", srcPw)
	secUser(t, tgt, "dm_enc", tgtPw)
	keyFile := secKeyFile(t, "secret.key", secTestKeyHex+"\n", 0o600)
	otherKey := secKeyFile(t, "other.key", strings.Repeat("5a", 32)+"\n", 0o600)

	c := newEtcdCluster(t)
	w := startWorker(t, workerOptions{name: replWorker, endpoints: c.endpoints, prefix: c.prefix,
		args: []string{"--secret-key-path", keyFile}})
	c.waitWorkerAlive(replWorker)
	encrypt := func(key, plain string) string {
		t.Helper()
		return strings.TrimSpace(c.ok("--secret-key-path", key, "encrypt", plain).stdout)
	}

	file, pos, _ := src.MasterStatus(t)
	c.ok("source", "create", writeFile(t, "source.yaml", fmt.Sprintf(`source-id: %s
flavor: mariadb
from: {host: 127.0.0.1, port: %d, user: dm_enc, password: %q}
checker: {check-enable: true, backoff-min: 200ms, backoff-max: 1s}
`, replSource, src.Port(), dmEncrypt(t, srcPw))), "--worker", replWorker)
	task := func(name, password string) string {
		return writeFile(t, name+".yaml", fmt.Sprintf(`name: %s
task-mode: incremental
target-database: {host: 127.0.0.1, port: %d, user: dm_enc, password: %q}
mysql-instances:
  - source-id: %s
    meta: {binlog-name: %s, binlog-pos: %d}
    block-allow-list: only
block-allow-list:
  only: {do-dbs: [%s]}
`, name, tgt.Port(), password, replSource, file, pos, "enc_"+name))
	}
	c.ok("task", "start", task("good", encrypt(keyFile, tgtPw)))
	c.ok("task", "start", task("wrongkey", encrypt(otherKey, tgtPw)))

	src.Exec(t, "CREATE DATABASE enc_good")
	src.Exec(t, "CREATE TABLE enc_good.t (id INT PRIMARY KEY, v VARCHAR(20))")
	src.Exec(t, "INSERT INTO enc_good.t VALUES (1, 'a'), (2, 'b')")
	src.Exec(t, "CREATE DATABASE enc_wrongkey")
	src.Exec(t, "CREATE TABLE enc_wrongkey.t (id INT PRIMARY KEY)")
	tgtDB := tgt.DB(t)
	testutil.Eventually(t, 30*time.Second, "rows replicated with decrypted passwords", func() error {
		var n int
		if err := tgtDB.QueryRow("SELECT COUNT(*) FROM enc_good.t").Scan(&n); err != nil {
			return err
		}
		if n != 2 {
			return fmt.Errorf("%d of 2 rows on the target", n)
		}
		return nil
	})
	w.waitStatus(10*time.Second, "wrongkey reported as password-undecryptable", func(st workerStatus) bool {
		return st.hasError("wrongkey", "password-undecryptable")
	})
	for _, e := range w.status().Errors {
		if e.Task == "wrongkey" {
			if e.Resumable || !strings.Contains(e.Message, keyFile) || !strings.Contains(e.Message, "dmctl encrypt") {
				t.Errorf("wrongkey error: %+v", e)
			}
		}
	}
	var n int
	if err := tgtDB.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'enc_wrongkey'").Scan(&n); err != nil || n != 0 {
		t.Errorf("the task with the undecryptable password wrote to the target (%d, %v)", n, err)
	}
}
