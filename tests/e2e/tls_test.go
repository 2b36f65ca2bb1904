package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/tlstest"
)

// startTLSReplication is startReplication with a source and a target that
// accept only TLS (require_secure_transport=ON); the source and the task
// file carry security blocks with sourceCA and targetCA as ssl-ca. With
// wantSync the tables are created on the source and the test waits until
// they exist on the target.
func startTLSReplication(t *testing.T, relay bool, sourceCA, targetCA func(tlstest.Files) string, wantSync bool) (*replication, tlstest.Files) {
	t.Helper()
	files := tlstest.Generate(t, tlstest.Options{})
	serverTLS := &mariadbtest.TLS{CA: files.CA, Cert: files.ServerCert, Key: files.ServerKey, Require: true}
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "tls-source", Binlog: true, MaxBinlogSize: 256 << 10, TLS: serverTLS})
	tgt := mariadbtest.Start(t, mariadbtest.Options{Name: "tls-target", TLS: serverTLS})
	r := &replication{t: t, src: src, tgt: tgt, c: newEtcdCluster(t)}
	r.srcDB, r.tgtDB = r.src.DB(t), r.tgt.DB(t)
	r.wopts = workerOptions{name: replWorker, endpoints: r.c.endpoints, prefix: r.c.prefix, dataDir: t.TempDir()}
	r.w = startWorker(t, r.wopts)
	waitFor(t, 10*time.Second, "dmctl worker list shows w1 alive", func() bool {
		var doc workerListDoc
		r.c.json(&doc, "worker", "list")
		return len(doc.Workers) == 1 && doc.Workers[0].Alive
	})

	file, pos, _ := r.src.MasterStatus(t)
	r.c.ok("source", "create", writeFile(t, "source.yaml", fmt.Sprintf(`source-id: %s
flavor: mariadb
enable-relay: %t
from:
  host: 127.0.0.1
  port: %d
  user: root
  password: ""
  security: {ssl-ca: %q, cert-allowed-cn: [%s]}
checker: {check-enable: true, backoff-min: 200ms, backoff-max: 1s}
`, replSource, relay, r.src.Port(), sourceCA(files), tlstest.ServerCN)), "--worker", replWorker)
	r.c.ok("task", "start", writeFile(t, "task.yaml", fmt.Sprintf(`name: %s
task-mode: incremental
target-database:
  host: 127.0.0.1
  port: %d
  user: root
  password: ""
  max-allowed-packet: 16MiB
  session: {sql_mode: "NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION", innodb_lock_wait_timeout: "20"}
  security: {ssl-ca: %q}
mysql-instances:
  - source-id: %s
    meta: {binlog-name: %s, binlog-pos: %d}
    block-allow-list: only-crash
    syncer-config-name: small
block-allow-list:
  only-crash: {do-dbs: [%s]}
syncers:
  small: {worker-count: 4, batch: 20, checkpoint-flush-interval: 1}
`, replTask, r.tgt.Port(), targetCA(files), replSource, file, pos, crashDB)))

	r.src.Exec(t, "CREATE DATABASE "+crashDB)
	for _, tb := range crashTables {
		r.src.Exec(t, tb.ddl)
	}
	if wantSync {
		waitFor(t, 30*time.Second, "the task runs and created every table on the target", func() bool {
			var n int
			err := r.tgtDB.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", crashDB).Scan(&n)
			return err == nil && n == len(crashTables)
		})
	}
	return r, files
}

func rightCA(f tlstest.Files) string { return f.CA }
func otherCA(f tlstest.Files) string { return f.OtherCA }

// TestTLSSourceAndTarget replicates from a TLS-only source to a TLS-only
// target, with the relay and without it (the sync unit then dumps binlog
// from the source itself), and ends with target == source.
func TestTLSSourceAndTarget(t *testing.T) {
	for _, relay := range []bool{true, false} {
		t.Run(fmt.Sprintf("relay=%t", relay), func(t *testing.T) {
			r, _ := startTLSReplication(t, relay, rightCA, rightCA, true)
			wl := startWorkload(t, r.srcDB, 2)
			waitFor(t, 60*time.Second, "the workload commits 400 transactions", func() bool { return wl.commits.Load() >= 400 })
			if err := wl.stop(); err != nil {
				t.Fatal(err)
			}
			t.Logf("workload: %s", wl)
			r.waitCaughtUp(60 * time.Second)
			st, err := r.subtask()
			if err != nil || !st.syncing() {
				t.Fatalf("subtask after catching up: %v %v", st, err)
			}
			if relay {
				rd, err := r.relay()
				if err != nil || rd.Stage != "Running" || len(rd.Errors) != 0 {
					t.Fatalf("relay: %+v %v", rd, err)
				}
			}
		})
	}
}

// TestTLSWrongTargetCA: a task whose target-database.security.ssl-ca is
// not the CA of the target's certificate pauses with a non-resumable error
// naming that file, stays paused (the auto-resume checker does not retry
// it), and writes nothing to the target.
func TestTLSWrongTargetCA(t *testing.T) {
	r, files := startTLSReplication(t, false, rightCA, otherCA, false)
	r.src.Exec(t, "INSERT INTO crash.accounts VALUES (1, 'a', 1, NULL, 0, 'basic', NULL, NOW(6), NULL, NULL)")

	r.waitPausedByTLS("", []string{files.OtherCA, "target-database.security.ssl-ca", `task "` + replTask + `"`}, 4*time.Second)
	var n int
	if err := r.tgtDB.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME IN ('dm_meta', ?)", crashDB).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the target has %d of the schemas dm_meta and %s; nothing may be written through a connection whose server was not verified", n, crashDB)
	}
}

// TestTLSWrongSourceCAStopsRelay: a source whose from.security.ssl-ca is
// not the CA of the source's certificate pauses the relay with a
// non-resumable db-tls error naming the file; the relay does not retry.
func TestTLSWrongSourceCAStopsRelay(t *testing.T) {
	r, files := startTLSReplication(t, true, otherCA, rightCA, false)
	var msg string
	waitFor(t, 30*time.Second, "the relay pauses with a TLS error", func() bool {
		var doc struct {
			Relay struct {
				Stage  string `json:"stage"`
				Errors []struct {
					Code      string `json:"code"`
					Message   string `json:"message"`
					Resumable bool   `json:"resumable"`
				} `json:"errors"`
			} `json:"relay"`
		}
		res, err := httpDo(http.MethodGet, r.w.url("/api/v1/status"), "")
		if err != nil || res.code != http.StatusOK || json.Unmarshal([]byte(res.body), &doc) != nil {
			return false
		}
		if doc.Relay.Stage != "Paused" || len(doc.Relay.Errors) == 0 {
			return false
		}
		e := doc.Relay.Errors[0]
		if e.Resumable {
			t.Fatalf("relay error is resumable: %+v", e)
		}
		msg = e.Message
		return true
	})
	for _, want := range []string{files.OtherCA, "from.security.ssl-ca", `source "` + replSource + `"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("relay error does not name %q: %s", want, msg)
		}
	}
	t.Logf("relay error: %s", msg)
}

// TestTLSWrongSourceCAWithoutRelay: with relay off the sync unit dumps the
// binlog itself; a wrong from.security.ssl-ca pauses the subtask with a
// non-resumable error naming the file, and the checker leaves it paused.
func TestTLSWrongSourceCAWithoutRelay(t *testing.T) {
	r, files := startTLSReplication(t, false, otherCA, rightCA, false)
	r.waitPausedByTLS("db-tls", []string{files.OtherCA, "from.security.ssl-ca", `source "` + replSource + `"`}, 3*time.Second)
}

// waitPausedByTLS waits for the subtask to pause with a non-resumable error
// (of code, unless code is "") whose message names each of wants, then
// checks that it stays paused with that same error for stable: the
// auto-resume checker (backoff 200ms..1s) must leave it alone.
func (r *replication) waitPausedByTLS(code string, wants []string, stable time.Duration) {
	t := r.t
	t.Helper()
	var failed subtaskDoc
	waitFor(t, 30*time.Second, "the subtask pauses with a TLS error", func() bool {
		d, err := r.subtask()
		if err != nil || d.Stage != "Paused" || len(d.Errors) == 0 {
			return false
		}
		failed = d
		return true
	})
	e := failed.Errors[0]
	if e.Resumable || (code != "" && e.Code != code) {
		t.Errorf("error: code %q resumable %v, want %q, not resumable: %s", e.Code, e.Resumable, code, e.Message)
	}
	for _, want := range wants {
		if !strings.Contains(e.Message, want) {
			t.Errorf("error message does not name %q: %s", want, e.Message)
		}
	}
	until := time.Now().Add(stable)
	for time.Now().Before(until) {
		d, err := r.subtask()
		if err != nil {
			t.Fatal(err)
		}
		if d.Stage != "Paused" || len(d.Errors) == 0 || d.Errors[0].Message != e.Message {
			t.Fatalf("the subtask did not stay paused with the TLS error: %v", d)
		}
		time.Sleep(250 * time.Millisecond) // polling interval of a stability check, not synchronisation
	}
	t.Logf("status error: %s: %s", e.Code, e.Message)
}
