package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/tests/tlstest"
)

func rightCA(f tlstest.Files) string { return f.CA }
func otherCA(f tlstest.Files) string { return f.OtherCA }

// TestTLSSourceAndTarget replicates from a TLS-only source to a TLS-only
// target, with the relay and without it (the sync unit then dumps binlog
// from the source itself), and ends with target == source.
func TestTLSSourceAndTarget(t *testing.T) {
	for _, relay := range []bool{true, false} {
		t.Run(fmt.Sprintf("relay=%t", relay), func(t *testing.T) {
			r := startReplication(t, replOptions{relay: relay, tls: true, sourceCA: rightCA, targetCA: rightCA})
			wl := startWorkload(t, r.srcDB, 2)
			wl.waitCommits(t, 60*time.Second, 400)
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
	r := startReplication(t, replOptions{tls: true, sourceCA: rightCA, targetCA: otherCA, noWait: true})
	files := r.tls
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
	r := startReplication(t, replOptions{relay: true, tls: true, sourceCA: otherCA, targetCA: rightCA, noWait: true})
	files := r.tls
	var msg string
	testutil.Eventually(t, 30*time.Second, "the relay pauses with a TLS error", func() error {
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
		if err != nil {
			return err
		}
		if res.code != http.StatusOK {
			return fmt.Errorf("GET /api/v1/status: %d %s", res.code, res.body)
		}
		if err := json.Unmarshal([]byte(res.body), &doc); err != nil {
			return fmt.Errorf("GET /api/v1/status: %w\n%s", err, res.body)
		}
		if doc.Relay.Stage != "Paused" || len(doc.Relay.Errors) == 0 {
			return fmt.Errorf("relay %+v", doc.Relay)
		}
		e := doc.Relay.Errors[0]
		if e.Resumable {
			t.Fatalf("relay error is resumable: %+v", e)
		}
		msg = e.Message
		return nil
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
	r := startReplication(t, replOptions{tls: true, sourceCA: otherCA, targetCA: rightCA, noWait: true})
	files := r.tls
	r.waitPausedByTLS("db-tls", []string{files.OtherCA, "from.security.ssl-ca", `source "` + replSource + `"`}, 3*time.Second)
}

// waitPausedByTLS waits for the subtask to pause with a non-resumable error
// (of code, unless code is "") whose message names each of wants, then
// checks that it stays paused with that same error for stable: the
// auto-resume checker (backoff 200ms..1s) must leave it alone.
func (r *replication) waitPausedByTLS(code string, wants []string, stable time.Duration) {
	t := r.t
	t.Helper()
	failed := r.waitSubtask(30*time.Second, "the subtask pauses with a TLS error", func(d subtaskDoc) bool {
		return d.Stage == "Paused" && len(d.Errors) > 0
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
	testutil.Consistently(t, stable, "the subtask stays paused with the TLS error", func() error {
		d, err := r.subtask()
		if err != nil {
			return err
		}
		if d.Stage != "Paused" || len(d.Errors) == 0 || d.Errors[0].Message != e.Message {
			return fmt.Errorf("subtask %v", d)
		}
		return nil
	})
	t.Logf("status error: %s: %s", e.Code, e.Message)
}
