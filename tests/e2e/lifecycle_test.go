package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

const testPrefix = "/e2e"

// newEtcdCluster starts an embedded etcd for one test and returns the
// cluster dmctl and the workers use, with a direct client.
func newEtcdCluster(t *testing.T) *cluster {
	t.Helper()
	etcd := etcdtest.Start(t)
	return &cluster{t: t, endpoints: strings.Join(etcd.Endpoints(), ","), prefix: testPrefix, direct: etcd.DirectClient(t)}
}

// TestWorkerRegisterBindUnbindStop is issue 4's acceptance path: a worker
// process registers, is bound and unbound by dmctl, and on SIGTERM exits 0
// and revokes its lease.
func TestWorkerRegisterBindUnbindStop(t *testing.T) {
	c := newEtcdCluster(t)
	w := startWorker(t, workerOptions{name: "w1", endpoints: c.endpoints, prefix: c.prefix})

	testutil.Eventually(t, 10*time.Second, "dmctl worker list shows w1 alive at its status address "+w.addr, func() error {
		var doc workerListDoc
		c.json(&doc, "worker", "list")
		if len(doc.Workers) != 1 || doc.Workers[0].Name != "w1" || !doc.Workers[0].Alive || doc.Workers[0].Addr != w.addr {
			return fmt.Errorf("worker list %+v", doc.Workers)
		}
		return nil
	})
	if st := w.status(); st.Worker != "w1" || st.Addr != w.addr || st.Source != "" || st.Relay.Enabled {
		t.Fatalf("status before binding = %+v", st)
	}

	c.ok("source", "create", writeFile(t, "mysql-01.yaml", sourceYAML("mysql-01")), "--worker", "w1")
	w.waitStatus(10*time.Second, "status shows source mysql-01", func(st workerStatus) bool { return st.Source == "mysql-01" })
	if st := w.status(); len(st.Errors) != 0 {
		t.Errorf("bound worker reports errors: %+v", st.Errors)
	}
	var workers workerListDoc
	c.json(&workers, "worker", "list")
	if workers.Workers[0].Source != "mysql-01" {
		t.Errorf("worker list after source create = %+v", workers)
	}

	c.ok("unbind", "w1")
	w.waitStatus(10*time.Second, `status shows source ""`, func(st workerStatus) bool { return st.Source == "" })

	keepalive, status := testPrefix+"/worker/keepalive/w1", testPrefix+"/status/w1"
	testutil.WaitFor(t, 10*time.Second, "status key published", func() bool { _, ok := c.keys()[status]; return ok })
	w.terminate(10 * time.Second)
	keys := c.keys()
	for _, k := range []string{keepalive, status} {
		if v, ok := keys[k]; ok {
			t.Errorf("%s still exists right after a graceful stop (lease not revoked): %s", k, v)
		}
	}
	if _, ok := keys[testPrefix+"/worker/info/w1"]; !ok {
		t.Error("worker info key deleted on stop; it stays so the master knows the worker")
	}
	c.json(&workers, "worker", "list")
	if len(workers.Workers) != 1 || workers.Workers[0].Alive {
		t.Errorf("worker list after stop = %+v, want w1 not alive", workers)
	}
	if log := tail(w.logFile, 5); !strings.Contains(log, "dm-worker stopped") {
		t.Errorf("log does not end with the stop message:\n%s", log)
	}
}
