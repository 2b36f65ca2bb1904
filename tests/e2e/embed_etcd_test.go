package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// TestEmbeddedEtcdKeepsStateAcrossRestart runs a worker with --embed-etcd,
// drives it with dmctl from another process, restarts it on the same data
// dir and finds everything dmctl wrote.
func TestEmbeddedEtcdKeepsStateAcrossRestart(t *testing.T) {
	dataDir := t.TempDir()
	c := &cluster{t: t, endpoints: "http://" + testutil.FreeAddr(t), prefix: "/dm"}
	opts := workerOptions{name: "w1", endpoints: c.endpoints, dataDir: dataDir, embedEtcd: true, ready: 60 * time.Second}
	w := startWorker(t, opts)

	c.ok("source", "create", writeFile(t, "mysql-01.yaml", sourceYAML("mysql-01")), "--worker", "w1")
	c.ok("task", "start", writeFile(t, "task1.yaml", taskYAML("task1", "mysql-01")))
	// The task's target does not answer: the worker takes the task and
	// reports why it cannot run it.
	w.waitStatus(10*time.Second, "status reports task1's unreachable target", func(st workerStatus) bool {
		return st.Source == "mysql-01" && st.hasSubtaskError("task1", "unit-init")
	})
	testutil.Eventually(t, 15*time.Second, "dmctl task status shows the worker's error", func() error {
		var doc taskStatusDoc
		c.json(&doc, "task", "status", "task1")
		if len(doc.Sources) == 1 && doc.Sources[0].Worker == "w1" && doc.Sources[0].Expect == "Running" {
			var sub statusSubtask
			if json.Unmarshal(doc.Sources[0].Subtask, &sub) == nil && len(sub.Errors) > 0 && sub.Errors[0].Code == "unit-init" {
				return nil
			}
		}
		b, _ := json.Marshal(doc)
		return fmt.Errorf("task status %s", b)
	})

	w.terminate(10 * time.Second)
	w = startWorker(t, opts)

	var sources sourceListDoc
	c.json(&sources, "source", "list")
	if len(sources.Sources) != 1 || sources.Sources[0].Source != "mysql-01" || sources.Sources[0].Worker != "w1" {
		t.Errorf("source list after restart = %+v", sources)
	}
	var tasks taskListDoc
	c.json(&tasks, "task", "list")
	if len(tasks.Tasks) != 1 || tasks.Tasks[0].Task != "task1" || len(tasks.Tasks[0].Sources) != 1 ||
		tasks.Tasks[0].Sources[0].Source != "mysql-01" || tasks.Tasks[0].Sources[0].Stage != "Running" {
		t.Errorf("task list after restart = %+v", tasks)
	}
	w.waitStatus(10*time.Second, "restarted worker bound again from the kept keys", func(st workerStatus) bool {
		return st.Source == "mysql-01" && st.hasSubtaskError("task1", "unit-init")
	})
	if r := c.ok("task", "status", "task1"); !strings.Contains(r.stdout, "w1") {
		t.Errorf("task status text does not name the worker:\n%s", r.stdout)
	}
}
