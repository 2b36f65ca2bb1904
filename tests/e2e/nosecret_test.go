package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/tests/tlstest"
)

// TestNoSecretAnywhere makes the worker's connections fail in every way it
// can — source on a closed port, wrong source password, a password encrypted
// with another key, a target with a wrong password (full of characters that
// need escaping in a DSN), a target whose certificate the configured CA did
// not sign — then lets everything work, and asserts that no password, no
// encryption key and no etcd password appears in the worker's log (text and
// json formats), its output, GET /api/v1/status, P/status/{worker}, or the
// output of dmctl (including dmctl's own failure with a wrong etcd password).
func TestNoSecretAnywhere(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) { testNoSecret(t, format) })
	}
}

// secretSet is every secret of one run, by what it is.
type secretSet map[string]string

func newHexKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func testNoSecret(t *testing.T, logFormat string) {
	secrets := secretSet{
		"source password":     `Src!p@ss:w/rd?#&%"` + "'x;",
		"target password":     `Tgt p@ss:w/rd?%2F#&=+"` + "'y",
		"wrong password":      `Wr0ng!p@ss:%40/#?&`,
		"encryption key":      newHexKey(t),
		"other key":           newHexKey(t),
		"etcd password":       `Etcd!p@ss:w/rd#%`,
		"wrong etcd password": `n0t-the-Etcd-p@ss#%`,
	}
	keyFile := writeKeyFile(t, "secret.key", secrets["encryption key"])
	otherKeyFile := writeKeyFile(t, "other.key", secrets["other key"])

	certs := tlstest.Generate(t, tlstest.Options{})
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "source", Binlog: true})
	tgt := mariadbtest.Start(t, mariadbtest.Options{Name: "target", TLS: &mariadbtest.TLS{CA: certs.CA, Cert: certs.ServerCert, Key: certs.ServerKey}})
	createUser(t, src, "dm_secret", secrets["source password"])
	createUser(t, tgt, "dm_secret", secrets["target password"])

	etcd := etcdtest.Start(t)
	c := &cluster{t: t, endpoints: strings.Join(etcd.Endpoints(), ","), prefix: testPrefix, direct: etcd.DirectClient(t)}
	etcdtest.EnableAuth(t, c.direct, c.prefix, "dm", secrets["etcd password"])
	etcdAuth := &authedEtcd{cli: etcd.AuthClient(t, "dm", secrets["etcd password"]), prefix: c.prefix}
	authArgs := []string{"--etcd-username", "dm", "--etcd-password", secrets["etcd password"]}
	dmctl := func(args ...string) dmctlResult {
		t.Helper()
		return c.run(append(append([]string{"--secret-key-path", keyFile}, authArgs...), args...)...)
	}
	encrypt := func(keyPath, plain string) string {
		t.Helper()
		r := c.run("--secret-key-path", keyPath, "encrypt", plain)
		if r.code != 0 {
			t.Fatalf("dmctl encrypt: exit %d: %s", r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}

	w := startWorker(t, workerOptions{
		name: replWorker, endpoints: c.endpoints, prefix: c.prefix,
		args: append([]string{"--log-format", logFormat, "--secret-key-path", keyFile}, authArgs...),
	})
	var outputs []string // every dmctl output and HTTP body collected
	collect := func(what string, r dmctlResult) {
		outputs = append(outputs, what+" stdout: "+r.stdout, what+" stderr: "+r.stderr)
	}

	putSource := func(port int, password string) {
		t.Helper()
		v := fmt.Sprintf(`{"source-id":%q,"enable-relay":true,"from":{"host":"127.0.0.1","port":%d,"user":"dm_secret","password":%q},`+
			`"checker":{"backoff-min":"200ms","backoff-max":"1s"}}`, replSource, port, password)
		etcdAuth.put(t, "/source/config/"+replSource, v)
	}
	statusHas := func(what, sub string) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, what, func() error {
			r, err := httpDo(http.MethodGet, w.url("/api/v1/status"), "")
			if err != nil {
				return err
			}
			outputs = append(outputs, "status: "+r.body)
			if !strings.Contains(r.body, sub) {
				return fmt.Errorf("status lacks %q: %s", sub, r.body)
			}
			return nil
		})
	}

	// The source on a closed port, its password encrypted.
	putSource(testutil.MustFreePort(t), encrypt(keyFile, secrets["source password"]))
	etcdAuth.put(t, "/stage/relay/"+replSource, `{"expect":"Running"}`)
	etcdAuth.put(t, "/source/bound/"+replWorker, fmt.Sprintf(`{"source":%q,"worker":%q}`, replSource, replWorker))
	statusHas("relay reports the closed port", "refused")

	// The wrong password, in plain text.
	putSource(src.Port(), secrets["wrong password"])
	statusHas("relay reports the wrong password", "Access denied")

	// The right password, encrypted with another key.
	putSource(src.Port(), encrypt(otherKeyFile, secrets["source password"]))
	statusHas("the password encrypted with another key is reported", "secret-key-path")

	// The right password, encrypted with the worker's key: relay runs.
	putSource(src.Port(), encrypt(keyFile, secrets["source password"]))
	testutil.Eventually(t, 30*time.Second, "relay runs without errors", func() error {
		r, err := httpDo(http.MethodGet, w.url("/api/v1/status"), "")
		if err != nil {
			return err
		}
		if !strings.Contains(r.body, `"stage":"Running"`) || strings.Contains(r.body, "Access denied") ||
			strings.Contains(r.body, "secret-key-path") {
			return fmt.Errorf("status %s", r.body)
		}
		return nil
	})

	file, pos, _ := src.MasterStatus(t)
	task := func(password, ca string) string {
		return fmt.Sprintf(`name: %s
task-mode: incremental
target-database:
  host: 127.0.0.1
  port: %d
  user: dm_secret
  password: %q
  security: {ssl-ca: %q}
mysql-instances:
  - source-id: %s
    meta: {binlog-name: %s, binlog-pos: %d}
    block-allow-list: only
block-allow-list:
  only: {do-dbs: [%s]}
`, replTask, tgt.Port(), password, ca, replSource, file, pos, crashDB)
	}
	// The target with a wrong password (plain text), then the right one
	// behind a CA that did not sign the target's certificate.
	r := dmctl("task", "start", writeFile(t, "task-wrong-pw.yaml", task(secrets["wrong password"], certs.CA)))
	collect("task start (wrong target password)", r)
	if r.code != 0 {
		t.Fatalf("dmctl task start: exit %d: %s", r.code, r.stderr)
	}
	statusHas("the subtask reports the wrong target password", "Access denied")
	collect("task status", dmctl("task", "status", replTask))
	collect("task config", dmctl("task", "config", replTask))

	restart := func(what string) {
		t.Helper()
		collect("task stop", dmctl("task", "stop", replTask))
		testutil.Eventually(t, 10*time.Second, "the subtask is gone after "+what, func() error {
			r, err := httpDo(http.MethodGet, w.url("/api/v1/subtasks/"+replTask), "")
			if err != nil {
				return err
			}
			if r.code != http.StatusNotFound {
				return fmt.Errorf("GET /api/v1/subtasks/%s: %d %s", replTask, r.code, r.body)
			}
			return nil
		})
	}
	restart("the wrong target password")
	r = dmctl("task", "start", writeFile(t, "task-wrong-ca.yaml", task(encrypt(keyFile, secrets["target password"]), certs.OtherCA)))
	collect("task start (wrong CA)", r)
	statusHas("the subtask reports the certificate the CA did not sign", "certificate")

	// Everything right: rows replicate.
	restart("the wrong CA")
	r = dmctl("task", "start", writeFile(t, "task-ok.yaml", task(encrypt(keyFile, secrets["target password"]), certs.CA)))
	collect("task start (right)", r)
	src.Exec(t, "CREATE DATABASE "+crashDB)
	src.Exec(t, "CREATE TABLE "+crashDB+".t (id INT PRIMARY KEY, v VARCHAR(20))")
	src.Exec(t, "INSERT INTO "+crashDB+".t VALUES (1, 'one'), (2, 'two')")
	tgtDB := tgt.DB(t)
	testutil.Eventually(t, 30*time.Second, "the rows arrive over TLS with the decrypted password", func() error {
		var n int
		if err := tgtDB.QueryRow("SELECT COUNT(*) FROM " + crashDB + ".t").Scan(&n); err != nil {
			return err
		}
		if n != 2 {
			return fmt.Errorf("%d of 2 rows on the target", n)
		}
		return nil
	})

	// dmctl in every way that prints configs or fails on credentials.
	collect("task status", dmctl("task", "status", replTask))
	collect("task config", dmctl("task", "config", replTask))
	collect("worker list", dmctl("worker", "list"))
	collect("task start --dry-run", dmctl("task", "start", "--dry-run", writeFile(t, "task-dry.yaml", task(secrets["target password"], certs.CA))))
	collect("source create --dry-run", dmctl("source", "create", "--dry-run", writeFile(t, "source-dry.yaml", fmt.Sprintf(
		"source-id: %s\nfrom: {host: 127.0.0.1, port: %d, user: dm_secret, password: %q}\n", replSource, src.Port(), secrets["source password"]))))
	bad := c.run("--etcd-username", "dm", "--etcd-password", secrets["wrong etcd password"], "worker", "list")
	collect("dmctl with a wrong etcd password", bad)
	if bad.code == 0 {
		t.Errorf("dmctl with a wrong etcd password succeeded: %s", bad.stdout)
	}
	for _, path := range []string{"/api/v1/status", "/api/v1/subtasks/" + replTask, "/metrics"} {
		if r, err := httpDo(http.MethodGet, w.url(path), ""); err == nil {
			outputs = append(outputs, "GET "+path+": "+r.body)
		}
	}
	outputs = append(outputs, "P/status: "+etcdAuth.get(t, "/status/"+replWorker))

	w.terminate(10 * time.Second)
	for _, f := range []string{w.logFile, w.outFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 && f == w.logFile {
			t.Fatalf("the worker's log %s is empty: nothing was checked", f)
		}
		outputs = append(outputs, filepath.Base(f)+": "+string(b))
	}
	if logFormat == "json" && !strings.HasPrefix(strings.TrimSpace(outputs[len(outputs)-2]), "dm-worker.log: {") {
		t.Errorf("the log is not JSON lines: %.200s", outputs[len(outputs)-2])
	}
	for _, out := range outputs {
		for what, s := range secrets {
			for _, form := range secretForms(s) {
				if i := strings.Index(out, form); i >= 0 {
					lo, hi := max(0, i-150), min(len(out), i+len(form)+50)
					t.Errorf("the %s appears in %s", what, strings.ReplaceAll(out[:min(len(out), 60)], "\n", " ")+"…: "+out[lo:hi])
				}
			}
		}
	}
}

// secretForms are the ways a secret could be written: as is, JSON-escaped,
// URL-escaped.
func secretForms(s string) []string {
	j, _ := json.Marshal(s)
	forms := []string{s, string(j[1 : len(j)-1]), url.QueryEscape(s), url.PathEscape(s)}
	return forms
}

// writeKeyFile writes a 0600 key file of 64 hex characters.
func writeKeyFile(t *testing.T, name, hexKey string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(hexKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// createUser creates user@127.0.0.1 with password and every privilege.
func createUser(t *testing.T, in *mariadbtest.Instance, user, password string) {
	t.Helper()
	quoted := "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(password) + "'"
	in.Exec(t, fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY %s", user, quoted))
	in.Exec(t, fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO '%s'@'127.0.0.1'", user))
}

// authedEtcd is a client of a user whose role covers only the prefix.
type authedEtcd struct {
	cli    *clientv3.Client
	prefix string
}

func (e *authedEtcd) put(t *testing.T, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.cli.Put(ctx, e.prefix+key, value); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func (e *authedEtcd) get(t *testing.T, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := e.cli.Get(ctx, e.prefix+key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}
