package e2e

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// runWorkerOnce runs dm-worker with args, expecting it to exit on its own
// within 30 s, and returns its exit code and output.
func runWorkerOnce(t *testing.T, args ...string) (int, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "dm-worker.out")
	p, err := startProcess("dm-worker", bin.worker, args, out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(t) })
	code, err := p.wait(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return code, tail(out, 50)
}

// TestWorkerFlagsAndStartupErrors checks the exits that need no running
// worker: --version, invalid flag values, a status address in use.
func TestWorkerFlagsAndStartupErrors(t *testing.T) {
	t.Run("version", func(t *testing.T) {
		code, out := runWorkerOnce(t, "--version")
		if code != 0 || !strings.HasPrefix(out, "dm-worker "+stampedVersion+" (git e2e,") {
			t.Errorf("--version: exit %d, output %q; want 0 and the stamped version", code, out)
		}
		r := runDmctl(t, "--version")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "dmctl "+stampedVersion) {
			t.Errorf("dmctl --version: exit %d, output %q", r.code, r.stdout)
		}
	})

	invalid := []struct {
		name string
		args []string
		want []string
	}{
		{"log-format", []string{"--log-format", "xml"}, []string{"log-format", "xml", "text or json"}},
		{"log-level", []string{"--log-level", "loud"}, []string{"log-level", "loud"}},
		{"keepalive-ttl", []string{"--keepalive-ttl", "10"}, []string{"keepalive-ttl"}},
		{"keepalive-ttl too short", []string{"--keepalive-ttl", "100ms"}, []string{"keepalive-ttl", "at least 1s"}},
		{"name", []string{"--name", "w 1"}, []string{"name", "w 1"}},
		{"status-addr", []string{"--status-addr", "nowhere"}, []string{"status-addr", "host:port"}},
		{"etcd-endpoints", []string{"--etcd-endpoints", "127.0.0.1:2379"}, []string{"etcd-endpoints", "http"}},
		{"unknown flag", []string{"--colour", "red"}, []string{"colour"}},
		{"positional argument", []string{"start"}, []string{"unexpected arguments"}},
		{"missing config file", []string{"--config", "/nonexistent/dm-worker.toml"}, []string{"/nonexistent/dm-worker.toml"}},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			// Nothing listens on the endpoint: a worker that got past
			// validation would fail differently (and later).
			args := append([]string{"--etcd-endpoints", "http://" + testutil.FreeAddr(t), "--data-dir", t.TempDir()}, tc.args...)
			code, out := runWorkerOnce(t, args...)
			if code != 1 {
				t.Fatalf("%v: exit %d, want 1\n%s", tc.args, code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out)
				}
			}
		})
	}

	t.Run("status-addr in use", func(t *testing.T) {
		c := newEtcdCluster(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		code, out := runWorkerOnce(t, "--name", "w1", "--etcd-endpoints", c.endpoints, "--etcd-prefix", c.prefix,
			"--status-addr", ln.Addr().String(), "--data-dir", t.TempDir())
		if code != 1 {
			t.Fatalf("exit %d, want 1\n%s", code, out)
		}
		for _, w := range []string{ln.Addr().String(), "address already in use", "--status-addr"} {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
		if keys := c.keys(); len(keys) != 0 {
			t.Errorf("a worker that could not serve left keys in etcd: %v", keys)
		}
	})
}
